#!/usr/bin/env python3
"""Storm benchmarks: self-hosted mTLS handshakes per second, and memory per
held connection at scale.

1. mTLS, both sides verifying: `throng storm tls://...` (CPU 1) against
   `throng serve --tls --mtls` (CPU 0), full TLS 1.3 handshakes with client
   certificates; the figure is established connections per second of wall
   time (seed 001 reports 1,300/s on 24 cores).
2. Held connections: N plain TCP connections held at once against
   `throng serve --procs K`, spread over source addresses; the figure is the
   generator's memory per connection held at the peak: its proportional set
   size (PSS, /proc/PID/smaps_rollup) summed over its processes, which
   counts the program's pages shared by all of them once, sampled every
   second; beside it the sum of each process's peak RSS (the storm's own
   figure), which counts those shared pages once per process. The same for TLS at a smaller N, and for
   WebSocket (ws://, the lab's GET /ws echo: upgrade, one message echoed,
   then held). Plain TCP is held once per I/O (--io epoll, --io uring).
3. Connects per generator CPU-second (--only connects): `throng storm`
   closing each connection at once (tcp://) or after one GET (http://)
   against `throng serve --threads 1` (CPU 0), the generator on CPU 1,
   --io epoll and --io uring in the same run, and ab (no keep-alive: a new
   connection per request) as the peer for http://; --runs each, the median.

    bench/storm.py [--held 100000] [--held-tls 10000] [--held-ws 100000] [--mtls-seconds 10]
                   [--connects 20000] [--runs 3] [--only mtls|tcp|tls|ws|connects]...
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from benchlib import THRONG, build, free_port, run, wait_port


def serve(args, cpu=None):
    port = free_port()
    cmd = (["taskset", "-c", cpu] if cpu else []) + [THRONG, "serve", "--listen", f"127.0.0.1:{port}"] + args
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    time.sleep(0.3)
    return proc, port


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def tree(pid):
    """pid and its descendants (/proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def memory(pid):
    """(PSS, RSS) in bytes summed over pid and its descendants."""
    pss = rss = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
        except OSError:
            pass  # ended meanwhile
    return pss, rss


class Sampler:
    """Samples the memory of the newest process named `throng storm` under
    this one every second: the largest PSS sum and RSS sum seen."""

    def __init__(self):
        self.peak_pss = self.peak_rss = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done.wait(1.0):
            for pid in tree(os.getpid())[1:]:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                except OSError:
                    continue
                if len(argv) > 1 and argv[0].endswith(b"throng") and argv[1] == b"storm":
                    pss, rss = memory(pid)
                    self.peak_pss = max(self.peak_pss, pss)
                    self.peak_rss = max(self.peak_rss, rss)
                    break

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak_pss, self.peak_rss


def storm(args, timeout, cpu=None):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    text, cpu_s, rss = run([THRONG, "storm"] + args + ["-q", "--json", path], timeout, cpu=cpu)
    try:
        with open(path) as f:
            return json.load(f), cpu_s, rss, text
    except (OSError, ValueError):
        raise SystemExit(f"bench: storm failed:\n{text}")
    finally:
        os.unlink(path)


def connects(n, runs):
    """Connections opened (and closed) per generator CPU-second: throng storm on
    each I/O, and ab's new connection per request, against one lab server."""
    proc, port = serve(["--threads", "1"], cpu="0")
    print(f"## connects per generator CPU-second ({n} connections, 100 at once, median of {runs})\n")
    print("| target | tool | connections ok | generator CPU | per CPU-s | runs |\n|---|---|---:|---:|---:|---|")
    figures = {}
    for target in (f"tcp://127.0.0.1:{port}", f"http://127.0.0.1:{port}/"):
        tools = [("throng --io epoll", "epoll"), ("throng --io uring", "uring")]
        if target.startswith("http"):
            tools.append(("ab", None))
        rows = {name: [] for name, _ in tools}
        for _ in range(runs):
            for name, io in tools:
                if io:
                    doc, cpu_s, _, _ = storm([target, "-n", str(n), "-c", "100", "--workers", "1", "--io", io,
                                              "--timeout", "10s"], 300, cpu="1")
                    assert doc["generator"].get("io") == io, doc["generator"]
                    ok = doc["measurements"]["connections"]["ok"]
                else:
                    text, cpu_s, _ = run(["ab", "-q", "-n", str(n), "-c", "100", target], 300, cpu="1")
                    ok = n - sum(int(x) for x in re.findall(r"Failed requests:\s+(\d+)", text))
                rows[name].append((ok / max(cpu_s, 1e-9), ok, cpu_s))
        for name, got in rows.items():
            got.sort()
            per, ok, cpu_s = got[len(got) // 2]
            figures[(target, name)] = per
            each = ", ".join(f"{g[0] / 1000:.1f}K" for g in got)
            print(f"| {target.split(':')[0]} | {name} | {ok} | {cpu_s:.2f}s | **{per / 1000:.1f}K** | {each} |")
    print()
    for target in (f"tcp://127.0.0.1:{port}", f"http://127.0.0.1:{port}/"):
        ring, epoll = figures[(target, "throng --io uring")], figures[(target, "throng --io epoll")]
        print(f"- {target.split(':')[0]}: io_uring / epoll = {ring / epoll:.2f}x", end="")
        if (target, "ab") in figures:
            print(f"; io_uring / ab = {ring / figures[(target, 'ab')]:.2f}x", end="")
        print()
    print()
    stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--held", type=int, default=100_000)
    ap.add_argument("--held-tls", type=int, default=10_000)
    ap.add_argument("--held-ws", type=int, default=100_000)
    ap.add_argument("--mtls-seconds", type=int, default=10)
    ap.add_argument("--connects", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=["mtls", "tcp", "tls", "ws", "connects"], action="append")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ["mtls", "tcp", "tls", "ws", "connects"])
    if not args.skip_build:
        build()
    tmp = tempfile.mkdtemp(prefix="throng-bench-storm-")
    certs = f"{tmp}/certs"
    subprocess.run([THRONG, "certs", "--out", certs], check=True, capture_output=True)
    tls_client = ["--cacert", f"{certs}/ca.pem", "--cert", f"{certs}/client.pem", "--key", f"{certs}/client.key"]
    print(f"# throng bench/storm.py ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores)\n")
    try:
        # 1. Self-hosted mTLS.
        proc, port = serve(["--threads", "1", "--tls", certs, "--mtls"], cpu="0") if "mtls" in only else (None, 0)
        rate = 4000
        n = rate * args.mtls_seconds
        print("## self-hosted mTLS: throng storm against throng serve --mtls, both verifying\n")
        print("| groups | connections | established | established/s (wall) | generator CPU | per CPU-s |\n"
              "|---|---:|---:|---:|---:|---:|")
        for groups in (["--tls-groups", "x25519"], []) if proc else ():
            doc, cpu_s, _, _ = storm([f"tls://localhost:{port}", "-n", str(n), "--workers", "1",
                                      "--max-concurrent", "64"] + tls_client + groups, 300, cpu="1")
            m = doc["measurements"]
            ok = m["connections"]["ok"]
            span = (m["last_established_us"] - m["first_attempt_us"]) / 1e6
            label = "x25519" if groups else "default (X25519MLKEM768 offered)"
            print(f"| {label} | {n} | {ok} | {ok / span:.0f} | {cpu_s:.2f}s | {ok / cpu_s:.0f} |")
        if proc:
            stop(proc)
        print()

        # 2. Held connections.
        print("## connections held at once: generator memory per held connection\n")
        print("| transport | connections | held at the peak | generator processes | peak PSS (sum, sampled) "
              "| per held connection | peak RSS (sum of each process's) | per held connection |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|")
        # The lab answers each WebSocket upgrade and echo on 2 cores: at
        # 20,000/s its accept queues overflow (SYN retries, connect
        # timeouts), so WebSockets arrive at 5,000/s and are held longer.
        tcp_server = ["--threads", "1", "--procs", str(args.held // 15000 + 1)]
        for scheme, label, n, extra, server, rate, hold in (
            ("tcp", "tcp (epoll)", args.held, ["--io", "epoll"], tcp_server, 20000, "15s"),
            ("tcp", "tcp (io_uring)", args.held, ["--io", "uring"], tcp_server, 20000, "15s"),
            ("tls", "tls", args.held_tls, tls_client, ["--threads", "1", "--tls", certs, "--mtls"], 20000, "15s"),
            ("ws", "ws", args.held_ws, ["--send", "hello", "--expect", "^hello$"],
             ["--threads", "1", "--procs", str(args.held_ws // 15000 + 1)], 5000, "40s"),
        ):
            if scheme not in only:
                continue
            proc, port = serve(server)
            host = "localhost" if scheme == "tls" else "127.0.0.1"
            path = "/ws" if scheme == "ws" else ""
            sampler = Sampler()
            doc, _, _, _ = storm([f"{scheme}://{host}:{port}{path}", "-n", str(n), "--rate", str(rate),
                                  "--hold", hold, "--workers", "1", "--source", "127.0.0.2-127.0.0.60",
                                  "--timeout", "30s"] + extra, 900)
            pss, _ = sampler.stop()
            m = doc["measurements"]
            peak = m["peak_concurrent_connections"]
            rss = doc["generator"]["peak_rss_bytes"]
            print(f"| {label} | {n} | {peak} | {len(doc['parts'])} | {pss / 1e6:.1f} MB | "
                  f"**{pss / max(peak, 1) / 1024:.2f} KB** | {rss / 1e6:.1f} MB | "
                  f"{rss / max(peak, 1) / 1024:.2f} KB |")
            stop(proc)
        print()

        # 3. Connects per generator CPU-second, ring against epoll (and ab).
        if "connects" in only:
            connects(args.connects, args.runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
