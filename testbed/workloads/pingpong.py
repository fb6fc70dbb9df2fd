"""Latency between ranks 0 and 1: a TCP ping-pong of 1-byte messages (torch gloo send/recv
adds framing; a raw socket gives the network's round trip). Prints the median RTT on rank 0."""
import argparse
import json
import os
import socket
import statistics
import time

ap = argparse.ArgumentParser()
ap.add_argument("--count", type=int, default=200)
a = ap.parse_args()
rank, master = int(os.environ["RANK"]), os.environ["MASTER_ADDR"]
port = int(os.environ["MASTER_PORT"]) + 1
if rank == 1:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    c, _ = srv.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(a.count + 10):
        c.sendall(c.recv(1))
elif rank == 0:
    peer = open(os.environ["DTSIM_TESTBED_HOSTS"]).read().splitlines()[2].split("\t")[2]
    for _ in range(100):
        try:
            s = socket.create_connection((peer, port))
            break
        except OSError:
            time.sleep(0.05)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ts = []
    for i in range(a.count + 10):
        t = time.perf_counter()
        s.sendall(b"x")
        s.recv(1)
        if i >= 10:
            ts.append(time.perf_counter() - t)
    print(json.dumps({"rtt_median_secs": statistics.median(ts), "rtt_min_secs": min(ts)}))
