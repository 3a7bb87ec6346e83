#!/usr/bin/env python3
"""MQTT messages published per generator CPU-second: throng mqtt against mqtt-benchmark.

mosquitto (CPU 0, anonymous, no persistence) takes the messages; each generator
runs on CPU 1 with PUBLISHERS publishing clients, no subscribers (mqtt-benchmark
has none), PAYLOAD-byte payloads, MESSAGES messages per publisher, at QoS 0 and
QoS 1 (closed loop: throng keeps WINDOW messages unacknowledged per
publisher, 100 unless --window says, the in-flight limit of mqtt-benchmark's
rumqttc, so that both keep as many unacknowledged; throng's own default is
16). Runs are
interleaved (throng, mqtt-benchmark, throng, ...); the table gives the median
and every run in the order they ran. Figures are messages the tool counted
as published (QoS 0: written; QoS 1: acknowledged by PUBACK) per CPU-second of
the generator process (user + system, read with wait4).

    bench/mqtt.py [--messages 100000] [--runs 3] [--publishers 4] [--window 100] [--only qos0|qos1]

Missing peers are skipped and said so. Needs mosquitto (apt-get install
mosquitto) and taskset; the peer from `cargo install mqtt-benchmark` (the Rust
crate, 0.2: `-C` clients, `-s` messages each, `-P` payload, `-q` QoS).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import SERVER_CPU, THRONG, build, count, free_port, have, interleaved, wait_port

PAYLOAD = 64


def start_mosquitto(tmp):
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.path.exists(exe):
        sys.exit("bench: mosquitto is not installed (apt-get install mosquitto)")
    port = free_port()
    with open(f"{tmp}/mosquitto.conf", "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                "max_inflight_messages 0\nmax_queued_messages 0\n")
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, exe, "-c", f"{tmp}/mosquitto.conf"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100000, help="messages per publisher")
    ap.add_argument("--publishers", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=int, default=100,
                    help="throng's --window: 100, as many in flight as rumqttc keeps (throng's own default is 16)")
    ap.add_argument("--only", choices=["qos0", "qos1"], action="append")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    only = args.only or ["qos0", "qos1"]
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    tmp = tempfile.mkdtemp(prefix="throng-bench-mqtt-")
    broker, port = start_mosquitto(tmp)
    js = f"{tmp}/r.json"
    pubs, n = args.publishers, args.messages
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"# throng bench/mqtt.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"load average {load}, mosquitto on CPU 0, generator on CPU 1, {pubs} publishers x {n} "
          f"messages of {PAYLOAD} bytes, throng --window {args.window}, {args.runs} runs, median)\n")

    def throng(qos):
        key = "published" if qos == 0 else "acknowledged"

        def parse(_text):
            try:
                with open(js) as f:
                    return json.load(f)["measurements"]["pubsub"][key]
            except (OSError, ValueError, KeyError, TypeError):
                return 0
        return [THRONG, "mqtt", f"mqtt://127.0.0.1:{port}", "--publishers", str(pubs), "--subscribers", "0",
                "--topic", "bench/{{n}}", "--qos", str(qos), "--payload", str(PAYLOAD), "-n", str(pubs * n),
                "--window", str(args.window), "-q", "--json", js], parse

    def peer(qos):
        def parse(text):
            # Its last line: "P client, total: N, duration: ..." (messages its clients published).
            return count(r"total: (\d+)", text)
        return ["mqtt-benchmark", "-b", f"127.0.0.1:{port}", "-C", str(pubs), "-s", str(n),
                "-q", str(qos), "-P", "x" * PAYLOAD, "-t", "bench"], parse

    try:
        for scen in only:
            qos = int(scen[-1])
            print(f"## QoS {qos}: messages per generator CPU-second\n")
            print("| tool | messages/CPU-s | user µs/msg | system µs/msg | runs |\n|---|---:|---:|---:|---|")
            tools = {"throng": throng(qos), "mqtt-benchmark": peer(qos)}
            cmds = {name: tc for name, tc in tools.items() if have(name)}
            done, failed = interleaved(cmds, args.runs, 300)
            rates = {name: [ok / (u + k) for ok, u, k in runs] for name, runs in done.items()}
            for name in tools:
                if name not in cmds:
                    print(f"| {name} | skipped: not installed (cargo install {name}) | | | |")
                elif name in failed:
                    print(f"| {name} | failed: {failed[name]} | | | |")
                else:
                    r = sorted(rates[name])
                    mid = len(r) // 2
                    us = sorted(u / ok * 1e6 for ok, u, _ in done[name])[mid]
                    ks = sorted(k / ok * 1e6 for ok, _, k in done[name])[mid]
                    runs = ", ".join(f"{x / 1000:.1f}K" for x in rates[name])
                    print(f"| {name} | {r[mid] / 1000:.1f}K | {us:.2f} | {ks:.2f} | {runs} |")
            pairs = list(zip(rates.get("throng", []), rates.get("mqtt-benchmark", [])))
            if pairs:
                ratios = sorted(t / p for t, p in pairs)
                each = ", ".join(f"{t / p:.2f}" for t, p in pairs)
                print(f"\nthrong / mqtt-benchmark, round by round: {each}; median {ratios[len(ratios) // 2]:.2f}x")
            print()
    finally:
        broker.terminate()
        broker.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
