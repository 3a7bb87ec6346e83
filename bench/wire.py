#!/usr/bin/env python3
"""Latency against the wire: a packet capture of the same run is the ground truth.

tcpdump records every packet on `lo` to and from the server (nginx `return 200`, or the aioquic
HTTP/3 server scripts/h3_server.py; pinned to CPU 0) while a generator (pinned to CPU 1) loads it.
Each request is matched with its response in the capture, and that interval is the latency on the
wire. The script prints the wire's median and p99 next to what the generator reported for the
same requests, and the differences. How requests are matched, by protocol:

    HTTP/1.1     per connection, one request in flight (keep-alive): a request's first packet
                 → the next response packet
    TLS          the same, by record timing: the first client packet after the previous
                 response → the next server packet; a connection's first two turns (the TLS 1.3
                 handshake, the session tickets) are left out
    HTTP/2 h2c   frames are read from whole packets: per connection and stream id, the first
                 byte of the request's HEADERS → the last byte of the response frame that ends
                 the stream; right with any number of streams in flight
    HTTP/3       encrypted UDP: one connection, one stream in flight, datagrams in order: the
                 first request-sized 1-RTT datagram after the previous response → the next
                 response-sized one from the server. ACK-only datagrams are told apart by size
                 only (45 bytes or less), the handshake by its long headers; a lost or reordered
                 datagram, or a request coalesced into a datagram with other frames, would pair
                 wrong, and several connections cannot be followed (throng's HTTP/3 connections
                 share one socket, and a connection id differs between the two directions)

    throng (kernel)  throng's default: responses timed by the kernel's receive
                     stamp (SO_TIMESTAMPING), requests at the write's system call
    throng (user)    THRONG_TIMESTAMPS=user: responses timed when the read returns
    wrk              wrk --latency (HTTP/1.1 closed loop only; it has no open loop)
    other            --compare THRONG: another build, in the same run

throng's figure is its `response` phase (first request byte written → last
response byte), read from the result's histogram: that is what the wire sees.
In open loop throng's `latency` also counts the wait for a free connection;
the wire cannot see that, so it is printed apart.

    bench/wire.py                       # every setup, 5 s each
    bench/wire.py --duration 3 --only c4 --only h2
    bench/wire.py --skip-build --only h2 --compare /tmp/throng-old

Needs: nginx, taskset, tcpdump (apt-get install tcpdump) and the right to
capture on lo (root or CAP_NET_RAW); wrk is optional; aioquic for h3 (python3 -m pip install
aioquic). The machine may be shared: compare figures within one run, never across runs.
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

from benchlib import CLIENT_CPU, ROOT, SERVER_CPU, THRONG, build, free_port, run, start_nginx

# key: (title, protocol, throng's flags). The protocol picks the server and how the capture is read.
SETUPS = {
    "c4": ("HTTP/1.1, closed loop, -c 4", "h1", ["-c", "4"]),
    "c50": ("HTTP/1.1, closed loop, -c 50", "h1", ["-c", "50"]),
    "r20000": ("HTTP/1.1, open loop, -r 20000", "h1", ["-r", "20000"]),
    "tls": ("HTTP/1.1 over TLS, -c 4", "tls", ["-c", "4"]),
    "h2": ("HTTP/2 h2c, -c 4 --streams 1", "h2", ["--http2", "-c", "4", "--streams", "1"]),
    "h2s10": ("HTTP/2 h2c, -c 4 --streams 10", "h2", ["--http2", "-c", "4", "--streams", "10"]),
    # One connection: a worker's HTTP/3 connections share one UDP socket, and a datagram's
    # connection id is not the same in the two directions, so only one connection can be followed.
    "h3": ("HTTP/3 (aioquic), -c 1 --streams 1", "h3", ["--http3", "-c", "1", "--streams", "1"]),
}



def us(hist, figure):
    """A histogram figure of a result, in µs: `p50_us` (result schema v2), or `p50` as a build
    from before v2 wrote it (--compare)."""
    return hist.get(f"{figure}_us", hist.get(figure))

def capture(port, path, proto="tcp", snap=96):
    """Starts tcpdump on lo for `port`, nanosecond stamps; `snap` bytes of each packet (headers
    only by default; h2c's frames need whole packets)."""
    p = subprocess.Popen(["tcpdump", "-i", "lo", "-n", "-s", str(snap), "-B", "65536", "--time-stamp-precision",
                          "nano", "-w", path, f"{proto} port {port}"],
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
    # The kernel hands packets to tcpdump a block at a time, a block at most 1 s after its first
    # packet; tcpdump stopped sooner would lose the last one (most of a slow run, as HTTP/3's).
    time.sleep(1.2)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=10)
    text = (p.stderr.read() or b"").decode(errors="replace")
    dropped = re.search(r"(\d+) packets? dropped by kernel", text)
    return int(dropped.group(1)) if dropped else -1


def packets(path):
    """(time in s, "tcp"|"udp", source port, destination port, payload length, captured payload)
    of every IPv4/IPv6 TCP or UDP packet in a pcap file."""
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
    off = 24
    n = len(data)
    while off + 16 <= n:
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        pkt = data[off:off + incl]
        off += incl
        ip = link
        if len(pkt) < ip + 20:
            continue
        version = pkt[ip] >> 4
        if version == 4:
            ihl = (pkt[ip] & 0x0F) * 4
            total = struct.unpack_from(">H", pkt, ip + 2)[0]
            proto = pkt[ip + 9]
            l4, l4_len = ip + ihl, total - ihl
        elif version == 6 and len(pkt) >= ip + 40:
            # No extension headers on loopback traffic.
            proto = pkt[ip + 6]
            l4, l4_len = ip + 40, struct.unpack_from(">H", pkt, ip + 4)[0]
        else:
            continue
        t = sec + frac * scale
        if proto == 6 and len(pkt) >= l4 + 13:
            sport, dport = struct.unpack_from(">HH", pkt, l4)
            thl = (pkt[l4 + 12] >> 4) * 4
            yield t, "tcp", sport, dport, l4_len - thl, pkt[l4 + thl:]
        elif proto == 17 and len(pkt) >= l4 + 8:
            sport, dport = struct.unpack_from(">HH", pkt, l4)
            yield t, "udp", sport, dport, l4_len - 8, pkt[l4 + 8:]


def turns(path, port, skip=0, keep=None):
    """One request in flight per connection: the first client packet after the previous response
    → the next server packet, per connection (client port), in µs. `skip`: pairs dropped at the
    start of each connection (a handshake's flights); `keep(payload length, payload)`: packets that
    count (others, such as QUIC ACK-only datagrams, are ignored)."""
    pending = {}  # client port -> time of its request packet
    seen = {}  # client port -> pairs so far
    out = []
    for t, _, sport, dport, size, payload in packets(path):
        if size <= 0 or (keep and not keep(size, payload)):
            continue
        if dport == port:
            # A request (its first packet, if it took several).
            pending.setdefault(sport, t)
        elif sport == port:
            start = pending.pop(dport, None)
            if start is not None:
                k = seen.get(dport, 0)
                seen[dport] = k + 1
                if k >= skip:
                    out.append((t - start) * 1e6)
    return out


class H2Side:
    """One direction of an h2c connection: its bytes, cut into frames as they complete, each with
    the capture time of the packet that carried its first byte and of the one with its last."""

    def __init__(self, preface):
        self.buf = bytearray()
        self.marks = []  # (offset in buf where a packet's payload starts, its time)
        self.preface = preface

    def feed(self, t, payload):
        self.marks.append((len(self.buf), t))
        self.buf += payload
        if self.preface:
            if len(self.buf) < 24:
                return
            self.drop(24)
            self.preface = False
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + length:
                return
            kind, flags = self.buf[3], self.buf[4]
            stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            yield kind, flags, stream, self.at(0), self.at(9 + length - 1)
            self.drop(9 + length)

    def at(self, offset):
        t = self.marks[0][1]
        for start, mt in self.marks:
            if start > offset:
                break
            t = mt
        return t

    def drop(self, n):
        del self.buf[:n]
        marks = [(s - n, t) for s, t in self.marks]
        # Keep the last packet that starts at or before the new offset 0.
        first = 0
        for i, (s, _) in enumerate(marks):
            if s <= 0:
                first = i
        self.marks = marks[first:]


def h2_streams(path, port):
    """h2c: per connection and stream id, the first byte of the request's HEADERS frame → the
    last byte of the response frame that ends the stream (END_STREAM), in µs."""
    sides = {}  # (client port, to server) -> H2Side
    started = {}  # (client port, stream) -> time
    out = []
    for t, proto, sport, dport, size, payload in packets(path):
        if proto != "tcp" or size <= 0:
            continue
        if len(payload) < size:
            sys.exit("bench: the capture cut packets short (snap length): frames cannot be read")
        up = dport == port
        client = sport if up else dport
        side = sides.setdefault((client, up), H2Side(preface=up))
        for kind, flags, stream, first, last in side.feed(t, payload[:size]):
            if stream == 0:
                continue
            if up and kind == 0x1:
                started.setdefault((client, stream), first)
            elif not up and kind in (0x0, 0x1) and flags & 0x1:
                start = started.pop((client, stream), None)
                if start is not None:
                    out.append((last - start) * 1e6)
    return out


def quic_data(size, payload):
    """A short-header (1-RTT) QUIC datagram of a request's or response's size: the handshake's
    long-header packets, ACK-only datagrams (smaller) and path-MTU probes or padded datagrams
    (larger) are not the exchange."""
    return bool(payload) and not payload[0] & 0x80 and QUIC_ACK_ONLY < size < QUIC_PADDED


# A 1-RTT datagram of at most this many bytes is taken for ACK-only (header, connection id, ACK
# frame, AEAD tag: 31-36 bytes between throng and aioquic); a GET for / is ~60-70 bytes and
# aioquic's answer 57. From this size on, a datagram is an MTU probe or padded.
QUIC_ACK_ONLY = 45
QUIC_PADDED = 1200


def wire_latencies(path, port, kind):
    if kind == "h1":
        return turns(path, port)
    if kind == "tls":
        # TLS 1.3: ClientHello → the server's flight, and the client's Finished → the session
        # tickets, are a connection's first two turns.
        return turns(path, port, skip=2)
    if kind == "h2":
        return h2_streams(path, port)
    if kind == "h3":
        # The first 1-RTT turns carry HANDSHAKE_DONE, new connection ids and the session ticket.
        return turns(path, port, skip=3, keep=quic_data)
    raise ValueError(kind)


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
    ap.add_argument("--compare", metavar="THRONG", help="another throng build, run beside this one in each setup "
                    "(its rows say `other`)")
    args = ap.parse_args()
    if not args.skip_build:
        build()
    for tool in ("taskset", "tcpdump"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is missing")

    keys = args.only or list(SETUPS)
    tmp = tempfile.mkdtemp(prefix="throng-wire-")
    certs = f"{tmp}/certs"
    protos = {SETUPS[k][1] for k in keys}
    if protos & {"tls", "h3"}:
        subprocess.run([THRONG, "certs", "--out", certs], check=True, stdout=subprocess.DEVNULL, timeout=60)
    tls_port, h2_port = free_port(), free_port()
    nginx, port = start_nginx(tmp, f"""
server {{ listen 127.0.0.1:{{port}} backlog=16384; location / {{ return 200; }} }}
server {{ listen 127.0.0.1:{tls_port} ssl backlog=16384; ssl_certificate {certs}/server.pem;
         ssl_certificate_key {certs}/server.key; location / {{ return 200; }} }}
server {{ listen 127.0.0.1:{h2_port} http2 backlog=16384; location / {{ return 200; }} }}
""" if protos & {"tls"} else f"""
server {{ listen 127.0.0.1:{{port}} backlog=16384; location / {{ return 200; }} }}
server {{ listen 127.0.0.1:{h2_port} http2 backlog=16384; location / {{ return 200; }} }}
""")
    h3 = None
    dur = args.duration
    print(f"# throng bench/wire.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, servers on CPU "
          f"{SERVER_CPU}, generator on CPU {CLIENT_CPU}, tcpdump on lo, {dur}s per run)\n")
    print("| setup | generator | wire p50 | reported p50 | Δ p50 | wire p99 | reported p99 | Δ p99 "
          "| wire pairs | reported | dropped by tcpdump |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        if "h3" in protos:
            h3, h3_port = start_h3(tmp, certs)
        for key in keys:
            title, kind, flags = SETUPS[key]
            target, url, proto, snap, tls_flags = {
                "h1": (port, f"http://127.0.0.1:{port}/", "tcp", 96, []),
                "tls": (tls_port, f"https://localhost:{tls_port}/", "tcp", 96, ["--cacert", f"{certs}/ca.pem"]),
                "h2": (h2_port, f"http://127.0.0.1:{h2_port}/", "tcp", 0, []),
                "h3": (h3_port if h3 else 0, f"https://localhost:{h3_port if h3 else 0}/", "udp", 96,
                       ["--cacert", f"{certs}/ca.pem"]),
            }[kind]
            runs = [("throng (kernel)", "kernel", THRONG), ("throng (user)", "user", THRONG)]
            if args.compare:
                runs += [("other (kernel)", "kernel", args.compare), ("other (user)", "user", args.compare)]
            if kind == "h1" and key != "r20000" and shutil.which("wrk"):
                runs.append(("wrk", None, None))
            for name, clock, binary in runs:
                pcap = f"{tmp}/{key}.pcap"
                cap = capture(target, pcap, proto, snap)
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
                    cmd = ["taskset", "-c", CLIENT_CPU, binary, "http", url, "-t", "1", "-q", "-d", f"{dur}s",
                           "--json", json_path] + flags + tls_flags
                    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   timeout=dur + 30)
                    with open(json_path) as f:
                        d = json.load(f)
                    ph = d["measurements"]["phases"]
                    reported = (us(ph["response"], "p50"), us(ph["response"], "p99"))
                    n_reported = ph["response"]["count"]
                    t = d["generator"].get("timestamps") or {}
                    if key == "r20000":
                        extra = f" (latency p50 {us(ph['latency'], 'p50')} µs, p99 {us(ph['latency'], 'p99')} µs)"
                    if t.get("user") and clock == "kernel":
                        extra += f" ({t['user']} user-clock fallbacks)"
                dropped = stop_capture(cap)
                lat = sorted(wire_latencies(pcap, target, kind))
                os.remove(pcap)
                w50, w99 = pct(lat, 50), pct(lat, 99)
                r50, r99 = reported
                print(f"| {title} | {name}{extra} | {w50:.1f} µs | {r50:.1f} µs | {r50 - w50:+.1f} µs "
                      f"| {w99:.1f} µs | {r99:.1f} µs | {(r99 - w99) / w99 * 100:+.1f}% "
                      f"| {len(lat)} | {n_reported} | {dropped} |", flush=True)
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        if h3:
            h3.terminate()
            h3.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


def start_h3(tmp, certs):
    """scripts/h3_server.py (aioquic) pinned to SERVER_CPU; returns (process, UDP port)."""
    script = os.path.join(ROOT, "scripts", "h3_server.py")
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU, sys.executable, script, "--cert", f"{certs}/server.pem",
                          "--key", f"{certs}/server.key", "--stats", f"{tmp}/h3_stats.json", "--max-seconds",
                          "900"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = b""
    deadline = time.time() + 15
    os.set_blocking(p.stdout.fileno(), False)
    while time.time() < deadline and b"\n" not in line:
        line += p.stdout.read() or b""
        if p.poll() is not None:
            sys.exit("bench: scripts/h3_server.py exited (is aioquic installed? python3 -m pip install aioquic)")
        time.sleep(0.05)
    m = re.match(rb"listening on (\d+)", line)
    if not m:
        p.kill()
        sys.exit(f"bench: scripts/h3_server.py said {line!r}")
    return p, int(m.group(1))


if __name__ == "__main__":
    main()
