#!/usr/bin/env python3
"""HTTP/2 requests per generator CPU-second: throng against h2load and oha.

Runs are interleaved (throng, h2load, oha, throng, ...); the table gives the
median and every run in the order they ran.

nginx (one worker, CPU 0) answers `return 200` over HTTP/2 with TLS (ALPN h2,
TLS 1.3, an ECDSA P-256 certificate from `throng certs`) and over h2c (prior
knowledge); each generator runs on CPU 1 with 10 connections of 10 concurrent
streams (h2load -c 10 -m 10; oha -c 10 -p 10). Figures
are successful requests per CPU-second of the generator process (user + system,
read with wait4), and resident memory per open HTTP/2 connection at 10,000.

An open loop (`--only open`) runs the same schedule on throng's two I/O models
(h2c, `-r RATE -c 10 --streams 10`), interleaved round by round: at a fixed rate
the work is fixed, so the CPU it took is its cost (no peer runs HTTP/2 on a
request schedule: h2load's `--rate` paces connections).

    bench/h2.py [--duration 10] [--runs 3] [--only tls|h2c|memory|open] [--rate 20000]

Missing peers are skipped and said so. Needs nginx with http_v2 (Debian's
nginx-light), taskset; peers from `apt-get install nghttp2-client` (h2load)
and `cargo install oha`.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import os

from benchlib import (THRONG, build, count, have, interleaved, memory_header, memory_row, oha_json, open_loop_table,
                      run, start_nginx)

CONNS, STREAMS = 10, 10


def oha_parse(text):
    return oha_json(text)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=["tls", "h2c", "memory", "open"], action="append")
    ap.add_argument("--rate", type=int, default=20000, help="the open loop's rate (default 20000 req/s)")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ["tls", "h2c", "memory", "open"])
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    tmp = tempfile.mkdtemp(prefix="throng-bench-h2-")
    subprocess.run([THRONG, "certs", "--out", f"{tmp}/certs"], check=True, capture_output=True)
    c = f"{tmp}/certs"
    # Two ports: {port} is TLS + ALPN h2; {port}+1 would collide, so h2c gets its own server block
    # on a port picked the same way (start_nginx substitutes only {port}: the h2c port is passed in).
    import benchlib
    h2c_port = benchlib.free_port()
    block = f"""
  http2_max_concurrent_streams 1000; http2_max_requests 100000000;
  server {{ listen 127.0.0.1:{{port}} ssl http2 backlog=16384;
    ssl_certificate {c}/server.pem; ssl_certificate_key {c}/server.key;
    ssl_protocols TLSv1.3;
    location / {{ return 200; }} }}
  server {{ listen 127.0.0.1:{h2c_port} http2 backlog=16384;
    location / {{ return 200; }} }}"""
    nginx, port = start_nginx(tmp, block)
    benchlib.wait_port(h2c_port, nginx)
    d = args.duration
    js = f"{tmp}/r.json"
    print(f"# throng bench/h2.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, nginx on CPU 0, "
          f"generator on CPU 1, {d}s x {args.runs} runs, median)\n")

    def throng(url, extra):
        def parse(_text):
            try:
                with open(js) as f:
                    return json.load(f)["measurements"]["requests"]["ok"]
            except (OSError, ValueError, KeyError):
                return 0
        return [THRONG, "http", url, "--http2", "-t", "1", "-q", "--json", js] + extra, parse

    def tools(url, conns, streams, dur):
        ca = ["--cacert", f"{c}/ca.pem"] if url.startswith("https") else []
        return {
            # --io auto: the ring, over TLS too.
            "throng": throng(url, ca + ["-c", str(conns), "--streams", str(streams), "-d", f"{dur}s"]),
            "throng-epoll": throng(url, ca + ["-c", str(conns), "--streams", str(streams), "-d", f"{dur}s",
                                              "--io", "epoll"]),
            "h2load": (["h2load", "-c", str(conns), "-m", str(streams), "-D", str(dur), url],
                       lambda t: count(r"(\d+) succeeded", t)),
            "oha": (["oha", "--http2", "-c", str(conns), "-p", str(streams), "-z", f"{dur}s",
                     "--no-tui", "--insecure", "--output-format", "json", url], oha_parse),
        }

    try:
        for scen, url in [("tls", f"https://127.0.0.1:{port}/"), ("h2c", f"http://127.0.0.1:{h2c_port}/")]:
            if scen not in only:
                continue
            print(f"## {scen}: requests per generator CPU-second, -c {CONNS} x {STREAMS} streams\n")
            print("| tool | requests/CPU-s | runs |\n|---|---:|---|")
            cmds = {name: tc for name, tc in tools(url, CONNS, STREAMS, d).items() if have(name)}
            done, failed = interleaved(cmds, args.runs, d + 30)
            rates = {name: [ok / (u + k) for ok, u, k in runs] for name, runs in done.items()}
            # (user, system) CPU microseconds per request, run by run.
            split = {name: [(u / ok * 1e6, k / ok * 1e6) for ok, u, k in runs] for name, runs in done.items()}
            for name in tools(url, CONNS, STREAMS, d):
                if name not in cmds:
                    print(f"| {name} | skipped: not installed | |")
                elif name in failed:
                    print(f"| {name} | failed: {failed[name]} | |")
                else:
                    r = sorted(rates[name])
                    runs = ", ".join(f"{x / 1000:.1f}K" for x in rates[name])
                    print(f"| {name} | {r[len(r) // 2] / 1000:.1f}K | {runs} |")
            # Where a request's CPU goes: the kernel's share bounds what any
            # client can gain (2x a peer needs the whole request in half its time).
            print("\n| tool | user µs/request | system µs/request | total |\n|---|---:|---:|---:|")
            for name in cmds:
                if split[name]:
                    u = sorted(x for x, _ in split[name])[len(split[name]) // 2]
                    k = sorted(y for _, y in split[name])[len(split[name]) // 2]
                    print(f"| {name} | {u:.2f} | {k:.2f} | {u + k:.2f} |")
            # Each round's tools ran side by side in time: their ratio is the
            # steadier figure when the machine's speed drifts between rounds.
            for ours, peer in [("throng", "h2load"), ("throng", "oha"), ("throng-epoll", "h2load"),
                               ("throng", "throng-epoll")]:
                pairs = list(zip(rates.get(ours, []), rates.get(peer, [])))
                if pairs:
                    ratios = sorted(t / p for t, p in pairs)
                    each = ", ".join(f"{t / p:.2f}" for t, p in pairs)
                    print(f"\n{ours} / {peer}, round by round: {each}; median {ratios[len(ratios) // 2]:.2f}x")
            print()
        if "open" in only:
            print(f"## h2c open loop at {args.rate} req/s, epoll vs --io uring "
                  f"(-r {args.rate} -d {d}s -t 1 -c {CONNS} --streams {STREAMS})\n")
            open_loop_table(f"http://127.0.0.1:{h2c_port}/", ["--http2", "-c", str(CONNS), "--streams", str(STREAMS)],
                            args.rate, d, args.runs, tmp)
        if "memory" in only:
            conns = 10000
            print(f"## resident memory per open HTTP/2 connection (h2c, one stream each) at {conns:,} connections\n")
            print("Peak RSS of the generator alone (wait4), at one connection and at "
                  f"{conns:,}; what each connection adds is (peak at {conns:,} - peak at 1) / {conns - 1:,}.\n")
            print(memory_header(conns))
            for name in tools(f"http://127.0.0.1:{h2c_port}/", 1, 1, d):
                if name == "oha" or not have(name):
                    continue
                print(memory_row(name, lambda c, name=name: tools(f"http://127.0.0.1:{h2c_port}/", c, 1, d)[name],
                                 conns, d + 60))
            print()
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
