#!/usr/bin/env python3
"""The daemon's memory while a sender without the agents' token streams a 200 MiB report.

Starts `carma serve` in cluster mode (--agents, --agent-token-file) on a free loopback port,
reads its resident memory (VmRSS in /proc/PID/status) once it is idle, then while a client
that has no token announces and streams a 200 MiB body to POST /agent/v1/report (reading the
answer all the while), sampling VmRSS every 20 ms, and prints idle, peak and the difference, with
the answer and how much of the body the client got to send. The goal: the peak within 20 MiB of
idle (the body is refused on its head and never read). Median of --reps runs (default 3).

    bench/hub_body_memory.py [--build DIR] [--reps N] [--mib N]

--build: a build directory with carma and carma-daemon (default: build/ of this tree); give an
older commit's build to see what it did.
"""

import argparse
import os
import select
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


def wait_listening(port, proc, timeout_s=30):
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        if proc.poll() is not None:
            raise RuntimeError(f"carma serve exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"carma serve did not listen on port {port} within {timeout_s} s")


def stream_body(port, body_bytes, result):
    """Announces body_bytes, sends them as fast as the server takes them, reads the answer."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    head = (f"POST /agent/v1/report HTTP/1.1\r\nHost: server\r\n"
            f"Content-Type: application/json\r\nContent-Length: {body_bytes}\r\n\r\n").encode()
    piece = b" " * (64 << 10)
    pending = head
    body_left = body_bytes
    sent = 0
    answer = b""
    writable = True
    while True:
        if not pending and body_left > 0:
            pending = piece[:min(len(piece), body_left)]
            body_left -= len(pending)
        want_write = [s] if writable and pending else []
        r, w, _ = select.select([s], want_write, [], 60)
        if not r and not w:
            result["error"] = "nothing for 60 s"
            break
        if r:
            try:
                data = s.recv(65536)
            except OSError as e:
                result["error"] = str(e)
                break
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer:
                break
            continue
        try:
            n = s.send(pending)
            sent += n
            pending = pending[n:]
        except BlockingIOError:
            pass
        except OSError as e:
            writable = False
            result["error"] = str(e)
    s.close()
    result["sent"] = sent
    result["status"] = answer[9:12].decode() if answer.startswith(b"HTTP/") else "none"


def one_run(build, mib):
    with tempfile.TemporaryDirectory(prefix="carma-hub-mem-") as tmp:
        token = os.path.join(tmp, "token")
        with open(token, "w") as f:
            f.write(os.urandom(24).hex() + "\n")
        os.chmod(token, 0o600)
        port = free_port()
        log = open(os.path.join(tmp, "server.log"), "w")
        proc = subprocess.Popen(
            [os.path.join(build, "carma"), "serve", "--state-dir", os.path.join(tmp, "state"),
             "--socket", os.path.join(tmp, "carma.sock"), "--agents", f"127.0.0.1:{port}",
             "--agent-token-file", token],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_listening(port, proc)
            time.sleep(2)  # settled
            idle = rss_kib(proc.pid)
            result = {}
            client = threading.Thread(target=stream_body, args=(port, mib << 20, result))
            started = time.monotonic()
            client.start()
            peak = idle
            while client.is_alive():
                peak = max(peak, rss_kib(proc.pid))
                time.sleep(0.02)
            client.join()
            # What it keeps once the sender is gone.
            for _ in range(25):
                peak = max(peak, rss_kib(proc.pid))
                time.sleep(0.02)
            after = rss_kib(proc.pid)
            return {"idle": idle, "peak": peak, "after": after, "seconds": time.monotonic() - started,
                    **result}
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mib", type=int, default=200)
    args = ap.parse_args()
    runs = []
    for i in range(args.reps):
        r = one_run(os.path.abspath(args.build), args.mib)
        runs.append(r)
        print(f"run {i + 1}: idle {r['idle'] / 1024:.1f} MiB, peak {r['peak'] / 1024:.1f} MiB "
              f"(+{(r['peak'] - r['idle']) / 1024:.1f}), after {r['after'] / 1024:.1f} MiB; "
              f"answer {r['status']} after {r['sent'] / 2**20:.1f} of {args.mib} MiB sent, "
              f"{r['seconds']:.1f} s" + (f" ({r['error']})" if r.get("error") else ""))
    med = lambda key: statistics.median(r[key] for r in runs) / 1024  # noqa: E731
    growth = statistics.median((r["peak"] - r["idle"]) for r in runs) / 1024
    print(f"median of {len(runs)}: idle {med('idle'):.1f} MiB, peak while a {args.mib} MiB body "
          f"without token is sent {med('peak'):.1f} MiB, difference {growth:.1f} MiB "
          f"(goal: within 20 MiB)")
    return 0 if growth <= 20 else 1


if __name__ == "__main__":
    sys.exit(main())
