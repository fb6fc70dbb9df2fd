"""Counts the two modes of OpenMPI's four-rank pairwise exchanges in the mpi_p2p logs.

  python3 testbed/workloads/exchange_modes.py [LOG.json ...]
  (default: data/runs/calibration/testbed_mpi_p2p_4ranks.json and ..._launch*.json)

A repetition of a rendezvous exchange of M bytes each way either runs both ways at once (about
1.0x a one-way Send of M) or the way back waits until the first way has all but a tail T left
(about 2 - T/M). Prints, per size and pooled, how many repetitions ran the slow way (above the
midpoint of the two modes, with T = 82.5 KB) and the median tail of the slow ones: the numbers
behind dtsim's SLOW_EXCHANGES, EXCHANGES and SLOW_EXCHANGE_TAIL_BYTES (sim/src/library/mpi/exchanges.rs).
"""
import glob
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EAGER_LIMIT = 64 << 10
TAIL = 82_500


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
                ratio = t / one_way
                total[m] = total.get(m, 0) + 1
                if ratio > 1 + 0.5 * (m - TAIL) / m:
                    slow[m] = slow.get(m, 0) + 1
                    tails.setdefault(m, []).append(m * (2 - ratio))
    for m in sorted(total):
        t = tails.get(m, [])
        tail = f"median tail {statistics.median(t) / 1e3:.1f} KB" if t else ""
        print(f"{m:>10} B  slow {slow.get(m, 0):>3} of {total[m]:>3}  {tail}")
    upto4 = [x for m, t in tails.items() if m <= 4 << 20 for x in t]
    print(f"pooled: slow {sum(slow.values())} of {sum(total.values())}; median tail of the "
          f"{len(upto4)} slow ones up to 4 MiB {statistics.median(upto4) / 1e3:.1f} KB")


if __name__ == "__main__":
    main()
