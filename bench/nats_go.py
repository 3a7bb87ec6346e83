#!/usr/bin/env python3
"""The real nats.go client against `throng storm --client nats.go`, repeated.

The bcrypt experiment (examples/nats-bcrypt): nats-server with a user whose
password is hashed at bcrypt COST, and CLIENTS clients each connecting after
a uniformly random wait under JITTER, held HOLD, with nats.go's handshake
timeout TIMEOUT. Each round runs the real nats.go client
(examples/nats-bcrypt/natsgo, built with `go build` against nats.go from the
Go module proxy) and throng's nats.go profile on the same plan, each
against a freshly started nats-server: interleaved, nats.go first in odd
rounds and throng first in even ones, so that a machine whose load drifts
shifts both alike; round R gives both the seed SEED+R. It prints every run
(connected, the generator's and the server's CPU seconds read with wait4,
the load average when it started, the failures by kind), the medians and
their difference (and the median of each round's own difference, which the
load drifting between rounds does not move), and exits 1 when the medians
differ by more than TOLERANCE connections.

    bench/nats_go.py [--rounds 5] [--cost 11] [--clients 100] [--jitter 2s]
                     [--timeout 30s] [--hold 1s] [--tolerance 15] [--seed 1]
                     [--pin] [--skip-build]

--pin runs nats-server on CPU 0 and the client on CPU 1 (a generator's own
CPU then does not take the server's); without it all share the machine, as in
the experiment. Needs go, nats-server and htpasswd (apt-get install
nats-server apache2-utils). The Go program is built into CACHE/natsgo-VERSION
(CACHE: $THRONG_BENCH_CACHE, else ~/.cache/throng-bench; NATS_GO_VERSION,
default v1.53.1, the version the profile follows).
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import ROOT, SERVER_CPU, CLIENT_CPU, THRONG, build, count, free_port, run_split, wait_port

CACHE = os.environ.get("THRONG_BENCH_CACHE") or os.path.expanduser("~/.cache/throng-bench")
VERSION = os.environ.get("NATS_GO_VERSION", "v1.53.1")
MAIN_GO = os.path.join(ROOT, "examples", "nats-bcrypt", "natsgo", "main.go")


def build_natsgo():
    """The real client, rebuilt when main.go changed; its path."""
    out = os.path.join(CACHE, f"natsgo-{VERSION}")
    src = os.path.join(out, "src")
    binary = os.path.join(out, "natsgo")
    with open(MAIN_GO, "rb") as f:
        main = f.read()
    if os.path.exists(binary) and open(os.path.join(src, "main.go"), "rb").read() == main:
        return binary
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "main.go"), "wb") as f:
        f.write(main)
    if not os.path.exists(os.path.join(src, "go.mod")):
        subprocess.run(["go", "mod", "init", "throng.example/natsgo"], cwd=src, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    step = subprocess.run(["go", "get", f"github.com/nats-io/nats.go@{VERSION}"], cwd=src,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if step.returncode != 0:
        sys.exit(f"bench: cannot fetch nats.go {VERSION} from the Go module proxy: {step.stderr.strip()}")
    subprocess.run(["go", "build", "-o", binary, "."], cwd=src, check=True)
    return binary


def failures(text):
    """The failures a run printed, by kind: nats.go's "  N  message" lines,
    throng's "    class  N  description" lines."""
    kinds = re.findall(r"^ {2,}(\d+)  (\S.*)$", text, re.M)
    kinds = [(int(n), what) for n, what in kinds]
    kinds += [(int(n), what) for what, n in re.findall(r"^ {4}([a-z_.]+) +(\d+)  ", text, re.M)]
    return ", ".join(f"{n} {what[:40]}" for n, what in kinds)


def config(tmp, cost, port):
    """nats-server's config: user 'throng', password 'secret' hashed at `cost`."""
    hashed = subprocess.run(["htpasswd", "-bnBC", str(cost), "", "secret"], check=True,
                            capture_output=True, text=True).stdout.strip().lstrip(":")
    path = os.path.join(tmp, "nats.conf")
    with open(path, "w") as f:
        f.write(f'listen: 127.0.0.1:{port}\nauthorization {{ users = [ {{ user: throng, password: "{hashed}" }} ] }}\n')
    return path


def start_server(conf, port, pin):
    cmd = (["taskset", "-c", SERVER_CPU] if pin else []) + ["nats-server", "-c", conf]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc


