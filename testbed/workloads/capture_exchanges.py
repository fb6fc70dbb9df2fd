"""The rendezvous exchanges between partners in a `suite.py capture_mpi` log: for each, how far
apart the two partners posted (their requests' departures) and which mode it ran in.

  python3 testbed/workloads/capture_exchanges.py LOG.json [--each] [--chain]
  python3 testbed/workloads/capture_exchanges.py --launches LOG.json [LOG.json ...]
  python3 testbed/workloads/capture_exchanges.py --entry-lags LOG.json [LOG.json ...]

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

With --launches (four-rank captures, one log per launch, e.g. the five launches of one
collective): per launch, how many calls' first steps ran slow, and whether most did; then the
totals over calls and over launches. A launch tends to keep one mode, so the launches, not the
calls, are the independent draws: the last line says how likely that few (or that many)
mostly-slow launches are if each launch were mostly slow with the pairwise test's share of
slow repetitions (181 of 320, `testbed_mpi_p2p_4ranks*.json`).

With --entry-lags (OpenMPI captures, gloo's skipped): per log, how much later than the second
last rank the last one entered each call (its first request's departure; a call is a run of
requests with no gap over 4 ms in which every rank sent one), the median and quartiles, then
the median over every call of every log: the number behind dtsim's ENTRY_LAG
(sim/src/library/mpi/allreduce/mod.rs).
"""
import json
import statistics
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


PAIRWISE_SLOW_SHARE = 181 / 320


def launches(paths):
    """Per log (a launch): first steps slow and calls; then the totals and a binomial tail."""
    from math import comb
    slow_calls = all_calls = mostly_slow = 0
    for path in paths:
        calls = chain(exchanges(json.load(open(path))["messages"]))
        slow = calls[(True, True)] + calls[(True, False)]
        n = slow + calls[(False, True)] + calls[(False, False)]
        slow_calls, all_calls = slow_calls + slow, all_calls + n
        mostly = 2 * slow > n
        mostly_slow += mostly
        print(f"{path}: first step slow in {slow} of {n} calls"
              f"{' (mostly slow)' if mostly else ''}")
    k, n, p = mostly_slow, len(paths), PAIRWISE_SLOW_SHARE
    tail = sum(comb(n, i) * p**i * (1 - p)**(n - i)
               for i in (range(k + 1) if k < n * p else range(k, n + 1)))
    print(f"all: first step slow in {slow_calls} of {all_calls} calls; mostly slow in {k} of "
          f"{n} launches (at {p:.3f} a launch, {'that few' if k < n * p else 'that many'} "
          f"or {'fewer' if k < n * p else 'more'}: {tail:.2f})")


CALL_GAP_SECS = 0.004


def entry_lags(paths):
    """Per log, the last rank's lag behind the second last at each call's entry (ms)."""
    every = []
    for path in paths:
        log = json.load(open(path))
        if log.get("algorithm") == "gloo" or "messages" not in log:
            continue
        requests = sorted((m for m in log["messages"] if m["kind"] == "request"),
                          key=lambda m: m["sent_secs"])
        calls, last = [], None
        for m in requests:
            if last is None or m["sent_secs"] - last > CALL_GAP_SECS:
                calls.append({})
            calls[-1].setdefault(m["src"], m["sent_secs"])
            last = m["sent_secs"]
        lags = []
        for firsts in calls:
            if len(firsts) == log["ranks"]:
                t = sorted(firsts.values())
                lags.append((t[-1] - t[-2]) * 1e3)
        if not lags:
            continue
        lags.sort()
        every += lags
        print(f"{path}: {log['ranks']} ranks, {len(lags)} calls, last rank "
              f"{statistics.median(lags):.3f} ms behind the second last "
              f"(quartiles {lags[len(lags) // 4]:.3f}-{lags[3 * len(lags) // 4]:.3f})")
    if every:
        print(f"all: {len(every)} calls, median {statistics.median(every):.3f} ms")


def main():
    if sys.argv[1] == "--entry-lags":
        entry_lags(sys.argv[2:])
        return
    if sys.argv[1] == "--launches":
        launches(sys.argv[2:])
        return
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
