#!/usr/bin/env python3
"""The API's latency and the daemon's memory while slow clients trickle request heads.

Starts `carma serve` on emulated GPUs (4xA100-40GB) with the TCP API on a free loopback port,
reads its resident memory (VmRSS in /proc/PID/status) once it is idle, then opens --clients
(default 200) slow clients on the TCP API that send a request head one byte a second, never
finishing it (one dropped by the server opens again a second later). Meanwhile it sends
--requests (default 200) GET /v1/status over the Unix socket, one connection each as `carma`
does, 20 ms apart, timing each from connect to the whole answer, and samples VmRSS every 20 ms.
Prints per run: idle and peak VmRSS, p50 and p99 latency, failed requests, and what the slow
clients saw (answers such as 408, and connections the server dropped); then the median of
--reps runs (default 3).

    bench/slow_client_bench.py [--build DIR ...] [--reps N] [--clients N] [--requests N]

--build: a build directory with carma and carma-daemon (default: build/ of this tree). Given
more than once, each is measured in turn (runs interleaved) and the later ones are shown as
ratios to the first (the baseline).
"""

import argparse
import errno
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_proc import free_port, rss_kib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "slow-client-bench-token-0123456789"


def unix_get(path, target, timeout_s=30):
    """One GET on a fresh Unix-socket connection: (status, seconds)."""
    started = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(path)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                  .encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                head = data[:end].lower()
                at = head.find(b"content-length:")
                if at >= 0:
                    length = int(head[at + 15:].split(b"\r\n")[0])
                    if len(data) >= end + 4 + length:
                        break
    finally:
        s.close()
    status = int(data[9:12]) if data.startswith(b"HTTP/") else -1
    return status, time.monotonic() - started


def wait_ready(path, proc, timeout_s=60):
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        if proc.poll() is not None:
            raise RuntimeError(f"carma serve exited with {proc.returncode}")
        try:
            if unix_get(path, "/healthz", 2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"carma serve did not answer on {path} within {timeout_s} s")


class SlowClients:
    """N connections to 127.0.0.1:port, each sending one byte of a never-ending head a second."""

    HEAD = b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 100000

    def __init__(self, port, n):
        self.port, self.n = port, n
        self.stop = threading.Event()
        self.answers = {}   # status line prefix -> count
        self.dropped = 0    # connections the server closed or reset
        self.bytes_sent = 0
        self.connected = 0  # connections that took their first byte (connect() completed)
        self.thread = threading.Thread(target=self.run)

    def connect(self):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return None
        return s

    def drop(self, conns, i, answer=b""):
        if answer.startswith(b"HTTP/1.1 "):
            key = answer[9:12].decode()
            self.answers[key] = self.answers.get(key, 0) + 1
        else:
            self.dropped += 1
        conns[i][0].close()
        conns[i] = (None, 0)

    def run(self):
        conns = [(None, 0)] * self.n  # (socket, bytes of HEAD sent)
        while not self.stop.is_set():
            tick = time.monotonic()
            for i, (s, pos) in enumerate(conns):
                if s is None:
                    s = self.connect()
                    conns[i] = (s, 0)
                    if s is None:
                        continue
                    pos = 0
                try:
                    data = s.recv(4096)
                    if not data:
                        self.drop(conns, i)
                        continue
                    self.drop(conns, i, data)
                    continue
                except BlockingIOError:
                    pass
                except OSError:
                    self.drop(conns, i)
                    continue
                try:
                    if s.send(self.HEAD[pos:pos + 1]) == 1:
                        conns[i] = (s, pos + 1)
                        self.bytes_sent += 1
                        self.connected += pos == 0
                except BlockingIOError:
                    pass
                except OSError as e:
                    if e.errno not in (errno.ENOTCONN, errno.EAGAIN):
                        self.drop(conns, i)
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))
        for s, _ in conns:
            if s is not None:
                s.close()


