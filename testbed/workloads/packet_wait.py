"""How long a small message waits at a shaped link that another connection streams through.

Host A pings host B (1 byte there and back on one TCP connection, TCP_NODELAY, a random pause
of --pause-min to --pause-max seconds between pings so that they land at random points of the
other traffic), in three phases of --count pings each:

- idle: nothing else on the network;
- through: host C streams bulk data to host D (`--through C:D`), whose path shares a link with
  the ping's way in (`--ping A:B`; by default host 2 to host 1, which shares host 1's downlink);
- beside: host E streams to host F instead (`--beside E:F`), about the same load on the
  machine's cores, none of it on the ping's path (the control for host CPU).

A token-bucket shaper (htb, tbf) lets a packet go whenever its level is not below zero and
charges all of it, and TCP hands it GSO packets of a few milliseconds of the stream's rate
(65,160 B at 200 Mbit/s, 33,304 B at 100 Mbit/s, captured on the testbed), so a ping arriving
while the stream's packet is being paid off waits for the level to come back.
`calibrate import packet-wait` reads the log this writes (rank 0 prints it): the mean wait
through the stream beyond the mean beside it.
"""
import argparse
import json
import os
import random
import socket
import statistics
import time

ap = argparse.ArgumentParser()
ap.add_argument("--count", type=int, default=400)
ap.add_argument("--ping", default="0:1", help="A:B, the prober and the host it pings")
ap.add_argument("--through", default="2:1", help="C:D, a stream sharing the ping's way in")
ap.add_argument("--beside", default="2:3", help="E:F, a stream off the ping's path")
ap.add_argument("--pause-min", type=float, default=0.002)
ap.add_argument("--pause-max", type=float, default=0.006)
ap.add_argument("--warmup-secs", type=float, default=0.5)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

rank = int(os.environ["RANK"])
base = int(os.environ["MASTER_PORT"]) + 11
hosts = [l.split("\t") for l in open(os.environ["DTSIM_TESTBED_HOSTS"]).read().splitlines()[1:]]
addr = {int(h[0]): h[2] for h in hosts}
pair = lambda s: tuple(int(x) for x in s.split(":"))
(A, B), (C, D), (E, F) = pair(a.ping), pair(a.through), pair(a.beside)
if C != E:
    raise SystemExit("--through and --beside must stream from the same host (C = E)")
PING, THROUGH, BESIDE, CONTROL = base, base + 1, base + 2, base + 3
PHASES = ["idle", "through", "beside"]


def listen(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(4)
    return s


def connect(peer, port):
    for _ in range(200):
        try:
            s = socket.create_connection((addr[peer], port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"rank {rank}: cannot reach rank {peer} port {port}")


def accept(port):
    c, _ = listen(port).accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def sink(port):
    """A process of its own that accepts one stream and reads it until its sender closes it."""
    srv = listen(port)
    pid = os.fork()
    if pid == 0:
        c, _ = srv.accept()
        buf = bytearray(1 << 20)
        while c.recv_into(buf):
            pass
        os._exit(0)
    srv.close()
    return pid


children = []
if rank == D:
    children.append(sink(THROUGH))
if rank == F:
    children.append(sink(BESIDE))
if rank == B:
    pid = os.fork()
    if pid == 0:  # the echo
        c = accept(PING)
        while True:
            b = c.recv(1)
            if not b or b == b"q":
                os._exit(0)
            c.sendall(b)
    children.append(pid)
if rank == C:
    pid = os.fork()
    if pid == 0:  # the streamer, told by the prober which phase runs
        ctl = accept(CONTROL)
        chunk = bytes(1 << 20)
        while True:
            p = ctl.recv(1)
            if p in (b"q", b""):
                os._exit(0)
            s = None if p == b"i" else connect(D if p == b"t" else F,
                                                THROUGH if p == b"t" else BESIDE)
            ctl.sendall(b"k")
            ctl.setblocking(False)
            while True:
                try:
                    if ctl.recv(1):
                        break
                except BlockingIOError:
                    pass
                if s is not None:
                    s.sendall(chunk)
                else:
                    time.sleep(0.001)
            ctl.setblocking(True)
            if s is not None:
                s.close()
            ctl.sendall(b"k")
    children.append(pid)
if rank == A:
    ctl = connect(C, CONTROL)
    ping = connect(B, PING)
    rng = random.Random(a.seed)
    out = {"ping": [A, B], "through": [C, D], "beside": [E, F],
           "pause_secs": [a.pause_min, a.pause_max], "phases": {}}
    for phase in PHASES:
        ctl.sendall(phase[0].encode())
        ctl.recv(1)  # the stream has started (idle: nothing runs)
        time.sleep(a.warmup_secs)
        rtts = []
        for _ in range(a.count):
            time.sleep(rng.uniform(a.pause_min, a.pause_max))
            t = time.perf_counter()
            ping.sendall(b"x")
            ping.recv(1)
            rtts.append(time.perf_counter() - t)
        ctl.sendall(b"s")  # stop the stream
        ctl.recv(1)
        out["phases"][phase] = {
            "rtt_secs": rtts,
            "mean_secs": statistics.mean(rtts),
            "median_secs": statistics.median(rtts),
        }
    ctl.sendall(b"q")
    ping.sendall(b"q")
    # The sinks end when their streams close; a phase that did not run leaves none open.
for pid in children:
    os.waitpid(pid, 0)
if rank == A:
    print(json.dumps(out))
