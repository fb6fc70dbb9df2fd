"""Bulk TCP transfers between host pairs at once, in rounds (`suite.py two_way`): how long a
round takes when flows cross a link in one direction or in both at once.

Every pair keeps one connection for the whole run (as a library's pair of ranks does). In
each round the driver tells every sender to go at once; each writes `--bytes` as fast as its
socket takes it and its receiver notes when the last byte arrived. Every timestamp is
CLOCK_MONOTONIC, one clock for all the testbed's namespaces, so a flow's time is its last
byte's arrival less its sender's start. Rounds are `--gap` seconds apart (queues drain, the
shapers' buckets refill); the first round of each size warms the connections and is dropped.

Modes (run by `two_way.py driver` under `dtsim-testbed run`, one process per namespace):
  recv --port P     (answers the driver's stdin: "SIZE" per round -> prints arrival time)
  send --to ADDR --port P   (stdin: "SIZE" per round -> prints its start time)
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def receiver(a):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", a.port))
    srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    for line in sys.stdin:
        n = int(line)
        got = 0
        while got < n:
            k = conn.recv_into(view[: min(len(buf), n - got)])
            if k == 0:
                raise RuntimeError("peer closed")
            got += k
        print(time.monotonic(), flush=True)
    conn.close()


def sender(a):
    import tb
    s = tb.connect(a.to, a.port)
    print("ready", flush=True)
    payloads = {}
    for line in sys.stdin:
        n = int(line)
        payload = payloads.setdefault(n, bytes(n))
        print(time.monotonic(), flush=True)
        s.sendall(payload)
    s.close()


def driver(a):
    import tb
    hs = tb.hosts()
    pairs = [tuple(int(x) for x in p.split(":")) for p in a.pairs.split(",")]
    recvs, sends = [], []
    for i, (src, dst) in enumerate(pairs):
        port = a.port + i
        recvs.append(subprocess.Popen(
            ["ip", "netns", "exec", hs[dst][1], tb.PY, __file__, "recv", "--port", str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for r in recvs:
        assert r.stdout.readline().strip() == "ready"
    for i, (src, dst) in enumerate(pairs):
        sends.append(subprocess.Popen(
            ["ip", "netns", "exec", hs[src][1], tb.PY, __file__, "send", "--to", hs[dst][2],
             "--port", str(a.port + i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for s in sends:
        assert s.stdout.readline().strip() == "ready"
    runs = []
    for size in a.bytes:
        for rep in range(a.repeats + 1):
            time.sleep(a.gap)
            for p in recvs + sends:
                p.stdin.write(f"{size}\n")
                p.stdin.flush()
            starts = [float(s.stdout.readline()) for s in sends]
            ends = [float(r.stdout.readline()) for r in recvs]
            if rep > 0:
                runs.append({"bytes": size,
                             "secs": [e - min(starts) for e in ends],
                             "start_secs": [t - min(starts) for t in starts]})
    for p in recvs + sends:
        p.stdin.close()
        p.wait(timeout=60)
    res = {"pairs": [list(p) for p in pairs], "runs": runs,
           "topology": os.environ.get("DTSIM_TESTBED_TOPOLOGY"),
           "hosts": [list(h[:3]) for h in hs], "gap": a.gap,
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "tcp_congestion": os.environ.get("DTSIM_TESTBED_TCP_CONGESTION", ""),
           "versions": tb.versions()}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    for size in a.bytes:
        rounds = sorted(max(r["secs"]) for r in runs if r["bytes"] == size)
        print(f"{size:>10} B, pairs {a.pairs}: round (slowest flow) ms "
              + " ".join(f"{t * 1e3:.1f}" for t in rounds), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["driver", "send", "recv"])
    p.add_argument("--pairs", default="0:3,4:1")
    p.add_argument("--to")
    p.add_argument("--port", type=int, default=29711)
    p.add_argument("--bytes", type=int, nargs="+", default=[262144, 1048576, 4194304])
    p.add_argument("--repeats", type=int, default=8)
    p.add_argument("--gap", type=float, default=0.3)
    p.add_argument("--out")
    a = p.parse_args()
    {"driver": driver, "send": sender, "recv": receiver}[a.mode](a)


if __name__ == "__main__":
    main()
