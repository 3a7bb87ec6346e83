#!/usr/bin/env python3
"""MQTT sessions held at scale: the generator's memory per held session.

`throng storm mqtt://...` opens SESSIONS MQTT 5 sessions (CONNECT, CONNACK)
at RATE per second against the lab's minimal broker (`throng serve --fault
mqtt-broker --procs K`, K lab processes sharing one port, each under its own
descriptor limit), spread over source addresses 127.0.0.2-127.0.0.60, and
holds each for HOLD with a PINGREQ every KEEPALIVE (answered by the lab:
`pong` samples). The storm splits itself over as many processes as its
descriptor limit needs. Figures:

- per session, peak RSS: the sum of the generator processes' peak RSS (the
  storm's own figure) minus the same processes' base (a one-session run's
  peak RSS, once per process), divided by the sessions held at the peak;
- per session, PSS: the generator's proportional set size summed over its
  processes (which counts the program's shared pages once), sampled every
  second, at its peak, over the sessions held at the peak;
- the PINGRESPs counted (`pong` samples), sessions closed by the lab, and
  the lab's own resident memory at its peak (sum over its processes).

    bench/mqtt_sessions.py [--sessions 100000] [--rate 5000] [--hold 75s] [--keepalive 30s]
    bench/mqtt_sessions.py --mosquitto [--sessions 19900] [--hold 45s]

With --mosquitto the broker is mosquitto (one process: its descriptor
limit, `ulimit -n` 20000, bounds it; `max_connections` is set to the
sessions asked), and the sessions it holds are counted by mosquitto itself:
its `$SYS/broker/clients/connected`, read with mosquitto_sub while every
session is held.

Needs a release build (or THRONG_BIN), taskset is not used: the whole
machine serves both sides, so the load average is given.
"""

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time

import storm as storm_bench
from benchlib import build, free_port, wait_port
from storm import memory, serve, stop, storm, tree


class Peak:
    """Samples (PSS, RSS) sums of a process tree every second; keeps the largest."""

    def __init__(self, pid_of):
        self.pid_of = pid_of
        self.pss = self.rss = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done.wait(1.0):
            pid = self.pid_of()
            if pid:
                pss, rss = memory(pid)
                self.pss, self.rss = max(self.pss, pss), max(self.rss, rss)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.pss, self.rss


