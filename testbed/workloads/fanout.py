"""One host sending to several at once over TCP, as gloo's broadcast root does: how the sends
posted together share the sender's shaped link (`suite.py fanout`).

The sender writes each connection as gloo's TCP transport does (non-blocking, one event loop:
every posted send is written as far as its socket takes, in the order posted, then each as it
becomes writable), and every receiver answers one byte once it has the whole message. Per
repetition it prints when each answer arrived, from the moment the sends were posted. With a
max-min fair link the posted sends finish together; with a FIFO queue in front of the shaper,
where each socket keeps a bounded amount queued (TCP small queues), the first-posted send
finishes first.

With one receiver and `--probe BYTES` (suite.py shaper_gap), a small message is sent and
answered after each gap, before the timed send: whether it spends the shaper's token bucket.

Modes (run by `fanout.py driver` under `dtsim-testbed run`, one process per namespace):
  recv --port P --bytes S... --repeats R [--probe BYTES]
  send --to ADDR,ADDR... --port P --bytes S... --repeats R --gap SECS [--probe BYTES]
"""
import argparse
import json
import os
import select
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def recv_exact(conn, n):
    got = 0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while got < n:
        k = conn.recv_into(view[: min(len(buf), n - got)])
        if k == 0:
            raise RuntimeError("peer closed")
        got += k


def receiver(a):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", a.port))
    srv.listen(1)
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for size in a.bytes:
        for _ in range(a.repeats + 1):
            if a.probe:
                recv_exact(conn, a.probe)
                conn.sendall(b"p")
            recv_exact(conn, size)
            conn.sendall(b"k")
    conn.close()


def sender(a):
    addrs = a.to.split(",")
    socks = []
    import tb
    for addr in addrs:
        s = tb.connect(addr, a.port)
        s.setblocking(False)
        socks.append(s)
    results = []
    for size in a.bytes:
        payload = memoryview(bytes(size))
        for rep in range(a.repeats + 1):
            time.sleep(a.gap)  # queues drain and the shapers' buckets refill
            if a.probe:
                # A small message first, answered before the timed send is posted: whether it
                # spends the shapers' buckets (each connection in turn, blocking).
                for s in socks:
                    s.setblocking(True)
                    s.sendall(bytes(a.probe))
                    if s.recv(1) != b"p":
                        raise RuntimeError("bad probe answer")
                    s.setblocking(False)
            sent = [0] * len(socks)
            done = [None] * len(socks)
            t0 = time.perf_counter()
            # Posted in order: each written as far as its socket takes it now; with --stagger,
            # sends after the first are posted that long after it (a send joining a busy link).
            posted = [a.stagger == 0 or i == 0 for i in range(len(socks))]
            for i, s in enumerate(socks):
                if not posted[i]:
                    continue
                try:
                    sent[i] += s.send(payload[sent[i]:])
                except BlockingIOError:
                    pass
            while any(d is None for d in done):
                if not all(posted) and time.perf_counter() - t0 >= a.stagger:
                    posted = [True] * len(socks)
                want_w = [s for i, s in enumerate(socks) if posted[i] and sent[i] < size]
                want_r = [s for i, s in enumerate(socks) if done[i] is None]
                r, w, _ = select.select(want_r, want_w, [], 0.001 if not all(posted) else 30)
                if not r and not w and all(posted):
                    raise RuntimeError("stalled")
                for i, s in enumerate(socks):
                    if s in w:
                        try:
                            sent[i] += s.send(payload[sent[i]:])
                        except BlockingIOError:
                            pass
                    if s in r:
                        if s.recv(1) != b"k":
                            raise RuntimeError("bad answer")
                        done[i] = time.perf_counter() - t0
            if rep > 0:  # the first repetition warms the connections up
                results.append({"bytes": size, "secs": done})
    print(json.dumps({"flows": len(socks), "stagger": a.stagger, "runs": results}))


def driver(a):
    import tb
    hs = tb.hosts()
    src = hs[0]
    dsts = hs[1 : 1 + a.k]
    common = ["--port", str(a.port), "--repeats", str(a.repeats), "--probe", str(a.probe),
              "--bytes"] + [
        str(b) for b in a.bytes
    ]
    procs = []
    for _, ns, _, _, _ in dsts:
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, tb.PY, __file__, "recv"] + common))
    time.sleep(0.5)
    out = subprocess.run(
        ["ip", "netns", "exec", src[1], tb.PY, __file__, "send", "--to",
         ",".join(d[2] for d in dsts), "--gap", str(a.gap), "--stagger", str(a.stagger)] + common,
        capture_output=True, text=True, check=True).stdout
    for p in procs:
        p.wait(timeout=60)
    res = json.loads(out.splitlines()[-1])
    res.update({"topology": os.environ.get("DTSIM_TESTBED_TOPOLOGY"), "k": a.k,
                "gap": a.gap, "probe": a.probe,
                "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "tcp_congestion": os.environ.get("DTSIM_TESTBED_TCP_CONGESTION", ""),
                "versions": tb.versions()})
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    for size in a.bytes:
        runs = [r["secs"] for r in res["runs"] if r["bytes"] == size]
        med = [sorted(x[i] for x in runs)[len(runs) // 2] for i in range(a.k)]
        print(f"{size:>10} B to {a.k}: median finish per posted send (ms) "
              + " ".join(f"{m * 1e3:8.2f}" for m in med))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["driver", "send", "recv"])
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--to")
    p.add_argument("--port", type=int, default=29611)
    p.add_argument("--bytes", type=int, nargs="+", default=[65536, 262144, 1048576, 4194304])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--gap", type=float, default=0.3)
    p.add_argument("--out")
    p.add_argument("--stagger", type=float, default=0.0)
    p.add_argument("--probe", type=int, default=0,
                   help="bytes of a message sent and answered after the gap, before each timed send")
    a = p.parse_args()
    {"driver": driver, "send": sender, "recv": receiver}[a.mode](a)


if __name__ == "__main__":
    main()
