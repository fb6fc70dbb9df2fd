"""How fast each host of a captured gloo ring reacts to a segment, and whether hosts react late
together, from a log of `suite.py capture_mpi --gloo-method allreduce`.

  python3 testbed/workloads/reactions.py LOG.json [LOG.json ...]

A reaction: from a ring segment's last byte reaching host h (from its right neighbour, h + 1)
to h's next notification (gloo's 48-byte NOTIFY_RECV_READY) to that neighbour, within 30 ms.
In gloo's all-reduce that notification is the receive h posts once its iteration i - 2 is
done, so the reaction holds the thread's wake-up, the reduction and whatever else the host's
shared cores were doing. Printed per log: the reactions' percentiles, all of them and those
whose host's own link had been idle for 1.5 ms; then, for pairs of reactions of two different
hosts by how far apart their segments arrived, the correlation of the two reactions and how
often both were late (over 1 ms) against how often they would be by chance. Hosts that stall
together (a common cause on the shared cores) show a positive correlation at short distances
and more "both late" pairs than chance (docs/testbed.md, "gloo's all-reduce rank by rank").
"""
import bisect
import json
import statistics
import sys

# A notification this long after the segment is not its reaction.
MAX_REACTION_SECS = 0.03
# A host whose own last data packet left this long before the segment's arrival had an idle link.
IDLE_SECS = 1.5e-3
# A reaction longer than this is late.
LATE_SECS = 1e-3
# Distances between two segments' arrivals, seconds: [low, high).
DISTANCES = [(0.0, 0.5e-3), (0.5e-3, 2e-3), (2e-3, 10e-3), (50e-3, float("inf"))]


def reactions(log):
    """Per ring segment that a notification followed: (host, arrival secs, reaction secs,
    whether the host's own link was idle)."""
    n = log["ranks"]
    data = [m for m in log["messages"] if m["kind"] == "data" and m["arrived_secs"] is not None]
    notes = {}
    for m in log["messages"]:
        if m["kind"] == "answer":
            notes.setdefault((m["src"], m["dst"]), []).append(m["sent_secs"])
    for times in notes.values():
        times.sort()
    own = {h: sorted(p[0] for m in data if m["src"] == h for p in m["packets"]) for h in range(n)}
    out = []
    for m in data:
        host, sender, arrived = m["dst"], m["src"], m["arrived_secs"]
        if (host + 1) % n != sender:
            continue
        times = notes.get((host, sender), [])
        i = bisect.bisect_right(times, arrived)
        if i == len(times) or times[i] - arrived > MAX_REACTION_SECS:
            continue
        sent = own[host]
        j = bisect.bisect_right(sent, arrived)
        idle = j == 0 or arrived - sent[j - 1] > IDLE_SECS
        out.append((host, arrived, times[i] - arrived, idle))
    return out


def percentiles_ms(values, ps=(0.1, 0.5, 0.9, 0.99)):
    v = sorted(values)
    return " / ".join(f"{v[int(p * (len(v) - 1))] * 1e3:.2f}" for p in ps)


def correlation(pairs):
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    if len(pairs) < 5 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return float("nan")
    mx, my = statistics.mean(xs), statistics.mean(ys)
    cov = sum((x - mx) * (y - my) for x, y in pairs) / len(pairs)
    return cov / (statistics.pstdev(xs) * statistics.pstdev(ys))


def report(path):
    log = json.load(open(path))
    r = reactions(log)
    if not r:
        print(f"{path}: no ring segment followed by a notification")
        return
    every = [x for _, _, x, _ in r]
    idle = [x for _, _, x, i in r if i]
    print(f"{path}: {len(r)} reactions, ms at 10/50/90/99%: {percentiles_ms(every)}, "
          f"mean {statistics.mean(every) * 1e3:.2f}")
    if idle:
        print(f"  their host's link idle: {len(idle)}, {percentiles_ms(idle)}, "
              f"mean {statistics.mean(idle) * 1e3:.2f}")
    for lo, hi in DISTANCES:
        pairs = [(a[2], b[2]) for k, a in enumerate(r) for b in r[k + 1:]
                 if a[0] != b[0] and lo <= abs(a[1] - b[1]) < hi]
        if not pairs:
            continue
        late = [x > LATE_SECS for pair in pairs for x in pair]
        p = sum(late) / len(late)
        both = sum(1 for x, y in pairs if x > LATE_SECS and y > LATE_SECS)
        print(f"  segments {lo * 1e3:.1f}-{hi * 1e3:.1f} ms apart: {len(pairs)} pairs, "
              f"correlation {correlation(pairs):+.3f}, both late {both} "
              f"(by chance {p * p * len(pairs):.1f}, each late {p:.2f})")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        report(path)