def storm_pid():
    """The newest `throng storm` under this process, or None."""
    for pid in tree(os.getpid())[1:]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[0].endswith(b"throng") and argv[1] == b"storm":
            return pid
    return None


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def start_mosquitto(tmp, sessions):
    """mosquitto under `ulimit -n` 20000 (or the hard limit), `max_connections` sessions."""
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.path.exists(exe):
        raise SystemExit("bench: mosquitto is not installed (apt-get install mosquitto)")
    port = free_port()
    with open(f"{tmp}/mosquitto.conf", "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                f"max_connections {sessions}\nsys_interval 5\n")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = min(20000, hard) if hard != resource.RLIM_INFINITY else 20000

    def raise_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    proc = subprocess.Popen([exe, "-c", f"{tmp}/mosquitto.conf"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=raise_limit)
    wait_port(port, proc)
    return proc, port, limit


def connected(port, wait_s):
    """mosquitto's own count of connected clients (its $SYS topic), or None."""
    try:
        out = subprocess.run(["mosquitto_sub", "-p", str(port), "-h", "127.0.0.1", "-C", "1", "-W", str(wait_s),
                              "-t", "$SYS/broker/clients/connected"], capture_output=True, text=True,
                             timeout=wait_s + 5).stdout.strip()
        return int(out)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def against_mosquitto(args):
    n = args.sessions
    tmp = tempfile.mkdtemp(prefix="throng-bench-mqtt-sessions-")
    broker, port, limit = start_mosquitto(tmp, n)
    print(f"# throng bench/mqtt_sessions.py --mosquitto  ({time.strftime('%Y-%m-%d %H:%M')}, "
          f"{os.cpu_count()} cores, load average {load()} at the start; mosquitto "
          f"{mosquitto_version()}, one process, ulimit -n {limit}, max_connections {n}; {n} sessions "
          f"at {args.rate}/s, held {args.hold}, keep-alive {args.keepalive})\n")
    counts = []
    try:
        url = f"mqtt://127.0.0.1:{port}"
        # mosquitto_sub polls while the storm holds: each reading is
        # mosquitto's count at its last $SYS update (every 5 s).
        done = threading.Event()

        def poll():
            while not done.wait(5.0):
                c = connected(port, 8)
                if c is not None:
                    counts.append(c)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        gen = Peak(storm_pid)
        doc, cpu_s, _, _ = storm([url, "-n", str(n), "--rate", str(args.rate), "--hold", args.hold,
                                  "--keepalive", args.keepalive, "--mqtt-version", "5",
                                  "--source", "127.0.0.2-127.0.0.60", "--timeout", "30s"], 1800)
        done.set()
        poller.join()
        gen.stop()
    finally:
        stop(broker)
        shutil.rmtree(tmp, ignore_errors=True)
    m = doc["measurements"]
    pongs = m["phases"].get("pong", {}).get("count", 0)
    errors = {k: v for k, v in m["connections"].get("errors", {}).items() if v}
    print("| sessions asked | ok (throng) | held at the peak (throng) | **connected (mosquitto's $SYS), largest** "
          "| PINGRESPs | closed by mosquitto | generator processes | generator peak RSS (sum) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {n} | {m['connections']['ok']} | {m['peak_concurrent_connections']} "
          f"| **{max(counts) if counts else 'none read'}** | {pongs} | {m.get('closed_by_peer', 0)} "
          f"| {max(len(doc.get('parts') or []), 1)} | {doc['generator']['peak_rss_bytes'] / 1e6:.1f} MB |")
    print(f"\n$SYS readings in order: {counts}")
    if errors:
        print(f"\nerrors: {errors}")
    print(f"\nload average at the end: {load()}")


def mosquitto_version():
    try:
        out = subprocess.run([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-h"], capture_output=True,
                             text=True, timeout=10).stdout
        return out.split("\n")[0].replace("mosquitto version ", "")
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100000)
    ap.add_argument("--rate", type=int, default=5000, help="sessions opened per second")
    ap.add_argument("--hold", default="75s")
    ap.add_argument("--keepalive", default="30s")
    ap.add_argument("--lab-bin", help="the throng that serves the lab (default: the one measured)")
    ap.add_argument("--mosquitto", action="store_true", help="against mosquitto, counted by its $SYS")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    if not args.skip_build:
        build()
    if args.mosquitto:
        return against_mosquitto(args)
    if args.lab_bin:
        storm_bench.THRONG = args.lab_bin
    n = args.sessions
    lab_procs = n // 15000 + 1
    print(f"# throng bench/mqtt_sessions.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"load average {load()} at the start; {n} sessions at {args.rate}/s, held {args.hold}, "
          f"keep-alive {args.keepalive}, lab in {lab_procs} processes)\n")
    measured = storm_bench.THRONG
    lab, port = serve(["--fault", "mqtt-broker", "--threads", "1", "--procs", str(lab_procs)])
    storm_bench.THRONG = measured
    try:
        url = f"mqtt://127.0.0.1:{port}"
        common = ["--mqtt-version", "5", "--source", "127.0.0.2-127.0.0.60", "--timeout", "30s"]
        one, _, _, _ = storm([url, "-n", "1", "--hold", "2s", "--keepalive", "1s"] + common, 120)
        base = one["generator"]["peak_rss_bytes"]
        gen = Peak(storm_pid)
        labmem = Peak(lambda: lab.pid)
        doc, cpu_s, _, _ = storm([url, "-n", str(n), "--rate", str(args.rate), "--hold", args.hold,
                                  "--keepalive", args.keepalive] + common, 1800)
        pss, _ = gen.stop()
        _, lab_rss = labmem.stop()
        end_load = load()
    finally:
        stop(lab)
    m = doc["measurements"]
    peak = max(m["peak_concurrent_connections"], 1)
    procs = max(len(doc.get("parts") or []), 1)
    rss = doc["generator"]["peak_rss_bytes"]
    pongs = m["phases"].get("pong", {}).get("count", 0)
    errors = {k: v for k, v in m["connections"].get("errors", {}).items() if v}
    print("| sessions | ok | held at the peak | generator processes | PINGRESPs | closed by the lab "
          "| peak RSS (sum) | base (one session, x processes) | **per session (RSS)** | per session (PSS) "
          "| lab RSS at its peak | generator CPU |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {n} | {m['connections']['ok']} | {peak} | {procs} | {pongs} | {m.get('closed_by_peer', 0)} "
          f"| {rss / 1e6:.1f} MB | {base / 1e6:.1f} MB x {procs} "
          f"| **{(rss - base * procs) / peak:.0f} B** | {pss / peak:.0f} B "
          f"| {lab_rss / 1e6:.1f} MB | {cpu_s:.1f} s |")
    if errors:
        print(f"\nerrors: {errors}")
    print(f"\nload average at the end: {end_load}")


if __name__ == "__main__":
    main()
