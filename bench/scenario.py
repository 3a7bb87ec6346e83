#!/usr/bin/env python3
"""Scenario benchmark: what a virtual user costs, in CPU and in memory.

Two questions from issue 5, answered against nginx `return 200` pinned to
CPU 0 with the generator on CPU 1, every tool in the same run:

1. CPU: a scenario whose flow is one GET, run by 50 constant VUs, against
   `throng http -c 50` making the same requests. Figures are successful
   requests per generator CPU-second (user + system of exactly that
   process); the overhead is how much more CPU a scenario request costs.
   A three-step flow with a capture and checks shows what richer flows cost.
   k6 runs the one-GET flow too, if it is installed.
2. Memory: N VUs, each holding its keep-alive connection and thinking 1 s
   between requests, against `throng http -c N` holding N keep-alive
   connections (closed loop). Memory per VU beyond its connection is
   (peak RSS of the scenario - peak RSS of throng http) / N. k6's figure is
   its peak RSS / N for the same script.

    bench/scenario.py                       # everything, 3 runs, median
    bench/scenario.py --only cpu --runs 1 --duration 5
    bench/scenario.py --only memory --vus 10000

k6 is not a Debian package; `go install go.k6.io/k6@latest` builds it from
the Go module proxy (a few minutes). Missing peers are skipped and said so.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from benchlib import CLIENT_CPU, SERVER_CPU, THRONG, build, run, start_nginx

ONE_GET = """target: {url}
scenarios:
  bench:
    executor: constant-vus
    vus: {vus}
    duration: {duration}s
    flow:
{think}      - request: {{ name: get, path: / }}
"""

THREE_STEPS = """target: {url}
scenarios:
  bench:
    executor: constant-vus
    vus: {vus}
    duration: {duration}s
    flow:
      - request:
          name: first
          path: /one?vu={{{{vu}}}}&iter={{{{iter}}}}
          headers: {{ X-Request: "{{{{uuid}}}}" }}
          capture:
            server: {{ header: Server }}
          check:
            ok: {{ status: [200] }}
      - group:
          name: pair
          flow:
            - request: {{ name: second, path: "/two?from={{{{server}}}}" }}
            - request:
                name: third
                method: POST
                path: /three
                json: {{ vu: "{{{{vu}}}}", n: "{{{{random_int 1 100}}}}" }}
                check:
                  fast: {{ duration_under: 1s }}
