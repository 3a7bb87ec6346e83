#!/usr/bin/env python3
"""TLS 1.3 full handshakes per generator CPU-second: throng (io_uring and epoll)
against oha and wrk; and TLS keep-alive requests per CPU-second.

nginx (one worker, CPU 0) serves TLS 1.3 with an ECDSA P-256 certificate from
`throng certs`, session resumption off; each generator (CPU 1) opens a new
connection per request (the keep-alive rows: 50 connections kept). Figures are
successful requests (one full handshake each, but in the keep-alive rows) per
CPU-second of the generator process.

    bench/tls.py [--duration 10] [--runs 3]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time

from benchlib import THRONG, build, count, have, oha_json, run, start_nginx


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    if not args.skip_build:
        build()
    tmp = tempfile.mkdtemp(prefix="throng-bench-tls-")
    subprocess.run([THRONG, "certs", "--out", f"{tmp}/certs"], check=True, capture_output=True)
    c = f"{tmp}/certs"
    block = f"""
  server {{ listen 127.0.0.1:{{port}} ssl backlog=16384;
    ssl_certificate {c}/server.pem; ssl_certificate_key {c}/server.key;
    ssl_protocols TLSv1.3; ssl_session_tickets off; ssl_session_cache off;
    ssl_client_certificate {c}/ca.pem; ssl_verify_client optional;
    location / {{ return 200; }} }}"""
    nginx, port = start_nginx(tmp, block)
    url = f"https://127.0.0.1:{port}/"
    name_url = f"https://localhost:{port}/"
    d = args.duration
    js = f"{tmp}/r.json"

    def throng(extra, target=url, io="uring", keepalive=False):
        def parse(_text):
            with open(js) as f:
                doc = json.load(f)
            m = doc["measurements"]
            ran = doc.get("generator", {}).get("io")
            if ran != io:
                raise SystemExit(f"asked for --io {io}, {ran} ran")
            group = ",".join(m.get("tls", {}).get("groups", {}).keys())
            return m["requests"]["ok"], group
        new_conns = [] if keepalive else ["--no-keepalive"]
        return [THRONG, "http", target, "-t", "1", "-c", "50", "-d", f"{d}s", "-q", "--io", io,
                "--json", js] + new_conns + extra, parse

    def oha_parse(text):
        return oha_json(text)[0], "oha default"

    cases = [
        ("throng io_uring, no verification (--insecure), X25519", "throng",
         lambda: throng(["--insecure", "--tls-groups", "x25519"])),
        ("throng epoll, no verification (--insecure), X25519", "throng",
         lambda: throng(["--insecure", "--tls-groups", "x25519"], io="epoll")),
        ("throng io_uring, no verification (--insecure), default groups (X25519MLKEM768 offered)", "throng",
         lambda: throng(["--insecure"])),
        ("throng epoll, no verification (--insecure), default groups (X25519MLKEM768 offered)", "throng",
         lambda: throng(["--insecure"], io="epoll")),
        ("oha, no verification (--insecure)", "oha",
         lambda: (["oha", "-c", "50", "-z", f"{d}s", "--no-tui", "--disable-keepalive", "--insecure",
                   "--output-format", "json", url], oha_parse)),
        ("wrk, Connection: close (wrk does not verify)", "wrk",
         lambda: (["wrk", "-t1", "-c50", f"-d{d}s", "-H", "Connection: close", url],
                  lambda t: (count(r"(\d+) requests in", t), "OpenSSL default"))),
        ("throng io_uring, verifying (--cacert), X25519", "throng",
         lambda: throng(["--cacert", f"{c}/ca.pem", "--tls-groups", "x25519"], name_url)),
        ("throng io_uring, verifying, client certificate (mTLS), X25519", "throng",
         lambda: throng(["--cacert", f"{c}/ca.pem", "--cert", f"{c}/client.pem", "--key", f"{c}/client.key",
                         "--tls-groups", "x25519"], name_url)),
        ("keep-alive: throng io_uring, 50 connections", "throng",
         lambda: throng(["--insecure"], keepalive=True)),
        ("keep-alive: throng epoll, 50 connections", "throng",
         lambda: throng(["--insecure"], io="epoll", keepalive=True)),
        ("keep-alive: wrk, 50 connections", "wrk",
         lambda: (["wrk", "-t1", "-c50", f"-d{d}s", url],
                  lambda t: (count(r"(\d+) requests in", t), "OpenSSL default"))),
    ]
    print(f"# throng bench/tls.py ({time.strftime('%Y-%m-%d %H:%M')}; nginx TLS 1.3 ECDSA P-256 on CPU 0, "
          f"generator on CPU 1, -c 50, a new connection per request but in the keep-alive rows, "
          f"{d}s x {args.runs} runs, median)\n")
    print("| generator | requests/CPU-s (median) | runs | server requests/s |\n|---|---:|---|---:|")
    try:
        for title, tool, make in cases:
            if not have(tool):
                print(f"| {title} | skipped: {tool} not installed | | |")
                continue
            rates, walls = [], []
            for _ in range(args.runs):
                cmd, parse = make()
                text, cpu, _ = run(cmd, d + 60)
                ok, _ = parse(text)
                rates.append(ok / cpu if cpu else 0)
                walls.append(ok / d)
            print(f"| {title} | {statistics.median(rates) / 1000:.2f}K | "
                  f"{', '.join(f'{r / 1000:.2f}K' for r in rates)} | {statistics.median(walls):.0f} |")
    finally:
        nginx.terminate()  # SIGTERM: the master stops its workers too
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
