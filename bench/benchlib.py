"""Shared helpers for throng's whole-tool benchmarks (not a test suite)."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# THRONG_BIN: another build to measure (e.g. a copy of the previous commit's).
THRONG = os.environ.get("THRONG_BIN") or os.path.join(ROOT, "target", "release", "throng")
SERVER_CPU, CLIENT_CPU = "0", "1"


def build():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "throng"], cwd=ROOT, check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    if proc:
        proc.kill()
    sys.exit(f"bench: nothing listens on {port}")


def start_nginx(tmp, server_block):
    """nginx with one worker pinned to SERVER_CPU; `server_block` gets {port}."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        sys.exit("bench: nginx is not installed (apt-get install nginx-light)")
    port = free_port()
    conf = f"""
worker_processes 1;
worker_rlimit_nofile 20000;
error_log {tmp}/error.log crit;
pid {tmp}/nginx.pid;
daemon off;
events {{ worker_connections 19500; use epoll; multi_accept on; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  client_body_temp_path {tmp}/b; proxy_temp_path {tmp}/p; fastcgi_temp_path {tmp}/f;
  uwsgi_temp_path {tmp}/u; scgi_temp_path {tmp}/s;
  {server_block.replace("{port}", str(port))}
}}
"""
    with open(f"{tmp}/nginx.conf", "w") as f:
        f.write(conf)
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, nginx, "-p", tmp, "-c", f"{tmp}/nginx.conf"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


def run(cmd, timeout, cpu=CLIENT_CPU):
    """Runs cmd (pinned to `cpu` unless None); returns (output, CPU seconds, max RSS bytes)
    of exactly that process and the children it waited for."""
    out, user, system, maxrss = run_split(cmd, timeout, cpu)
    return out, user + system, maxrss


def run_split(cmd, timeout, cpu=CLIENT_CPU):
    """As run, with the CPU split: (output, user seconds, system seconds, max RSS bytes)."""
    full = (["taskset", "-c", cpu] if cpu else []) + cmd
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    out = b""
    # Read while waiting so a chatty tool never blocks on a full pipe.
    os.set_blocking(p.stdout.fileno(), False)
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        out += p.stdout.read() or b""
        if pid:
            break
        if time.time() > deadline:
            p.kill()
        time.sleep(0.05)
    out += p.stdout.read() or b""
    return out.decode(errors="replace"), ru.ru_utime, ru.ru_stime, ru.ru_maxrss * 1024


def oha_json(text):
    """oha's `--output-format json` report in `text`: (successful responses, the document)."""
    i, j = text.find("{"), text.rfind("}")
    try:
        doc = json.loads(text[i:j + 1]) if i >= 0 else {}
    except ValueError:
        doc = {}
    return sum(doc.get("statusCodeDistribution", {}).values()), doc


def count(pattern, text):
    m = re.search(pattern, text)
    return int(m.group(1)) if m else 0


def have(tool):
    return tool.startswith("throng") or shutil.which(tool) is not None


def interleaved(cmds, runs, timeout):
    """Runs each of `cmds` ({name: (command, parse)}, parse(output) -> successful requests) `runs`
    times, interleaved (a, b, c, a, b, c, ...): a machine whose speed drifts during the bench
    shifts every tool alike. Returns ({name: [(ok, user s, system s), ...]}, {name: why it
    failed}); a tool that fails once is not run again."""
    done = {name: [] for name in cmds}
    failed = {}
    for _ in range(runs):
        for name, (cmd, parse) in cmds.items():
            if name in failed:
                continue
            text, user, system, _ = run_split(cmd, timeout)
            ok = parse(text)
            if ok <= 0 or user + system <= 0:
                failed[name] = (text.strip().splitlines()[-1:] or [f"no report; killed after {timeout}s"])[0]
                continue
            done[name].append((ok, user, system))
    return done, failed