"""

K6_SCRIPT = """import http from 'k6/http';
{imports}
export const options = {{ vus: {vus}, duration: '{duration}s', summaryTrendStats: ['p(99)'] }};
export default function () {{
  http.get('{url}');
  {think}
}}
"""


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def throng_ok(json_path):
    with open(json_path) as f:
        d = json.load(f)
    return d["measurements"]["requests"]["ok"], d


def k6_ok(summary_path):
    with open(summary_path) as f:
        d = json.load(f)
    metrics = d.get("metrics", {})
    reqs = metrics.get("http_reqs", {}).get("count", 0)
    failed = metrics.get("http_req_failed", {}).get("passes", 0)
    return reqs - failed, d


def measure(cmd, read, path, timeout, runs):
    """Median of `runs`: successful requests per CPU-second, peak RSS, requests."""
    rates, rss, oks = [], [], []
    for _ in range(runs):
        if os.path.exists(path):
            os.unlink(path)
        text, cpu, maxrss = run(cmd, timeout)
        try:
            ok, _ = read(path)
        except (OSError, ValueError, KeyError):
            return None, text
        if ok <= 0 or cpu <= 0:
            return None, text
        rates.append(ok / cpu)
        rss.append(maxrss)
        oks.append(ok)
    return {"per_cpu_s": statistics.median(rates), "rss": statistics.median(rss), "ok": statistics.median(oks),
            "all": rates}, ""


def k6_binary():
    found = shutil.which("k6")
    if found:
        return found
    gopath = os.path.join(os.path.expanduser("~"), "go", "bin", "k6")
    return gopath if os.path.exists(gopath) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="seconds per CPU run (default 10)")
    ap.add_argument("--runs", type=int, default=3, help="runs per CPU figure; the median is reported (default 3)")
    ap.add_argument("--vus", type=int, default=10000, help="VUs for the memory figure (default 10000)")
    ap.add_argument("--k6-vus", type=int, default=0,
                    help="VUs for k6's memory figure (default: the same as --vus)")
    ap.add_argument("--only", choices=["cpu", "memory"], action="append")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ["cpu", "memory"])
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    k6 = k6_binary()

    tmp = tempfile.mkdtemp(prefix="throng-bench-scenario-")
    nginx, port = start_nginx(tmp, "server { listen 127.0.0.1:{port} backlog=16384; location / { return 200; } }")
    url = f"http://127.0.0.1:{port}"
    out = os.path.join(tmp, "out.json")
    dur = args.duration
    print(f"# throng bench/scenario.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"nginx on CPU {SERVER_CPU}, generator on CPU {CLIENT_CPU})\n")
    try:
        if "cpu" in only:
            print(f"## successful requests per generator CPU-second, 50 VUs / connections, {dur}s x {args.runs} "
                  "runs, median\n")
            print("| tool | flow | requests/CPU-s | vs throng http | runs |\n|---|---|---:|---:|---|")
            one = write(tmp, "one.yaml", ONE_GET.format(url=url, vus=50, duration=dur, think=""))
            three = write(tmp, "three.yaml", THREE_STEPS.format(url=url, vus=50, duration=dur))
            rows = [
                ("throng http", "GET /", [THRONG, "http", f"{url}/", "-c", "50", "-d", f"{dur}s", "-t", "1", "-q",
                                          "--json", out], throng_ok, out),
                ("throng run", "one GET", [THRONG, "run", one, "-t", "1", "-q", "--json", out], throng_ok, out),
                ("throng run", "3 steps, capture, checks, group",
                 [THRONG, "run", three, "-t", "1", "-q", "--json", out], throng_ok, out),
            ]
            if k6:
                script = write(tmp, "one.js", K6_SCRIPT.format(imports="", vus=50, duration=dur, url=f"{url}/",
                                                               think=""))
                summary = os.path.join(tmp, "k6.json")
                rows.append(("k6", "one GET", [k6, "run", "-q", "--summary-export", summary, script], k6_ok,
                             summary))
            base = None
            for tool, flow, cmd, read, path in rows:
                res, text = measure(cmd, read, path, dur + 60, args.runs)
                if res is None:
                    print(f"| {tool} | {flow} | failed: {text.strip().splitlines()[-1:]} | | |")
                    continue
                base = base or res["per_cpu_s"]
                extra = base / res["per_cpu_s"] - 1
                runs = ", ".join(f"{r / 1000:.1f}K" for r in res["all"])
                print(f"| {tool} | {flow} | {res['per_cpu_s'] / 1000:.1f}K | {extra * 100:+.0f}% CPU per request "
                      f"| {runs} |")
            if not k6:
                print("| k6 | one GET | skipped: not installed (go install go.k6.io/k6@latest) | | |")
            print()

        if "memory" in only:
            n = args.vus
            mdur = 20
            print(f"## memory: {n} VUs, each with its connection, 1 request per second each, {mdur}s\n")
            print("| tool | what | requests ok | peak RSS | per VU / connection |\n|---|---|---:|---:|---:|")
            vus = write(tmp, "vus.yaml", ONE_GET.format(url=url, vus=n, duration=mdur,
                                                        think="      - think: 1s\n"))
            http, text = measure([THRONG, "http", f"{url}/", "-c", str(n), "-d", f"{mdur}s", "-t", "1",
                                  "-q", "--json", out], throng_ok, out, mdur + 60, 1)
            scen, text2 = measure([THRONG, "run", vus, "-t", "1", "-q", "--json", out], throng_ok, out, mdur + 60, 1)
            if http:
                print(f"| throng http | {n} keep-alive connections | {http['ok']:.0f} | {http['rss'] / 1e6:.1f} MB | "
                      f"{http['rss'] / n / 1024:.2f} KB per connection |")
            else:
                print(f"| throng http | failed: {text.strip().splitlines()[-1:]} | | | |")
            if scen:
                print(f"| throng run | {n} VUs, think 1s | {scen['ok']:.0f} | {scen['rss'] / 1e6:.1f} MB | "
                      f"{scen['rss'] / n / 1024:.2f} KB per VU |")
            else:
                print(f"| throng run | failed: {text2.strip().splitlines()[-1:]} | | | |")
            if http and scen:
                beyond = (scen["rss"] - http["rss"]) / n
                print(f"| throng run | beyond its connection | | | **{beyond / 1024:.2f} KB per VU** |")
            if k6:
                kn = args.k6_vus or n
                script = write(tmp, "vus.js", K6_SCRIPT.format(imports="import { sleep } from 'k6';", vus=kn,
                                                               duration=mdur, url=f"{url}/", think="sleep(1);"))
                summary = os.path.join(tmp, "k6.json")
                res, text = measure([k6, "run", "-q", "--summary-export", summary, script], k6_ok, summary,
                                    mdur + 300, 1)
                if res:
                    print(f"| k6 | {kn} VUs, sleep(1) | {res['ok']:.0f} | {res['rss'] / 1e6:.1f} MB | {res['rss'] / kn / 1024:.1f} KB "
                          "per VU |")
                else:
                    print(f"| k6 | failed: {text.strip().splitlines()[-1:]} | | | |")
            else:
                print("| k6 | skipped: not installed (go install go.k6.io/k6@latest) | | | |")
            print()
    finally:
        nginx.terminate()  # SIGTERM: the master stops its workers too
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
