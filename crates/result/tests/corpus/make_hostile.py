#!/usr/bin/env python3
"""Writes the hostile result files of this corpus from the valid ones.

Each file changes a real result in one place, the way a damaged or
hand-edited file would; tests/corpus.rs reads them all. Run from this
directory: python3 make_hostile.py
"""
import base64
import copy
import json
import struct
import zlib


def load(name):
    with open(f"valid-{name}.json") as f:
        return json.load(f)


def save(name, doc):
    with open(f"hostile-{name}.json", "w") as f:
        json.dump(doc, f, indent=1)


def hdr(sigfig, low, high, counts=b"\x02", compressed=True, payload_len=None):
    """A V2 (deflate) histogram encoding, base64."""
    n = len(counts) if payload_len is None else payload_len
    raw = struct.pack(">IIIIQQd", 0x1C849313, n, 0, sigfig, low, high, 1.0) + counts
    if not compressed:
        return base64.b64encode(raw).decode()
    z = zlib.compress(raw, 9)
    return base64.b64encode(struct.pack(">II", 0x1C849314, len(z)) + z).decode()


http = load("http-closed")
scenario = load("scenario")
storm = load("storm")


def variant(name, base, change):
    doc = copy.deepcopy(base)
    change(doc)
    save(name, doc)


def setp(path, value):
    def change(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


variant("duration-1e308", http, setp(["duration_s"], 1e308))
variant("duration-1e12", http, setp(["duration_s"], 1e12))
variant("duration-negative", http, setp(["duration_s"], -1))
variant("duration-nan-string", http, setp(["duration_s"], "NaN"))
variant("start-far", http, setp(["started_at_unix_ms"], 10**17))
variant("part-duration", http, setp(["parts", 0, "duration_s"], 1e15))
variant("series-second", http, setp(["measurements", "series", 0, "second"], 2**62))
variant("count-negative", http, setp(["measurements", "dropped"], -1))
variant("count-overflow", http, setp(["measurements", "requests", "errors"], {"reset": 2**64 - 1, "eof": 9}))
variant("status-overflow", http, setp(["measurements", "status"], {"200": 2**64 - 1, "500": 2}))
variant("out-of-turn-overflow", storm, setp(["measurements", "handshake_out_of_turn"],
                                            {"ping_before_pong": 2**64 - 1, "info_before_pong": 2}))
variant("hdr-sigfig-5", http, setp(["measurements", "phases", "latency", "hdr"], hdr(5, 1, 2**62)))
variant("hdr-high-2-62", http, setp(["measurements", "phases", "latency", "hdr"], hdr(3, 1, 2**62)))
variant("hdr-raw-high", http, setp(["measurements", "phases", "wait", "hdr"], hdr(3, 1, 2**63, compressed=False)))
variant("hdr-random", http, setp(["measurements", "phases", "latency", "hdr"],
                                  base64.b64encode(bytes(range(7, 250, 3))).decode()))
variant("hdr-not-base64", http, setp(["measurements", "phases", "latency", "hdr"], "!!not base64!!"))
variant("hdr-payload-len-lies", http, setp(["measurements", "phases", "latency", "hdr"],
                                           hdr(3, 1, 2048, payload_len=2**31)))
variant("hdr-zlib-bomb", http, setp(["measurements", "phases", "latency", "hdr"],
                                    hdr(3, 1, 2048, counts=bytes(16 << 20), payload_len=16 << 20)))
variant("series-hdr-sigfig-5", http, setp(["measurements", "series", 0, "phases", "latency"], hdr(5, 1, 2**62)))
variant("series-unsorted", load("http-open"), lambda d: d["measurements"]["series"].reverse())
variant("series-duplicates", http,
        lambda d: d["measurements"]["series"].extend([d["measurements"]["series"][0]] * 3))
variant("scenario-tag-hdr", scenario,
        lambda d: d["measurements"]["scenario"]["tags"][""]["response"].update(hdr=hdr(5, 1, 2**62)))
variant("scenario-check-overflow", scenario,
        lambda d: d["measurements"]["scenario"]["checks"].update(big={"passes": 2**64 - 1, "fails": 1}))
variant("no-schema", http, lambda d: d.pop("schema"))
variant("set-empty", {"schema": "throng.result-set/v1", "runs": []}, lambda d: None)
variant("set-bad-run", {"schema": "throng.result-set/v1", "runs": [http]},
        setp(["runs", 0, "duration_s"], 1e300))


def long_names(d):
    """Names of 70,000 characters: valid, and reported clipped."""
    s = d["measurements"]["scenario"]
    long = "x" * 70_000
    s["tags"] = {(k.split(":")[0] + ":" + long if ":" in k else k): v for k, v in s["tags"].items()}
    s["checks"] = {long: c for c in s["checks"].values()}


doc = copy.deepcopy(scenario)
long_names(doc)
with open("odd-long-names.json", "w") as f:
    json.dump(doc, f, indent=1)
with open("hostile-truncated.json", "w") as f:
    f.write(json.dumps(http)[:1500])