def memory_header(conns):
    """The table both memory benchmarks print: peak RSS at one connection and at
    `conns`, the peak divided by the connections, and what each connection
    adds beyond the one-connection run: (peak at N - peak at 1) / (N - 1)."""
    return (f"| tool | ok | peak RSS, 1 connection | peak RSS, {conns:,} | peak RSS / {conns:,} "
            f"| added per connection |\n|---|---:|---:|---:|---:|---:|")


def peak_rss(cmd, timeout, cpu=CLIENT_CPU):
    """Runs cmd (pinned to `cpu`); returns (output, its peak RSS in bytes).

    Not wait4's ru_maxrss of a child of this script: Linux keeps a process's
    high-water mark across exec, so a child forked from Python starts at
    Python's ~15 MB and a small run (one connection) reads as that. GNU time
    forks the tool from its own small process and reports the tool's."""
    timer = shutil.which("time") or "/usr/bin/time"
    if not os.path.exists(timer):
        sys.exit("bench: GNU time is missing (apt-get install time): it measures peak RSS")
    fd, path = tempfile.mkstemp(prefix="throng-bench-rss-")
    os.close(fd)
    try:
        out, _, _ = run([timer, "-q", "-f", "%M", "-o", path] + (["taskset", "-c", cpu] if cpu else []) + cmd,
                        timeout, cpu=None)
        with open(path) as f:
            kb = [line for line in f.read().split() if line.isdigit()]
        return out, int(kb[-1]) * 1024 if kb else 0
    finally:
        os.unlink(path)


def memory_row(name, make, conns, timeout):
    """Runs `make(c)` -> (command, parse(output) -> successful requests) at 1 and at
    `conns` connections, one after the other; returns the table row."""
    cmd, parse = make(1)
    text, one = peak_rss(cmd, timeout)
    if parse(text) <= 0:
        return f"| {name} | failed at 1 connection: {(text.strip().splitlines() or [''])[-1]} | | | | |"
    cmd, parse = make(conns)
    text, peak = peak_rss(cmd, timeout)
    ok = parse(text)
    if ok <= 0:
        return f"| {name} | failed at {conns}: {(text.strip().splitlines() or [''])[-1]} | | | | |"
    return (f"| {name} | {ok} | {one / 1e6:.1f} MB | {peak / 1e6:.1f} MB | {peak / conns / 1000:.2f} KB "
            f"| {(peak - one) / (conns - 1) / 1000:.2f} KB |")


def open_loop_table(url, extra, rate, dur, runs, tmp):
    """The same open-loop schedule on both transports (`throng http URL EXTRA -r RATE`), interleaved
    round by round: at a fixed rate the work is fixed, so the CPU it took is its cost (CPU-seconds per
    100K requests; lower is better). Prints a row per round and the medians."""
    import statistics
    print("| io | round | sent | dropped | schedule_lag p50 | p99 | CPU user + system | CPU-s per 100K requests |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    per = {"epoll": [], "uring": []}
    for i in range(runs):
        for io in per:
            json_path = f"{tmp}/open-{io}.json"
            _, user, system, _ = run_split([THRONG, "http", url, "-t", "1", "-q", "-r", str(rate), "-d", f"{dur}s",
                                            "--io", io, "--json", json_path] + extra, dur + 30)
            try:
                with open(json_path) as f:
                    d = json.load(f)
            except (OSError, ValueError):
                print(f"| {io} | {i + 1} | failed: no result | | | | | |")
                continue
            m = d["measurements"]
            sent = m["requests"]["attempted"]
            lag = m["phases"]["schedule_lag"]
            cost = (user + system) / max(sent, 1) * 100_000
            per[io].append(cost)
            print(f"| {io} | {i + 1} | {sent} | {m['dropped']} | {lag['p50_us']} µs | {lag['p99_us']} µs "
                  f"| {user:.2f} + {system:.2f} s | {cost:.2f} |")
    if per["epoll"] and per["uring"]:
        e, u = statistics.median(per["epoll"]), statistics.median(per["uring"])
        print(f"\nmedian CPU-seconds per 100K requests: epoll {e:.2f}, uring {u:.2f} (uring/epoll {u / e:.2f})\n")
