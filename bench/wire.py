#!/usr/bin/env python3
"""Latency against the wire: a packet capture of the same run is the ground truth.

tcpdump records every packet on `lo` to and from an nginx `return 200` (pinned
to CPU 0) while a generator (pinned to CPU 1) loads it. Per connection, with
one request in flight at a time (keep-alive), each request packet is paired
with the next response packet: that interval is the latency on the wire. The
script prints the wire's median and p99 next to what the generator reported
for the same requests, and the differences:

    throng (kernel)  throng's default: responses timed by the kernel's receive
                     stamp (SO_TIMESTAMPING), requests at the write's system call
    throng (user)    THRONG_TIMESTAMPS=user: responses timed when the read returns
    wrk              wrk --latency (closed loop only; it has no open loop)

throng's figure is its `response` phase (first request byte written → last
response byte), read from the result's histogram: that is what the wire sees.
In open loop throng's `latency` also counts the wait for a free connection;
the wire cannot see that, so it is printed apart.

    bench/wire.py                       # -c 4, -c 50, -r 20000; 5 s each
    bench/wire.py --duration 3 --only c4

Needs: nginx, taskset, tcpdump (apt-get install tcpdump) and the right to
capture on lo (root or CAP_NET_RAW); wrk is optional. The machine may be shared:
compare figures within one run, never across runs.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from benchlib import CLIENT_CPU, SERVER_CPU, THRONG, build, run, start_nginx

SETUPS = {
    "c4": ("closed loop, -c 4", ["-c", "4"]),
    "c50": ("closed loop, -c 50", ["-c", "50"]),
    "r20000": ("open loop, -r 20000", ["-r", "20000"]),
}


def capture(port, path):
    """Starts tcpdump on lo for `port`, headers only, nanosecond stamps."""
    p = subprocess.Popen(["tcpdump", "-i", "lo", "-n", "-s", "96", "-B", "65536", "--time-stamp-precision", "nano",
                          "-w", path, f"tcp port {port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # tcpdump says "listening on lo" once the capture is live.
    deadline = time.time() + 10
    line = b""
    os.set_blocking(p.stderr.fileno(), False)
    while time.time() < deadline and b"listening on" not in line:
        line += p.stderr.read() or b""
        if p.poll() is not None:
            sys.exit(f"bench: tcpdump failed: {line.decode(errors='replace').strip()}")
        time.sleep(0.05)
    if b"listening on" not in line:
        p.kill()
        sys.exit("bench: tcpdump did not start within 10 s")
    return p


def stop_capture(p):
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=10)
    text = (p.stderr.read() or b"").decode(errors="replace")
    dropped = re.search(r"(\d+) packets? dropped by kernel", text)
    return int(dropped.group(1)) if dropped else -1


def wire_latencies(path, port):
    """Request packet → next response packet, per connection, in µs."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic == 0xA1B23C4D:
        scale = 1e-9
    elif magic == 0xA1B2C3D4:
        scale = 1e-6
    else:
        sys.exit(f"bench: {path}: not a little-endian pcap file")
    linktype = struct.unpack_from("<I", data, 20)[0]
    link = {1: 14, 0: 4, 113: 16, 276: 20}.get(linktype)
    if link is None:
        sys.exit(f"bench: {path}: link type {linktype} not handled")
    pending = {}  # client port -> time of its request packet
    out = []
    off = 24
    n = len(data)
    while off + 16 <= n:
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        pkt = data[off:off + incl]
        off += incl
        ip = link
        if len(pkt) < ip + 20 or pkt[ip] >> 4 != 4:
            continue
        ihl = (pkt[ip] & 0x0F) * 4
        total = struct.unpack_from(">H", pkt, ip + 2)[0]
        tcp = ip + ihl
        if len(pkt) < tcp + 13:
            continue
        sport, dport = struct.unpack_from(">HH", pkt, tcp)
        thl = (pkt[tcp + 12] >> 4) * 4
        payload = total - ihl - thl
        if payload <= 0:
            continue
        t = sec + frac * scale
        if dport == port:
            # A request (its first packet, if it took several).
            pending.setdefault(sport, t)
        elif sport == port:
            start = pending.pop(dport, None)
            if start is not None:
                out.append((t - start) * 1e6)
    return out


def pct(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[i]


def wrk_percentiles(text):
    """wrk --latency: {50: µs, 99: µs}."""
    units = {"us": 1, "ms": 1000, "s": 1_000_000}
    found = {}
    for q, value, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M):
        found[int(q)] = float(value) * units[unit]
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=5, help="seconds per run (default 5)")
    ap.add_argument("--only", choices=list(SETUPS), action="append")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    if not args.skip_build:
        build()
    for tool in ("taskset", "tcpdump"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is missing")

    tmp = tempfile.mkdtemp(prefix="throng-wire-")
    nginx, port = start_nginx(tmp, "server { listen 127.0.0.1:{port} backlog=16384; location / { return 200; } }")
    url = f"http://127.0.0.1:{port}/"
    dur = args.duration
    print(f"# throng bench/wire.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, nginx on CPU "
          f"{SERVER_CPU}, generator on CPU {CLIENT_CPU}, tcpdump on lo, {dur}s per run)\n")
    print("| setup | generator | wire p50 | reported p50 | Δ p50 | wire p99 | reported p99 | Δ p99 "
          "| wire pairs | reported | dropped by tcpdump |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for key in args.only or list(SETUPS):
            title, flags = SETUPS[key]
            runs = [("throng (kernel)", "kernel"), ("throng (user)", "user")]
            if key != "r20000" and shutil.which("wrk"):
                runs.append(("wrk", None))
            for name, clock in runs:
                pcap = f"{tmp}/{key}.pcap"
                cap = capture(port, pcap)
                json_path = f"{tmp}/{key}.json"
                extra = ""
                if clock is None:
                    conns = flags[1]
                    text, _, _ = run(["wrk", "-t1", f"-c{conns}", f"-d{dur}s", "--latency", url], dur + 30)
                    p = wrk_percentiles(text)
                    reported = (p.get(50, float("nan")), p.get(99, float("nan")))
                    count = re.search(r"(\d+) requests in", text)
                    n_reported = int(count.group(1)) if count else 0
                else:
                    env = dict(os.environ, THRONG_TIMESTAMPS=clock)
                    cmd = ["taskset", "-c", CLIENT_CPU, THRONG, "http", url, "-t", "1", "-q", "-d", f"{dur}s",
                           "--json", json_path] + flags
                    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   timeout=dur + 30)
                    with open(json_path) as f:
                        d = json.load(f)
                    ph = d["measurements"]["phases"]
                    reported = (ph["response"]["p50_us"], ph["response"]["p99_us"])
                    n_reported = ph["response"]["count"]
                    t = d["generator"].get("timestamps") or {}
                    if key == "r20000":
                        extra = f" (latency p50 {ph['latency']['p50_us']} µs, p99 {ph['latency']['p99_us']} µs)"
                    if t.get("user") and clock == "kernel":
                        extra += f" ({t['user']} user-clock fallbacks)"
                dropped = stop_capture(cap)
                lat = sorted(wire_latencies(pcap, port))
                os.remove(pcap)
                w50, w99 = pct(lat, 50), pct(lat, 99)
                r50, r99 = reported
                print(f"| {title} | {name}{extra} | {w50:.1f} µs | {r50:.1f} µs | {r50 - w50:+.1f} µs "
                      f"| {w99:.1f} µs | {r99:.1f} µs | {(r99 - w99) / w99 * 100:+.1f}% "
                      f"| {len(lat)} | {n_reported} | {dropped} |", flush=True)
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
