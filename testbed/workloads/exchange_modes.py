"""Counts the two modes of OpenMPI's four-rank pairwise exchanges in the mpi_p2p logs.

  python3 testbed/workloads/exchange_modes.py [LOG.json ...]
  (default: data/runs/calibration/testbed_mpi_p2p_4ranks.json and ..._launch*.json)

A repetition of a rendezvous exchange of M bytes each way either runs both ways at once (about
1.0x a one-way Send of M) or the way back waits until the first way has all but a tail T left
(about 2 - T/M). Prints, per size and pooled, how many repetitions ran the slow way (above the
midpoint of the two modes, with T = 82.5 KB) and the median tail of the slow ones: the numbers
behind dtsim's SLOW_EXCHANGES, EXCHANGES and SLOW_EXCHANGE_TAIL_BYTES (sim/src/library/mpi/exchanges.rs).

  python3 testbed/workloads/exchange_modes.py --steps LOG.json [LOG.json ...]

With --steps (mpi_p2p logs with mode rd_steps, one per launch): each written-out recursive-doubling
all-reduce's steps, a pair's exchange timed from the later partner's entry to the later one's
return and slow as above; a step is slow where any pair was. Prints per launch the calls by
which of their steps ran slow, then per size and pooled over all launches: how often each step
ran slow, how often a step ran slow after a slow step and after a fast one, the calls by number
of slow steps, and the library's own recursive doubling (rd_library, same launches) by how many
one-way times it took (docs/testbed.md, "Four ranks' recursive doubling step by step").
"""
import glob
import json
import os
import statistics
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EAGER_LIMIT = 64 << 10
TAIL = 82_500


def slow_exchange(span_secs, one_way_secs, m):
    """An exchange of m bytes each way ran the slow way: above the midpoint of its two modes."""
    return span_secs / one_way_secs > 1 + 0.5 * (m - TAIL) / m


def main():
    logs = sys.argv[1:] or (
        [os.path.join(ROOT, "data/runs/calibration/testbed_mpi_p2p_4ranks.json")]
        + sorted(glob.glob(os.path.join(ROOT, "data/runs/calibration/testbed_mpi_p2p_4ranks_launch*.json"))))
    slow, total, tails = {}, {}, {}
    for path in logs:
        for r in json.load(open(path))["results"]:
            m = r["bytes"]
            if m <= EAGER_LIMIT:
                continue
            one_way = r["oneway_secs"]
            for t in r["pairwise_all_secs"]:
                total[m] = total.get(m, 0) + 1
                if slow_exchange(t, one_way, m):
                    slow[m] = slow.get(m, 0) + 1
                    tails.setdefault(m, []).append(m * (2 - t / one_way))
    for m in sorted(total):
        t = tails.get(m, [])
        tail = f"median tail {statistics.median(t) / 1e3:.1f} KB" if t else ""
        print(f"{m:>10} B  slow {slow.get(m, 0):>3} of {total[m]:>3}  {tail}")
    upto4 = [x for m, t in tails.items() if m <= 4 << 20 for x in t]
    print(f"pooled: slow {sum(slow.values())} of {sum(total.values())}; median tail of the "
          f"{len(upto4)} slow ones up to 4 MiB {statistics.median(upto4) / 1e3:.1f} KB")


def steps(logs):
    # Per size and pooled (key None): counters of (step, slow?), (previous slow?, slow?),
    # calls by slow steps, library calls by one-way times.
    by_steps, after, calls_by_slow, library = (defaultdict(Counter) for _ in range(4))
    for path in logs:
        for r in json.load(open(path))["results"]:
            m, one_way = r["bytes"], r["oneway_secs"]
            n = len(r["rd_steps_marks"][0])
            patterns = []
            for call in r["rd_steps_marks"]:
                pattern = []
                for k in range(len(call[0])):
                    d = 1 << k
                    slow = False
                    for a in range(n):
                        b = a ^ d
                        if b < a:
                            continue
                        span = max(call[a][k][1], call[b][k][1]) - max(call[a][k][0], call[b][k][0])
                        slow |= slow_exchange(span, one_way, m)
                    pattern.append(slow)
                patterns.append("".join("S" if x else "f" for x in pattern))
                for key in (m, None):
                    for k, x in enumerate(pattern):
                        by_steps[key][(k, x)] += 1
                        if k:
                            after[key][(pattern[k - 1], x)] += 1
                    calls_by_slow[key][sum(pattern)] += 1
            for t in r.get("rd_library_calls_secs", []):
                for key in (m, None):
                    library[key][round(t / one_way)] += 1
            lib = " ".join(f"{t / one_way:.1f}" for t in r.get("rd_library_calls_secs", []))
            print(f"{os.path.basename(path)} {m} B: steps {' '.join(patterns)}  library x one-way {lib}")
    for key in sorted(k for k in by_steps if k is not None) + [None]:
        print(f"== {'pooled' if key is None else f'{key} B'}")
        k_max = max(k for k, _ in by_steps[key]) + 1
        for k in range(k_max):
            slow, fast = by_steps[key][(k, True)], by_steps[key][(k, False)]
            print(f"step {k + 1}: slow {slow} of {slow + fast}")
        for prev in (True, False):
            slow, fast = after[key][(prev, True)], after[key][(prev, False)]
            print(f"after a {'slow' if prev else 'fast'} step: slow {slow} of {slow + fast}")
        c = calls_by_slow[key]
        print("calls by slow steps: " + ", ".join(f"{k}: {c[k]}" for k in sorted(c)))
        lib = library[key]
        print("library calls by one-way times: " + ", ".join(f"{k}x: {lib[k]}" for k in sorted(lib)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--steps"]:
        steps(sys.argv[2:])
    else:
        main()
