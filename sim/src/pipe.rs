//! Command-line output into a pipe that closes early (`dtsim run ... | head`).

/// Lets the process end quietly when the pipe it prints into is closed, as Unix tools do,
/// instead of panicking in `println!`: Rust's runtime ignores SIGPIPE, so writes fail with
/// EPIPE and `println!` panics on the error; with the default action the process just ends.
/// Call first thing in a binary's `main`.
pub fn end_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_DFL installs no handler and touches no
    // memory; it runs before the program starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
