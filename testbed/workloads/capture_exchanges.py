"""The rendezvous exchanges between partners in a `suite.py capture_mpi` log: for each, how far
apart the two partners posted (their requests' departures) and which mode it ran in.

  python3 testbed/workloads/capture_exchanges.py LOG.json [--each] [--chain]

An exchange is a request each way between two ranks less than 200 ms apart, and the first data
message each way after them. It ran the slow way when the second way's data left after the first
way had delivered half of its own; otherwise both ways at once. Prints the count of each mode by
the partners' post skew (below 0.3 ms, 0.3-1, 1-5, 5 ms and more), and with --each every
exchange. What it showed for recursive doubling all_gathers of 4 MiB on the star
(`testbed_star4_200mbit.capture_mpi_rd_4m.json`) is in docs/testbed.md.

With --chain (four-rank captures, two pairs a step): the exchanges grouped into steps (those
starting within 20 ms of one another, each pair once) and the steps into calls (a step then
one of other pairs), and how often a call's second step ran slow (any of its pairs) after a
first that did and after one that did not: the numbers behind dtsim's STEPS_AFTER_SLOW and
SLOW_STEPS_AFTER_SLOW (sim/src/library/mpi/exchanges.rs).
"""
import json
import sys
from collections import Counter, defaultdict

PAIR_WINDOW_SECS = 0.2
BINS_MS = [(0.3, "<0.3 ms"), (1.0, "0.3-1 ms"), (5.0, "1-5 ms"), (float("inf"), ">=5 ms")]


def exchanges(messages):
    """(first request's time, (a, b), skew seconds, slow?, early poster's data first?)."""
    by_pair = defaultdict(list)
    for m in messages:
        if m["kind"] in ("request", "data") and m["arrived_secs"] is not None:
            by_pair[tuple(sorted((m["src"], m["dst"])))].append(m)
    out = []
    for pair, ms in by_pair.items():
        requests = [m for m in ms if m["kind"] == "request"]
        data = [m for m in ms if m["kind"] == "data" and m["bytes"] > 100_000]
        used = set()
        for i, a in enumerate(requests):
            if i in used:
                continue
            j = next((j for j in range(i + 1, len(requests)) if j not in used
                      and requests[j]["src"] == a["dst"]
                      and requests[j]["sent_secs"] - a["sent_secs"] < PAIR_WINDOW_SECS), None)
            if j is None:
                continue
            used.update((i, j))
            b = requests[j]
            da = next((d for d in data if d["src"] == a["src"]
                       and d["sent_secs"] >= a["sent_secs"] - 1e-4), None)
            db = next((d for d in data if d["src"] == b["src"]
                       and d["sent_secs"] >= a["sent_secs"] - 1e-4), None)
            if da is None or db is None:
                continue
            first, second = (da, db) if da["sent_secs"] <= db["sent_secs"] else (db, da)
            half_delivered = (first["sent_secs"] + first["arrived_secs"]) / 2
            out.append((a["sent_secs"], pair, b["sent_secs"] - a["sent_secs"],
                        second["sent_secs"] > half_delivered, first["src"] == a["src"]))
    return sorted(out)


STEP_WINDOW_SECS = 0.02
CALL_WINDOW_SECS = 1.0


def chain(rows):
    """Counter of (first step slow?, second step slow?) over the calls of two-pair steps."""
    steps = []
    for t, pair, _skew, slow, _early in rows:
        if steps and t - steps[-1]["t"] < STEP_WINDOW_SECS and pair not in steps[-1]["pairs"]:
            steps[-1]["pairs"].append(pair)
            steps[-1]["slow"] = steps[-1]["slow"] or slow
        else:
            steps.append({"t": t, "pairs": [pair], "slow": slow})
    calls = Counter()
    i = 0
    while i + 1 < len(steps):
        a, b = steps[i], steps[i + 1]
        if (len(a["pairs"]) == 2 and len(b["pairs"]) == 2 and set(a["pairs"]) != set(b["pairs"])
                and b["t"] - a["t"] < CALL_WINDOW_SECS):
            calls[(a["slow"], b["slow"])] += 1
            i += 2
        else:
            i += 1
    return calls


def main():
    log = json.load(open(sys.argv[1]))
    rows = exchanges(log["messages"])
    if "--chain" in sys.argv:
        calls = chain(rows)
        for first in (True, False):
            n = calls[(first, True)] + calls[(first, False)]
            print(f"after a {'slow' if first else 'fast'} first step: second step slow "
                  f"{calls[(first, True)]} of {n}")
        return
    counts = Counter()
    for t, pair, skew, slow, early_first in rows:
        label = next(name for top, name in BINS_MS if skew * 1e3 < top)
        counts[(label, slow)] += 1
        if "--each" in sys.argv:
            print(f"{t * 1e3:10.2f} ms  ranks {pair[0]}-{pair[1]}  posted {skew * 1e3:7.2f} ms "
                  f"apart  {'slow' if slow else 'both ways at once'}"
                  f"{'' if early_first else ' (the late one first)'}")
    print(f"{log['op']} {log['algorithm']}: {len(rows)} exchanges")
    for _, name in BINS_MS:
        print(f"  partners posted {name:>9} apart: {counts[(name, True)]:3} slow, "
              f"{counts[(name, False)]:3} both ways at once")


if __name__ == "__main__":
    main()
