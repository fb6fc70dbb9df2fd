#!/usr/bin/env python3
"""A captured collective beside dtsim's play of it, connection by connection.

Usage: compare_capture.py CAPTURE.json RUN_DIR

CAPTURE.json is a `suite.py capture_mpi` log (OpenMPI's rendezvous messages, or gloo's with
--gloo-method: its notifications in the answers' place); RUN_DIR is what `dtsim run --out`
wrote for the same collective, size and topology (timeline.csv and rank_timeline.csv, whose
`peer` column says who sent to whom). Per directed connection it prints how many messages of
each kind it carried per call and their median time from sent to arrived, captured and played,
and the calls' times. For OpenMPI's answers also `answer*`: from the arrival of the request
each answers to its own arrival, which holds what it waited at its sender (its host's queue
behind the sender's own data, its reaction): captured, the request arrived last before the
answer left; played, the answer op itself (it starts once its request arrived and its
receive was posted, which may be later than the request's arrival).

The two clocks differ at the sender: a captured message is `sent` when it left its host's
shaper (tcpdump on the host's link sees it after the qdisc), a played one when it was posted,
so a played answer's time includes what it waited behind its sender's own queue and a
captured one's does not (`answer*` holds it on both sides). And a
capture merges messages that follow each other on a connection with no gap into one (the
next request right behind a block's last byte): compare bytes per call where counts differ.
"""
import collections
import csv
import json
import os
import statistics
import sys

# Bytes on the wire of the handshake messages (suite.py capture_mpi's kinds; dtsim's
# library/mpi REQUEST_BYTES and ACK_BYTES, library/gloo PREAMBLE_BYTES).
REQUEST_BYTES = 40
ANSWER_BYTES = {"mpi": 64, "gloo": 48}


def captured(path):
    """Per (src, dst, kind): [(bytes, seconds from sent to arrived)]; the calls' median secs."""
    with open(path) as f:
        log = json.load(f)
    per = collections.defaultdict(list)
    for m in log["messages"]:
        # A message whose arrival the capture could not match has no crossing time.
        arrived = m.get("arrived_secs")
        secs = None if arrived is None else arrived - m["sent_secs"]
        per[(m["src"], m["dst"], m["kind"])].append((m["bytes"], secs))
    # An answer's time from the arrival of the request it answers (the last request the other
    # way that arrived before it left): what it waited at its sender, its own queue included.
    arrived = collections.defaultdict(list)
    for m in log["messages"]:
        if m["kind"] == "request" and m.get("arrived_secs") is not None:
            arrived[(m["src"], m["dst"])].append(m["arrived_secs"])
    for m in log["messages"]:
        if m["kind"] != "answer" or m.get("arrived_secs") is None:
            continue
        before = [t for t in arrived[(m["dst"], m["src"])] if t <= m["sent_secs"]]
        if before:
            per[(m["src"], m["dst"], "answer*")].append((m["bytes"], m["arrived_secs"] - max(before)))
    calls = log.get("call_secs_median_min_max", {})
    median = next(iter(calls.values()))[0] if calls else None
    library = "gloo" if ANSWER_BYTES["gloo"] in {m["bytes"] for m in log["messages"]
                                                 if m["kind"] == "answer"} else "mpi"
    return per, median, log.get("repeats"), library


def played(run_dir, library):
    """Per (src, dst, kind): [(bytes, seconds from posted to arrived)], and the call's secs."""
    ops = {}
    with open(os.path.join(run_dir, "timeline.csv")) as f:
        for r in csv.DictReader(f):
            if r["kind"] == "transfer":
                ops[r["op"]] = r
    per = collections.defaultdict(list)
    with open(os.path.join(run_dir, "rank_timeline.csv")) as f:
        rows = list(csv.DictReader(f))
    if rows and "peer" not in rows[0]:
        raise SystemExit(f"{run_dir}/rank_timeline.csv has no peer column: rerun with a newer dtsim")
    for r in rows:
        if r["role"] != "send" or r["op"] not in ops:
            continue
        op = ops[r["op"]]
        b = int(op["bytes_per_pair"])
        kind = ("request" if b == REQUEST_BYTES and library == "mpi" else
                "answer" if b == ANSWER_BYTES[library] else "data")
        secs = (float(op["end_us"]) - float(op["start_us"])) * 1e-6
        per[(int(r["endpoint"]), int(r["peer"]), kind)].append((b, secs))
        if kind == "answer" and library == "mpi":
            # Played from its request's arrival: the op starts once the request arrived and
            # the receive was posted.
            per[(int(r["endpoint"]), int(r["peer"]), "answer*")].append((b, secs))
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    return per, summary.get("time_ps", 0) * 1e-12


def median_ms(rows):
    secs = [s for _, s in rows if s is not None]
    return statistics.median(secs) * 1e3 if secs else float("nan")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    cap, cap_call, repeats, library = captured(sys.argv[1])
    sim, sim_call = played(sys.argv[2], library)
    calls = (repeats or 1) + 1  # the timed calls and the warm-up one
    print(f"{library}: call {cap_call * 1e3:.2f} ms captured (median of {repeats}), "
          f"{sim_call * 1e3:.2f} ms played")
    print(f"{'connection':>10}  {'kind':7}  {'per call':>17}  {'bytes per call':>21}  "
          f"{'median ms':>17}")
    print(f"{'':>10}  {'':7}  {'captured  played':>17}  {'captured     played':>21}  "
          f"{'captured  played':>17}")
    for key in sorted(set(cap) | set(sim)):
        src, dst, kind = key
        if kind == "other":
            continue
        c, p = cap.get(key, []), sim.get(key, [])
        print(f"{f'{src}->{dst}':>10}  {kind:7}  {len(c) / calls:8.1f}  {len(p):7d}  "
              f"{sum(b for b, _ in c) / calls:10.0f}  {sum(b for b, _ in p):9d}  "
              f"{median_ms(c):8.2f}  {median_ms(p):7.2f}")


if __name__ == "__main__":
    main()
