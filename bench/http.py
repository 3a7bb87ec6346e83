#!/usr/bin/env python3
"""Whole-tool HTTP/1.1 benchmark: throng (epoll and --io uring) against wrk, ab, h2load and oha.

Every tool hits the same nginx `return 200`, pinned to CPU 0, from CPU 1, in
the same run. Figures are work per generator CPU-second (user + system, read
with wait4 for exactly that process) and resident memory per open
connection, not wall-clock speed: the machine is shared and noisy, and the
generator's own cost is what decides how much load one machine can make.

    bench/http.py                 # all scenarios, 3 runs each, median
    bench/http.py --runs 1 --duration 5 --only keepalive
    bench/http.py --runs 5 --only keepalive --only close --tools throng,throng-uring,wrk

The request-rate scenarios run interleaved (round 1 of every tool, then round
2, ...), so a noisy minute on the shared machine hits every tool alike; each
figure is the median of its rounds, with the share of its CPU spent in the
kernel (system time), the part no user-space change removes.

The keep-alive table has a floor: bench/floor.c, a C loop that makes only the
system calls (a send and a recv per request, an epoll_wait per batch), built
with `cc`; no generator that reads each response through the socket API can
cost less per request.

Missing peers are skipped and said so. Needs: nginx, taskset; peers from
`apt-get install wrk apache2-utils nghttp2-client` and `cargo install oha`.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import (CLIENT_CPU, SERVER_CPU, THRONG, build, count, memory_header, memory_row, oha_json, open_loop_table, run,
                      run_split)


def start_nginx(tmp):
    from benchlib import start_nginx as start
    return start(tmp, "server { listen 127.0.0.1:{port} backlog=16384; location / { return 200; } }")


# Each tool: how to run a scenario, and how to read how many requests succeeded.
def tools(url, dur, tmp):
    json_path = f"{tmp}/throng.json"

    def throng(args):
        def parse(text):
            with open(json_path) as f:
                d = json.load(f)
            return d["measurements"]["requests"]["ok"], d
        return [THRONG, "http", url, "-t", "1", "-q", "--json", json_path] + args, parse

    oha_parse = oha_json

    # The floor: a C loop that does nothing but a keep-alive generator's
    # system calls (bench/floor.c), built here when a C compiler is.
    floor = f"{tmp}/floor"
    if shutil.which("cc"):
        subprocess.run(["cc", "-O2", "-o", floor, os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor.c")],
                       check=True)
    port = url.rsplit(":", 1)[1].split("/")[0]

    return {
        "floor": {
            "keepalive": lambda c: ([floor, port, str(c), str(dur)], lambda t: (count(r"(\d+) responses", t), None)),
        },
        "throng": {
            "keepalive": lambda c: throng(["-c", str(c), "-d", f"{dur}s"]),
            "close": lambda c: throng(["-c", str(c), "-d", f"{dur}s", "--no-keepalive"]),
        },
        "throng-epoll": {
            "keepalive": lambda c: throng(["-c", str(c), "-d", f"{dur}s", "--io", "epoll"]),
            "close": lambda c: throng(["-c", str(c), "-d", f"{dur}s", "--no-keepalive", "--io", "epoll"]),
        },
        "throng-uring": {
            "keepalive": lambda c: throng(["-c", str(c), "-d", f"{dur}s", "--io", "uring"]),
            "close": lambda c: throng(["-c", str(c), "-d", f"{dur}s", "--no-keepalive", "--io", "uring"]),
        },
        "wrk": {
            "keepalive": lambda c: (["wrk", "-t1", f"-c{c}", f"-d{dur}s", url],
                                    lambda t: (count(r"(\d+) requests in", t) - count(r"Non-2xx or 3xx responses: (\d+)", t), None)),
            "close": lambda c: (["wrk", "-t1", f"-c{c}", f"-d{dur}s", "-H", "Connection: close", url],
                                lambda t: (count(r"(\d+) requests in", t), None)),
        },
        "ab": {
            "keepalive": lambda c: (["ab", "-q", "-k", "-c", str(c), "-t", str(dur), "-n", "100000000", url],
                                    lambda t: (count(r"Complete requests:\s+(\d+)", t) - count(r"Failed requests:\s+(\d+)", t), None)),
            "close": lambda c: (["ab", "-q", "-c", str(c), "-t", str(dur), "-n", "100000000", url],
                                lambda t: (count(r"Complete requests:\s+(\d+)", t) - count(r"Failed requests:\s+(\d+)", t), None)),
        },
        "h2load": {
            "keepalive": lambda c: (["h2load", "--h1", "-c", str(c), "-D", str(dur), url],
                                    lambda t: (count(r"(\d+) succeeded", t), None)),
        },
        "oha": {
            "keepalive": lambda c: (["oha", "-c", str(c), "-z", f"{dur}s", "--no-tui", "--output-format", "json", url], oha_parse),
            "close": lambda c: (["oha", "-c", str(c), "-z", f"{dur}s", "--no-tui", "--disable-keepalive",
                                 "--output-format", "json", url], oha_parse),
        },
    }


def median_run(make, runs, timeout):
    rates, rss, reqs = [], [], []
    for _ in range(runs):
        cmd, parse = make()
        text, cpu, maxrss = run(cmd, timeout)
        ok, _ = parse(text)
        if ok <= 0 or cpu <= 0:
            return None, text
        rates.append(ok / cpu)
        rss.append(maxrss)
        reqs.append(ok)
    return {"per_cpu_s": statistics.median(rates), "rss": statistics.median(rss), "ok": statistics.median(reqs),
            "all": rates}, ""


def interleaved(makers, runs, timeout):
    """Runs each of makers ({name: make}) once per round, `runs` rounds; per name the median
    requests per CPU-second, the median system share of CPU, and every round's rate (or None
    and the output when a run failed)."""
    rates = {name: [] for name in makers}
    shares = {name: [] for name in makers}
    failed = {}
    for _ in range(runs):
        for name, make in makers.items():
            if name in failed:
                continue
            cmd, parse = make()
            text, user, system, _ = run_split(cmd, timeout)
            ok, _ = parse(text)
            if ok <= 0 or user + system <= 0:
                failed[name] = text
                continue
            rates[name].append(ok / (user + system))
            shares[name].append(system / (user + system))
    out = {}
    for name in makers:
        if name in failed:
            out[name] = (None, failed[name])
        else:
            out[name] = ({"per_cpu_s": statistics.median(rates[name]), "system": statistics.median(shares[name]),
                          "all": rates[name]}, "")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported (default 3)")
    ap.add_argument("--only", choices=["keepalive", "close", "memory", "open", "rows"], action="append")
    ap.add_argument("--rate", type=int, default=50000, help="the open loop's rate (default 50000 req/s)")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--tools", help="comma-separated tools for the request-rate scenarios (default: all)")
    args = ap.parse_args()
    only = set(args.only or ["keepalive", "close", "memory", "open", "rows"])

    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")

    tmp = tempfile.mkdtemp(prefix="throng-bench-")
    nginx, port = start_nginx(tmp)
    url = f"http://127.0.0.1:{port}/"
    dur = args.duration
    table = tools(url, dur, tmp)
    print(f"# throng bench/http.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"nginx on CPU {SERVER_CPU}, generator on CPU {CLIENT_CPU}, {dur}s x {args.runs} runs, median)\n")
    try:
        for scenario, title in [("keepalive", "keep-alive requests per generator CPU-second, -c 50"),
                                ("close", "new connection per request: requests per generator CPU-second, -c 50")]:
            if scenario not in only:
                continue
            print(f"## {title}\n\n| tool | requests/CPU-s | system share of CPU | runs |\n|---|---:|---:|---|")
            makers = {}
            for name, scen in table.items():
                if args.tools and name not in args.tools.split(","):
                    continue
                if not name.startswith("throng") and not shutil.which("cc" if name == "floor" else name):
                    print(f"| {name} | skipped: not installed | | |")
                    continue
                if scenario not in scen:
                    continue
                makers[name] = (lambda s: lambda: s[scenario](50))(scen)
            for name, (res, text) in interleaved(makers, args.runs, dur + 30).items():
                if res is None:
                    print(f"| {name} | failed: {text.strip().splitlines()[-1:] } | | |")
                    continue
                runs = ", ".join(f"{r / 1000:.1f}K" for r in res["all"])
                print(f"| {name} | {res['per_cpu_s'] / 1000:.1f}K | {res['system'] * 100:.0f} % | {runs} |")
            print()

        if "rows" in only:
            print("## --csv-requests: keep-alive requests per generator CPU-second, -c 50, rows off and on\n")
            print("| rows | requests/CPU-s | runs |\n|---|---:|---|")
            rows_path = f"{tmp}/rows.csv"
            for label, extra in [("off", []), ("on (--csv-requests)", ["--csv-requests", rows_path])]:
                res, text = median_run(lambda: (table["throng"]["keepalive"](50)[0] + extra,
                                                table["throng"]["keepalive"](50)[1]), args.runs, dur + 30)
                if res is None:
                    print(f"| {label} | failed: {text.strip().splitlines()[-1:]} | |")
                    continue
                runs = ", ".join(f"{r / 1000:.1f}K" for r in res["all"])
                print(f"| {label} | {res['per_cpu_s'] / 1000:.1f}K | {runs} |")
            print()

        if "memory" in only:
            conns = 15000
            print(f"## resident memory per open keep-alive connection at {conns:,} connections\n")
            print("Peak RSS of the generator alone (GNU time), at one connection and at "
                  f"{conns:,}; what each connection adds is (peak at {conns:,} - peak at 1) / {conns - 1:,}.\n")
            print(memory_header(conns))
            for name, scen in table.items():
                if name in ("ab", "floor"):
                    continue  # ab cannot hold 15,000 keep-alive connections usefully; floor is no generator
                if args.tools and name not in args.tools.split(","):
                    continue
                if not name.startswith("throng") and not shutil.which("cc" if name == "floor" else name):
                    print(f"| {name} | skipped: not installed | | | | |")
                    continue

                def make(c, scen=scen):
                    cmd, parse = scen["keepalive"](c)
                    return cmd, lambda t: parse(t)[0]
                print(memory_row(name, make, conns, 60))
            print()

        if "open" in only:
            # The same schedule on both transports, interleaved round by round:
            # at a fixed rate the work is fixed, so the CPU it took is the cost
            # (CPU-seconds per 100K requests; lower is better).
            print(f"## open loop at {args.rate} req/s, epoll vs --io uring (-r {args.rate} -d {dur}s -t 1 -c 1000)\n")
            open_loop_table(url, ["-c", "1000"], args.rate, dur, args.runs, tmp)
    finally:
        nginx.terminate()  # SIGTERM: the master stops its workers too
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
