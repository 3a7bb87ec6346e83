#!/usr/bin/env python3
"""k6 scripts on throng: what a script VU costs against the same flow as a
scenario file, in CPU and in memory.

Against nginx `return 200` pinned to CPU 0, the generator on CPU 1, both
in the same run:

1. CPU: 50 constant VUs, each iteration one GET and one check, as a k6
   script (`throng run flow.js`) and as a scenario file (`throng run
   flow.yaml`). Figures are successful requests per generator CPU-second
   (user + system of exactly that process); the ratio is how much more CPU
   a script request costs (target: within 3x).
2. Memory: N VUs, each sleeping 1 s between requests, as a script and as a
   scenario file; peak RSS of each, and the script's per VU beyond the
   scenario's (target: at most 100 KB per VU), then its whole RSS per VU.
3. Data: N VUs reading users from one JSON file (5,000 users, 463 KB)
   through a k6/data SharedArray, and each parsing its own copy; peak RSS
   of each.

k6 itself is not run here (its module is marked not to use in this
environment): compare with k6's published figures, docs/PERFORMANCE.md.

    bench/k6.py                          # everything, 3 CPU runs, 10,000 VUs
    bench/k6.py --only cpu --runs 1 --duration 5
    bench/k6.py --only memory --vus 1000
    bench/k6.py --only data --vus 1000
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

SCRIPT = """import http from 'k6/http';
import {{ check, sleep }} from 'k6';
export const options = {{ vus: {vus}, duration: '{duration}s' }};
export default function () {{
  const res = http.get('{url}/');
  check(res, {{ 'status is 200': (r) => r.status === 200 }});
  {think}
}}
"""

DATA = """import http from 'k6/http';
import {{ sleep }} from 'k6';
import {{ SharedArray }} from 'k6/data';
{init}
export const options = {{ vus: {vus}, duration: '{duration}s' }};
export default function () {{
  const u = users[(__VU * 7 + __ITER) % users.length];
  http.get('{url}/?u=' + u.name);
  sleep(1);
}}
"""

YAML = """target: {url}
scenarios:
  bench:
    executor: constant-vus
    vus: {vus}
    duration: {duration}s
    flow:
      - request:
          name: get
          path: /
          check:
            status is 200: {{ status: [200] }}
{think}"""


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def ok_of(path):
    with open(path) as f:
        return json.load(f)["measurements"]["requests"]["ok"]


def measure(cmd, out, timeout, runs):
    """Median of `runs`: successful requests per CPU-second, peak RSS, requests."""
    rates, rss, oks = [], [], []
    for _ in range(runs):
        if os.path.exists(out):
            os.unlink(out)
        text, cpu, maxrss = run(cmd, timeout)
        try:
            ok = ok_of(out)
        except (OSError, ValueError, KeyError):
            return None, text
        if ok <= 0 or cpu <= 0:
            return None, text
        rates.append(ok / cpu)
        rss.append(maxrss)
        oks.append(ok)
    return {"per_cpu_s": statistics.median(rates), "rss": statistics.median(rss), "ok": statistics.median(oks),
            "all": rates}, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="seconds per CPU run (default 10)")
    ap.add_argument("--runs", type=int, default=3, help="runs per CPU figure; the median is reported (default 3)")
    ap.add_argument("--vus", type=int, default=10000, help="VUs for the memory figure (default 10000)")
    ap.add_argument("--only", choices=["cpu", "memory", "data"], action="append")
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ["cpu", "memory", "data"])
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    tmp = tempfile.mkdtemp(prefix="throng-bench-k6-")
    nginx, port = start_nginx(tmp, "server { listen 127.0.0.1:{port} backlog=16384; location / { return 200; } }")
    url = f"http://127.0.0.1:{port}"
    out = os.path.join(tmp, "out.json")
    dur = args.duration
    print(f"# throng bench/k6.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"nginx on CPU {SERVER_CPU}, generator on CPU {CLIENT_CPU})\n")
    try:
        if "cpu" in only:
            print(f"## successful requests per generator CPU-second, 50 VUs, one GET and a check per iteration, "
                  f"{dur}s x {args.runs} runs, median\n")
            print("| flow as | requests/CPU-s | CPU per request vs the scenario file | runs |\n|---|---:|---:|---|")
            yaml = write(tmp, "flow.yaml", YAML.format(url=url, vus=50, duration=dur, think=""))
            js = write(tmp, "flow.js", SCRIPT.format(url=url, vus=50, duration=dur, think=""))
            base = None
            for what, path in [("scenario file", yaml), ("k6 script", js)]:
                res, text = measure([THRONG, "run", path, "-t", "1", "-q", "--json", out], out, dur + 60, args.runs)
                if res is None:
                    print(f"| {what} | failed: {text.strip().splitlines()[-1:]} | | |")
                    continue
                base = base or res["per_cpu_s"]
                runs = ", ".join(f"{r / 1000:.1f}K" for r in res["all"])
                print(f"| {what} | {res['per_cpu_s'] / 1000:.1f}K | {base / res['per_cpu_s']:.2f}x | {runs} |")
            print()
        if "memory" in only:
            n = args.vus
            mdur = 20
            print(f"## memory: {n} VUs, each with its connection, one request per second each, {mdur}s\n")
            print("| flow as | requests ok | peak RSS | per VU |\n|---|---:|---:|---:|")
            yaml = write(tmp, "vus.yaml", YAML.format(url=url, vus=n, duration=mdur, think="      - think: 1s\n"))
            js = write(tmp, "vus.js", SCRIPT.format(url=url, vus=n, duration=mdur, think="sleep(1);"))
            got = {}
            for what, path in [("scenario file", yaml), ("k6 script", js)]:
                res, text = measure([THRONG, "run", path, "-t", "1", "-q", "--json", out], out, mdur + 120, 1)
                if res is None:
                    print(f"| {what} | failed: {text.strip().splitlines()[-1:]} | | |")
                    continue
                got[what] = res
                print(f"| {what} | {res['ok']:.0f} | {res['rss'] / 1e6:.1f} MB | {res['rss'] / n / 1024:.1f} KB |")
            if len(got) == 2:
                beyond = (got["k6 script"]["rss"] - got["scenario file"]["rss"]) / n
                print(f"| k6 script | | beyond the scenario file's | **{beyond / 1024:.1f} KB per VU** |")
            print()
        if "data" in only:
            n = min(args.vus, 1000) if args.only is None else args.vus
            ddur = 4
            users = [{"id": i, "name": f"user{i:05d}", "email": f"user{i:05d}@example.test", "password": f"pw-{i}"}
                     for i in range(5000)]
            write(tmp, "users.json", json.dumps(users))
            size = os.path.getsize(os.path.join(tmp, "users.json"))
            print(f"## a data file: {n} VUs reading users from one {size / 1000:.0f} KB JSON file, {ddur}s\n")
            print("| the file held as | requests ok | peak RSS | per VU |\n|---|---:|---:|---:|")
            for what, init in [
                ("a SharedArray", "const users = new SharedArray('u', () => JSON.parse(open('./users.json')));"),
                ("a copy per VU", "const users = JSON.parse(open('./users.json'));"),
            ]:
                js = write(tmp, "data.js", DATA.format(url=url, vus=n, duration=ddur, init=init))
                res, text = measure([THRONG, "run", js, "-t", "1", "-q", "--json", out], out, ddur + 300, 1)
                if res is None:
                    print(f"| {what} | failed: {text.strip().splitlines()[-1:]} | | |")
                    continue
                print(f"| {what} | {res['ok']:.0f} | {res['rss'] / 1e6:.1f} MB | {res['rss'] / n / 1024:.0f} KB |")
            print()
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
