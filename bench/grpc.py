#!/usr/bin/env python3
"""gRPC unary calls per generator CPU-second: throng against ghz.

The server is grpc-go's example greeter (google.golang.org/grpc/examples,
helloworld/greeter_server, built with `go build` from the Go module proxy),
pinned to CPU 0 with GOMAXPROCS=1; without Go, the grpcio test server
(crates/cli/tests/cli/grpc/grpc_server.py, 16 threads), which is then the
bottleneck and says so. Each generator runs on CPU 1 with the same
concurrency: CONNS connections carrying CONCURRENCY calls in flight
(throng `-c CONNS --streams CONCURRENCY/CONNS -t 1`; ghz `--connections CONNS
-c CONCURRENCY --cpus 1`). Figures are calls answered OK per CPU-second of the
generator process (user + system, read with wait4).

    bench/grpc.py [--duration 10] [--runs 3] [--skip-build]

ghz is built with `go install github.com/bojand/ghz/cmd/ghz@latest` into
CACHE/bin (CACHE: $THRONG_BENCH_CACHE, else ~/.cache/throng-bench), as is the
greeter; when Go or the module proxy is not there, the peer is skipped and
said so.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib
from benchlib import SERVER_CPU, THRONG, build, run

CACHE = os.environ.get("THRONG_BENCH_CACHE") or os.path.expanduser("~/.cache/throng-bench")
BIN = os.path.join(CACHE, "bin")
# (connections, calls in flight): ghz's default concurrency on its one
# connection, then the same number spread over several.
SHAPES = [(1, 50), (10, 100)]
GREETER_GO_MOD = "module throngbench/greeter\n\ngo 1.22\n"


def go(args, cwd, timeout=900):
    env = dict(os.environ, GOBIN=BIN, GOFLAGS="-mod=mod")
    try:
        p = subprocess.run(["go"] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return p.returncode == 0, (p.stderr or p.stdout).strip()


def ghz():
    """The ghz binary, built once into the cache; (path or None, why not)."""
    path = os.path.join(BIN, "ghz")
    if os.path.exists(path):
        return path, ""
    if not shutil.which("go"):
        return None, "Go is not installed"
    os.makedirs(BIN, exist_ok=True)
    ok, why = go(["install", "github.com/bojand/ghz/cmd/ghz@latest"], CACHE)
    return (path, "") if ok and os.path.exists(path) else (None, f"go install failed: {why[-300:]}")


def greeter():
    """(greeter binary, helloworld.proto) built once into the cache, or (None, why)."""
    path = os.path.join(BIN, "greeter_server")
    mod = os.path.join(CACHE, "greeter")
    if not shutil.which("go"):
        return None, "Go is not installed"
    os.makedirs(mod, exist_ok=True)
    if not os.path.exists(os.path.join(mod, "go.mod")):
        with open(os.path.join(mod, "go.mod"), "w") as f:
            f.write(GREETER_GO_MOD)
    pkg = "google.golang.org/grpc/examples/helloworld/greeter_server"
    if not os.path.exists(path):
        ok, why = go(["get", pkg + "@latest"], mod)
        if ok:
            ok, why = go(["build", "-o", path, pkg], mod)
        if not ok:
            return None, f"go build failed: {why[-300:]}"
    ok, src = go(["list", "-m", "-f", "{{.Dir}}", "google.golang.org/grpc/examples"], mod)
    proto = os.path.join(src, "helloworld", "helloworld", "helloworld.proto") if ok else ""
    if not os.path.exists(proto):
        return None, f"helloworld.proto not found in the module cache ({src[-200:]})"
    return (path, proto), ""


def start_server(tmp):
    """(process, port, proto, call, data, what) of the server the generators share."""
    port = benchlib.free_port()
    built, why = greeter()
    if built:
        path, proto = built
        proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, path, "-port", str(port)],
                                env=dict(os.environ, GOMAXPROCS="1"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        benchlib.wait_port(port, proc)
        return proc, port, proto, "helloworld.Greeter/SayHello", '{"name": "throng"}', \
            "grpc-go example greeter (helloworld/greeter_server), GOMAXPROCS=1"
    print(f"(no Go greeter: {why}; using the grpcio test server, which will be the bottleneck)\n")
    here = os.path.join(benchlib.ROOT, "crates", "cli", "tests", "cli", "grpc")
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, sys.executable, os.path.join(here, "grpc_server.py"),
                             str(port)], env=dict(os.environ, GRPC_VERBOSITY="NONE"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    benchlib.wait_port(port, proc)
    return proc, port, os.path.join(here, "tester.proto"), "throngtest.Tester/Call", '{"name": "throng"}', \
        "grpcio test server (Python, 16 threads)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    if not args.skip_build:
        build()
    if not shutil.which("taskset"):
        sys.exit("bench: taskset is missing (util-linux)")
    tmp = tempfile.mkdtemp(prefix="throng-bench-grpc-")
    ghz_bin, ghz_why = ghz()
    server, port, proto, call, data, what = start_server(tmp)
    addr = f"127.0.0.1:{port}"
    d = args.duration
    js = f"{tmp}/r.json"
    print(f"# throng bench/grpc.py  ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {what} on "
          f"CPU {SERVER_CPU}, generator on CPU 1, {d}s x {args.runs} runs, median)\n")

    def throng_parse(_text):
        try:
            with open(js) as f:
                return json.load(f)["measurements"]["requests"]["ok"]
        except (OSError, ValueError, KeyError):
            return 0

    def ghz_parse(text):
        i, j = text.find("{"), text.rfind("}")
        try:
            doc = json.loads(text[i:j + 1]) if i >= 0 else {}
        except ValueError:
            return 0
        return (doc.get("statusCodeDistribution") or {}).get("OK", 0)

    def tools(conns, inflight):
        t = {"throng": ([THRONG, "grpc", addr, "--plaintext", "--proto", proto, "--call", call, "--data", data,
                         "-c", str(conns), "--streams", str(inflight // conns), "-t", "1", "-d", f"{d}s",
                         "-q", "--json", js], throng_parse)}
        if ghz_bin:
            t["ghz"] = ([ghz_bin, "--insecure", "--proto", proto, "--call", call, "-d", data,
                         "--connections", str(conns), "-c", str(inflight), "--cpus", "1", "-z", f"{d}s",
                         "-O", "json", addr], ghz_parse)
        return t

    try:
        if not ghz_bin:
            print(f"ghz: skipped ({ghz_why})\n")
        for conns, inflight in SHAPES:
            print(f"## unary calls answered OK per generator CPU-second, {conns} connection(s), "
                  f"{inflight} calls in flight\n")
            print("| tool | calls/CPU-s | runs | calls/s |\n|---|---:|---|---:|")
            for name, (cmd, parse) in tools(conns, inflight).items():
                rates, walls = [], []
                for _ in range(args.runs):
                    start = time.time()
                    text, cpu, _ = run(cmd, d + 30)
                    wall = time.time() - start
                    ok = parse(text)
                    if ok <= 0 or cpu <= 0:
                        rates = None
                        break
                    rates.append(ok / cpu)
                    walls.append(ok / wall)
                if not rates:
                    print(f"| {name} | failed: {text.strip().splitlines()[-1:]} | | |")
                    continue
                rates.sort()
                walls.sort()
                runs = ", ".join(f"{r / 1000:.1f}K" for r in rates)
                print(f"| {name} | {rates[len(rates) // 2] / 1000:.1f}K | {runs} | "
                      f"{walls[len(walls) // 2] / 1000:.1f}K |")
            print()
        print(f"commands: throng grpc {addr} --plaintext --proto PROTO --call {call} -c C --streams S -t 1 -d {d}s; "
              f"ghz --insecure --proto PROTO --call {call} --connections C -c C*S --cpus 1 -z {d}s -O json {addr}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