def one_run(build, clients, requests):
    with tempfile.TemporaryDirectory(prefix="carma-slow-") as tmp:
        token = os.path.join(tmp, "token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token, 0o600)
        sock = os.path.join(tmp, "carma.sock")
        port = free_port()
        log = open(os.path.join(tmp, "server.log"), "w")
        proc = subprocess.Popen(
            [os.path.join(build, "carma"), "serve", "--gpus", "emulated:4xA100-40GB",
             "--state-dir", os.path.join(tmp, "state"), "--socket", sock,
             "--tcp", f"127.0.0.1:{port}", "--token-file", token],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(sock, proc)
            time.sleep(2)  # settled
            idle = rss_kib(proc.pid)
            peak = [idle]
            sampling = threading.Event()

            def sample():
                while not sampling.is_set():
                    peak[0] = max(peak[0], rss_kib(proc.pid))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample)
            sampler.start()
            slow = SlowClients(port, clients)
            slow.thread.start()
            slow_started = time.monotonic()
            time.sleep(3)  # every slow client connected and a few bytes in
            latencies, failed = [], 0
            for _ in range(requests):
                try:
                    status, seconds = unix_get(sock, "/v1/status")
                except OSError:
                    status, seconds = -1, 0
                if status == 200:
                    latencies.append(seconds)
                else:
                    failed += 1
                time.sleep(0.02)
            while time.monotonic() < slow_started + 15:
                time.sleep(0.1)  # past the head deadline (10 s), so dropping shows
            slow.stop.set()
            slow.thread.join()
            sampling.set()
            sampler.join()
            latencies.sort()
            pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa
            return {"idle_kib": idle, "peak_kib": peak[0],
                    "p50_ms": 1000 * pick(0.50) if latencies else float("nan"),
                    "p99_ms": 1000 * pick(0.99) if latencies else float("nan"),
                    "failed": failed, "slow_answers": dict(slow.answers),
                    "slow_dropped": slow.dropped, "slow_bytes": slow.bytes_sent,
                    "slow_connected": slow.connected}
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def summary(runs):
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    return {"idle_mib": med("idle_kib") / 1024, "peak_mib": med("peak_kib") / 1024,
            "growth_mib": statistics.median(r["peak_kib"] - r["idle_kib"] for r in runs) / 1024,
            "p50_ms": med("p50_ms"), "p99_ms": med("p99_ms"), "failed": med("failed")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    builds = [os.path.abspath(b) for b in (args.build or [os.path.join(ROOT, "build")])]
    runs = {b: [] for b in builds}
    for rep in range(args.reps):
        for b in builds:
            r = one_run(b, args.clients, args.requests)
            runs[b].append(r)
            print(f"{b} run {rep + 1}: idle {r['idle_kib'] / 1024:.1f} MiB, peak "
                  f"{r['peak_kib'] / 1024:.1f} MiB; /v1/status p50 {r['p50_ms']:.2f} ms, p99 "
                  f"{r['p99_ms']:.2f} ms, {r['failed']} failed; slow clients: answers "
                  f"{r['slow_answers']}, {r['slow_connected']} connected, "
                  f"{r['slow_dropped']} dropped, {r['slow_bytes']} bytes",
                  flush=True)
    base = summary(runs[builds[0]])
    for b in builds:
        s = summary(runs[b])
        line = (f"median of {args.reps} ({b}): idle {s['idle_mib']:.1f} MiB, peak "
                f"{s['peak_mib']:.1f} MiB (+{s['growth_mib']:.1f}), p50 {s['p50_ms']:.2f} ms, "
                f"p99 {s['p99_ms']:.2f} ms, failed {s['failed']:g}")
        if b != builds[0]:
            ratio = lambda k: s[k] / base[k] if base[k] else float("nan")  # noqa: E731
            line += (f"; ratio to {builds[0]}: p50 {ratio('p50_ms'):.2f}, p99 "
                     f"{ratio('p99_ms'):.2f}, peak {ratio('peak_mib'):.2f}, growth "
                     f"{ratio('growth_mib'):.2f}")
        print(line)
        print(json.dumps({"build": b, **s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