def stop_server(proc):
    """Stops nats-server; its CPU seconds (user + system)."""
    proc.send_signal(signal.SIGTERM)
    deadline = time.time() + 20
    while time.time() < deadline:
        pid, _, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return ru.ru_utime + ru.ru_stime
        time.sleep(0.05)
    proc.kill()
    _, _, ru = os.wait4(proc.pid, 0)
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cost", type=int, default=11)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--jitter", default="2s")
    ap.add_argument("--timeout", default="30s")
    ap.add_argument("--hold", default="1s")
    ap.add_argument("--tolerance", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1, help="round R's random waits use seed SEED+R in both clients")
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--skip-build", action="store_true")
    a = ap.parse_args()
    for tool in ("go", "nats-server", "htpasswd"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is not installed (go: https://go.dev/dl/; "
                     "apt-get install nats-server apache2-utils)")
    if not a.skip_build:
        build()
    natsgo = build_natsgo()
    port = free_port()
    url = f"nats://throng:secret@127.0.0.1:{port}"
    # Long enough for every handshake's timeout, the hold and the jitter.
    limit = 120
    cmds = {
        "nats.go": ([natsgo, "-url", url, "-n", str(a.clients), "-jitter", a.jitter, "-hold", a.hold,
                     "-timeout", a.timeout],
                    lambda text: count(r"connected (\d+)", text)),
        "throng": ([THRONG, "storm", url, "--count", str(a.clients), "--jitter", a.jitter,
                    "--hold", a.hold, "--client", "nats.go", "--timeout", a.timeout, "--quiet"],
                   lambda text: count(r"attempted, (\d+) established", text)),
    }
    print(f"bcrypt cost {a.cost}, {a.clients} clients, jitter {a.jitter}, timeout {a.timeout}, "
          f"hold {a.hold}, {a.rounds} rounds{', server on CPU 0 and client on CPU 1' if a.pin else ''}")
    print(f"{'round':>5}  {'client':<8} {'connected':>9} {'client CPU s':>12} {'server CPU s':>12} {'load':>5}  failures")
    got = {name: [] for name in cmds}
    with tempfile.TemporaryDirectory() as tmp:
        conf = config(tmp, a.cost, port)
        for r in range(1, a.rounds + 1):
            # Odd rounds run nats.go first, even rounds throng first: a load
            # that rises (or falls) through the bench favours neither.
            order = list(cmds.items()) if r % 2 else list(cmds.items())[::-1]
            for name, (cmd, parse) in order:
                load = os.getloadavg()[0]
                server = start_server(conf, port, a.pin)
                try:
                    # A new arrival pattern each round (the same seed in both: the same
                    # uniform law, not the same waits), so that no one pattern favours a client.
                    seeded = cmd + ([f"-seed={a.seed + r}"] if name == "nats.go" else ["--seed", str(a.seed + r)])
                    text, user, system, _ = run_split(seeded, limit, CLIENT_CPU if a.pin else None)
                finally:
                    server_cpu = stop_server(server)
                ok = parse(text)
                if "connected" not in text and "established" not in text:
                    sys.exit(f"bench: {name} printed no result:\n{text}")
                got[name].append((ok, user + system, server_cpu, load))
                print(f"{r:>5}  {name:<8} {ok:>9} {user + system:>12.2f} {server_cpu:>12.2f} {load:>5.1f}  "
                      f"{failures(text)}", flush=True)
    med = {name: statistics.median(ok for ok, *_ in runs) for name, runs in got.items()}
    cpu = {name: statistics.median(c for _, c, *_ in runs) for name, runs in got.items()}
    loads = [load for runs in got.values() for *_, load in runs]
    diff = med["throng"] - med["nats.go"]
    # Each round's own difference: the load both runs of a round shared cancels.
    paired = statistics.median(t[0] - g[0] for t, g in zip(got["throng"], got["nats.go"]))
    print(f"median connected: nats.go {med['nats.go']:g}, throng --client nats.go {med['throng']:g} "
          f"(difference {diff:+g}, tolerance {a.tolerance}; median of the rounds' differences {paired:+g}); median client CPU: nats.go {cpu['nats.go']:.2f} s, "
          f"throng {cpu['throng']:.2f} s; load average {min(loads):.1f}-{max(loads):.1f}")
    if abs(diff) > a.tolerance:
        print(f"bench: the medians differ by {abs(diff):g} connections, more than {a.tolerance}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
