//! `calibrate`: produces and inspects the calibration profiles that dtsim replays. The command
//! line lives in [`calibrate::cli`]; run `calibrate --help` for commands and exit codes.

fn main() -> std::process::ExitCode {
    sim::pipe::end_quietly_on_closed_pipe();
    calibrate::cli::main()
}
