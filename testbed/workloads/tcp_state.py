"""Where each connection of a captured collective left slow start, from the TCP state that
`suite.py capture_mpi --tcp-info-ms MS` samples into a log's `tcp_info`.

  python3 testbed/workloads/tcp_state.py LOG.json [LOG.json ...]

Per log, per connection between ranks that carried the collective (the one of each ordered
pair of ranks with the most bytes acknowledged; OpenMPI's out-of-band and gloo's other sockets
carry little): the slow-start threshold it first showed (the window at which it left slow
start: CUBIC's HyStart on a rising round trip or a long ACK train, or a loss), its window at
its first and last sample, and its median round trip, in segments and ms. Then the thresholds
of every connection of every log together: their quartiles. These are what a per-connection
window in the flow model would draw from (docs/testbed.md, "The ring's last rank enters 0.14
ms late, as captured").
"""
import json
import statistics
import sys

# Below this many bytes acknowledged a connection did not carry the collective.
MIN_BYTES_ACKED = 100_000


def connections(log):
    """Per ordered pair of ranks, the samples of its busiest connection, in time order."""
    cols = log["tcp_info_columns"]
    rows = [dict(zip(cols, r)) for r in log["tcp_info"]]
    most = {}
    for r in rows:
        key = (r["rank"], r["peer"])
        acked = r["bytes_acked"] or 0
        if acked > most.get(key, (None, 0))[1]:
            most[key] = (r["peer_port"], acked)
    out = {}
    for (a, b), (port, acked) in sorted(most.items()):
        if acked < MIN_BYTES_ACKED:
            continue
        out[(a, b)] = sorted((r for r in rows
                              if (r["rank"], r["peer"], r["peer_port"]) == (a, b, port)),
                             key=lambda r: r["secs"])
    return out


def main():
    thresholds = []
    for path in sys.argv[1:]:
        log = json.load(open(path))
        if "tcp_info" not in log:
            print(f"{path}: no tcp_info (captured without --tcp-info-ms)")
            continue
        print(f"{path}: {log['op']} {log['algorithm']}, {log['ranks']} ranks")
        for (a, b), samples in connections(log).items():
            first = next((s["ssthresh"] for s in samples if s["ssthresh"]), None)
            rtts = [s["rtt_ms"] for s in samples if s["rtt_ms"] is not None]
            if first is not None:
                thresholds.append(first)
            print(f"  {a} -> {b}: left slow start at "
                  f"{first if first is not None else 'not yet'} segments; window "
                  f"{samples[0]['cwnd']} -> {samples[-1]['cwnd']}; round trip median "
                  f"{statistics.median(rtts):.2f} ms over {len(samples)} samples")
    if len(thresholds) >= 4:
        q = statistics.quantiles(thresholds, n=4)
        print(f"all: {len(thresholds)} connections, slow start left at {min(thresholds)}-"
              f"{max(thresholds)} segments, quartiles {q[0]:.0f} / {q[1]:.0f} / {q[2]:.0f}")


if __name__ == "__main__":
    main()
