#!/usr/bin/env python3
"""Server-Sent Events: events per generator CPU-second, and memory per open stream.

The lab server (`throng serve --threads 1`, CPU 0) answers GET /sse; the
generator (`throng http --sse`, one thread, CPU 1) reads the streams.

- rate: 50 streams at once (-c 50 -n 50) of 20,000 small events each
  (`events=20000&interval=0&size=16`, the lab writes them as fast as it
  can), 1,000,000 events a run; the figure is events read per
  CPU-second of the generator (user + system, read with wait4). Runs are
  interleaved with a plain read of the same bodies (`throng http` without
  `--sse`: the bytes without the event parser) as the reference.
- memory: peak RSS of the generator (GNU time) at 1 and at 10,000 long
  streams (one event a second), each ended ok by --sse-duration (-c N -n N);
  what each stream adds is
  (peak at N - peak at 1) / (N - 1).

    bench/sse.py [--duration 10 (memory runs)] [--runs 3] [--streams 10000] [--only rate|memory]

No peer is measured: none installed here reads SSE as events (k6 needs the
xk6-sse extension; oha, h2load and wrk read a response as one body).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from benchlib import SERVER_CPU, THRONG, build, free_port, interleaved, memory_header, memory_row, wait_port

RATE_QUERY = "/sse?events=20000&interval=0&size=16"
LONG_QUERY = "/sse?events=1000000&interval=1000&size=16"


def serve():
    port = free_port()
    cmd = ["taskset", "-c", SERVER_CPU, THRONG, "serve", "--listen", f"127.0.0.1:{port}", "--threads", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    time.sleep(0.3)
    return proc, port


def report(path, key):
    try:
        with open(path) as f:
            m = json.load(f)["measurements"]
    except (OSError, ValueError, KeyError):
        return 0
    if key == "events":
        return (m.get("streams") or {}).get("events", 0)
    return m.get("requests", {}).get("ok", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="how long each memory run holds its streams")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--streams", type=int, default=10000)
    ap.add_argument("--only", choices=["rate", "memory"], action="append")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ["rate", "memory"])
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    server, port = serve()
    d = args.duration
    js = f"/tmp/throng-bench-sse-{os.getpid()}.json"
    load = os.getloadavg()
    print(f"# throng bench/sse.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, lab on CPU 0, "
          f"generator on CPU 1, {args.runs} runs, median; load average {load[0]:.2f} {load[1]:.2f})\n")

    def throng(query, conns, extra, key):
        # -n: each connection reads one stream to its end (or --sse-duration); a run
        # cut by -d would leave its streams interrupted, their events uncounted.
        cmd = [THRONG, "http", f"http://127.0.0.1:{port}{query}", "-t", "1", "-q", "--json", js,
               "-c", str(conns), "-n", str(conns), "--io", "epoll", "--timeout", "60s"] + extra
        return cmd, lambda _text: report(js, key)

    try:
        if "rate" in only:
            print(f"## events per generator CPU-second, -c 50, `{RATE_QUERY}`\n")
            cmds = {
                "throng --sse": throng(RATE_QUERY, 50, ["--sse"], "events"),
                "throng (body only)": throng(RATE_QUERY, 50, [], "requests"),
            }
            done, failed = interleaved(cmds, args.runs, 120)
            print("| tool | events/CPU-s | runs | user µs/event | system µs/event |\n|---|---:|---|---:|---:|")
            for name in cmds:
                if name in failed:
                    print(f"| {name} | failed: {failed[name]} | | | |")
                    continue
                if name.endswith("(body only)"):
                    runs = ", ".join(f"{ok / (u + k):.1f} bodies/CPU-s" for ok, u, k in done[name])
                    print(f"| {name} | (bodies of 20,000 events) | {runs} | | |")
                    continue
                rates = [ok / (u + k) for ok, u, k in done[name]]
                r = sorted(rates)[len(rates) // 2]
                us = sorted(u / ok * 1e6 for ok, u, _ in done[name])[len(rates) // 2]
                ks = sorted(k / ok * 1e6 for ok, _, k in done[name])[len(rates) // 2]
                each = ", ".join(f"{x / 1e6:.2f}M" for x in rates)
                print(f"| {name} | {r / 1e6:.2f}M | {each} | {us:.3f} | {ks:.3f} |")
            print()
        if "memory" in only:
            n = args.streams
            print(f"## resident memory per open SSE stream at {n:,} streams (`{LONG_QUERY}`)\n")
            print(f"Peak RSS of the generator alone, at one stream and at {n:,}, each held {d}s; "
                  f"ok is the events read.\n")
            print(memory_header(n))
            print(memory_row("throng --sse", lambda c: throng(LONG_QUERY, c, ["--sse", "--sse-duration", f"{d}s"], "events"), n, d + 60))
            print()
    finally:
        server.terminate()
        server.wait(timeout=20)
        try:
            os.unlink(js)
        except OSError:
            pass


if __name__ == "__main__":
    main()
