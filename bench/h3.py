#!/usr/bin/env python3
"""HTTP/3 requests per generator CPU-second: throng against oha, and where the CPU goes.

The server, on CPU 0, answers every request with 200: by default throng's lab server
(`throng serve --http3 --threads 1`: quinn and h3, the same QUIC stack oha's client uses, and
fast enough that the generators work at 100,000+ requests/s), or with `--server aioquic`
aioquic's HTTP/3 server (scripts/h3_server.py, one Python process, a server that is not
throng's, at about 1,200 requests/s). Each generator runs on CPU 1 with 10 connections of 10
concurrent streams (oha --http-version 3 -c 10 -p 10); runs are interleaved (throng, oha,
throng, ...). Figures are successful requests per CPU-second of the generator process (user +
system, read with wait4); both face the same server in the same run. With `perf` installed,
one more throng run is sampled and the share of its CPU in QUIC packet protection (AES-GCM /
ChaCha20 and header protection in aws-lc) and in the TLS handshake is printed.

    bench/h3.py [--duration 10] [--runs 3] [--server lab|aioquic] [--skip-build]

Needs taskset; aioquic for `--server aioquic` (pip install aioquic); oha from `cargo install
oha` (skipped and said so when missing or built without HTTP/3).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import ROOT, SERVER_CPU, THRONG, build, free_port, have, interleaved, oha_json

CONNS, STREAMS = 10, 10


def oha_parse(text):
    return oha_json(text)[0]


def start_lab(certs):
    port = free_port()
    cmd = ["taskset", "-c", SERVER_CPU, THRONG, "serve", "--http3", "--tls", certs, "--threads", "1",
           "--listen", f"127.0.0.1:{port}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline()
    if "HTTP/3" not in line:
        p.kill()
        sys.exit(f"bench: the lab's HTTP/3 server did not start: {line.strip()}")
    return p, port


def start_server(tmp, certs):
    cmd = ["taskset", "-c", SERVER_CPU, sys.executable, os.path.join(ROOT, "scripts", "h3_server.py"),
           "--cert", f"{certs}/server.pem", "--key", f"{certs}/server.key", "--stats", f"{tmp}/stats.json",
           "--max-seconds", "1800"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.match(r"listening on (\d+)", line)
    if not m:
        p.kill()
        sys.exit(f"bench: the aioquic server did not start: {line.strip() or p.stderr.read().strip()}"
                 " (pip install aioquic)")
    return p, int(m.group(1))


def crypto_share(cmd, tmp):
    """Runs cmd under perf record; returns the shares (percent of its samples) in QUIC packet
    protection, in handshake and key setup (incl. aws-lc seeding its random generator from CPU
    jitter), and in the kernel, or None when perf cannot sample here."""
    data = f"{tmp}/perf.data"
    r = subprocess.run(["perf", "record", "-q", "-F", "4999", "-o", data, "--"] + cmd,
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(data):
        return None

    def report(sort):
        return subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort, "--stdio",
                               "--percent-limit", "0"], capture_output=True, text=True).stdout

    aead = setup = kernel = 0.0
    for line in report("sym").splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[.\]\s+(\S+)", line)
        if not m:
            continue
        pct, sym = float(m.group(1)), m.group(2).lower()
        if re.search(r"gcm|aes_|chacha|poly1305|ghash|header_protect|seal_scatter|open_gather", sym):
            aead += pct
        elif re.search(r"jent|ecdsa|p256|x25519|ec_gf|bn_|sha256|sha512|sha3|hkdf|hmac", sym):
            setup += pct
    for line in report("dso").splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[kernel", line)
        if m:
            kernel += float(m.group(1))
    return aead, setup, kernel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--server", choices=["lab", "aioquic"], default="lab")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    tmp = tempfile.mkdtemp(prefix="throng-bench-h3-")
    subprocess.run([THRONG, "certs", "--out", f"{tmp}/certs"], check=True, capture_output=True)
    certs = f"{tmp}/certs"
    server, port = start_lab(certs) if args.server == "lab" else start_server(tmp, certs)
    # A name, not an address: oha sends the host as SNI and hangs when it is an IP literal.
    url = f"https://localhost:{port}/"
    d = args.duration
    js = f"{tmp}/r.json"

    def throng_ok(_text):
        try:
            with open(js) as f:
                return json.load(f)["measurements"]["requests"]["ok"]
        except (OSError, ValueError, KeyError):
            return 0

    throng_cmd = [THRONG, "http", url, "--http3", "-4", "--cacert", f"{certs}/ca.pem", "-t", "1", "-q",
                  "--json", js, "-c", str(CONNS), "--streams", str(STREAMS), "-d", f"{d}s"]
    tools = {
        "throng": (throng_cmd, throng_ok),
        "oha": (["oha", "--http-version", "3", "--ipv4", "-c", str(CONNS), "-p", str(STREAMS), "-z", f"{d}s",
                 "--no-tui", "--insecure", "--output-format", "json", url], oha_parse),
    }
    print(f"# throng bench/h3.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {args.server} on "
          f"CPU 0, generator on CPU 1, {d}s x {args.runs} runs, median)\n")
    try:
        print(f"## HTTP/3: requests per generator CPU-second, -c {CONNS} x {STREAMS} streams\n")
        print("| tool | requests/CPU-s | requests/s | runs (req/CPU-s) |\n|---|---:|---:|---|")
        cmds = {name: tc for name, tc in tools.items() if have(name)}
        done, failed = interleaved(cmds, args.runs, d + 30)
        rows = {name: [(ok / (u + k), ok / d) for ok, u, k in runs] for name, runs in done.items()}
        for name in tools:
            if name not in cmds:
                print(f"| {name} | skipped: not installed | | |")
            elif name in failed:
                print(f"| {name} | failed: {failed[name][:100]} | | |")
            else:
                r = sorted(rows[name])
                mid = r[len(r) // 2]
                runs = ", ".join(f"{x / 1000:.1f}K" for x, _ in rows[name])
                print(f"| {name} | {mid[0] / 1000:.1f}K | {mid[1]:.0f} | {runs} |")
        pairs = list(zip(rows.get("throng", []), rows.get("oha", [])))
        if pairs:
            ratios = sorted(t[0] / o[0] for t, o in pairs)
            each = ", ".join(f"{t[0] / o[0]:.2f}" for t, o in pairs)
            print(f"\nthrong / oha, round by round: {each}; median {ratios[len(ratios) // 2]:.2f}x")
        print()
        if shutil.which("perf"):
            share = crypto_share(["taskset", "-c", "1"] + throng_cmd, tmp)
            if share:
                print(f"throng's CPU (perf, one {d}s run): {share[0]:.1f} % in QUIC packet protection "
                      f"(AES-GCM and header protection), {share[1]:.1f} % in handshake and key setup "
                      f"(incl. aws-lc's jitter-entropy seeding), {share[2]:.1f} % in the kernel (UDP)\n")
            else:
                print("perf could not sample throng here; no CPU breakdown\n")
        else:
            print("perf is not installed (apt-get install linux-perf); no CPU breakdown\n")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
