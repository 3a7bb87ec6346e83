#!/usr/bin/env python3
"""Records a HAR file the way a browser's developer tools do: headless
chromium loads URL, and the Chrome DevTools Protocol's Network events (each
request with its headers and body, each response with its headers and body)
are written as HAR 1.2 once the page sets `window.__done`.

    har_record.py URL OUT.har [--timeout 30]

Used by the tests of `throng import har` (tests/cli/import.rs). Loopback only:
the page and everything it fetches are the test's own servers.
"""

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pairs(headers):
    return [{"name": k, "value": v} for k, v in (headers or {}).items()]


async def record(ws_url, url, timeout):
    async with websockets.connect(ws_url, max_size=64 << 20) as ws:
        next_id = 0
        pending = {}
        events = []

        async def call(method, **params):
            nonlocal next_id
            next_id += 1
            my = next_id
            await ws.send(json.dumps({"id": my, "method": method, "params": params}))
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                if msg.get("id") == my:
                    return msg.get("result", {})
                if "method" in msg:
                    events.append(msg)

        await call("Network.enable")
        await call("Page.enable")
        await call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = await call("Runtime.evaluate", expression="window.__done === true", returnByValue=True)
            if r.get("result", {}).get("value") is True:
                break
            await asyncio.sleep(0.1)
        else:
            raise SystemExit(f"the page did not set window.__done within {timeout} s")

        requests, order = {}, []
        for e in events:
            p = e.get("params", {})
            rid = p.get("requestId")
            if e["method"] == "Network.requestWillBeSent":
                if rid not in requests:
                    order.append(rid)
                requests[rid] = {"request": p["request"], "time": p.get("wallTime", 0)}
            elif e["method"] == "Network.responseReceived" and rid in requests:
                requests[rid]["response"] = p["response"]
            elif e["method"] == "Network.requestWillBeSentExtraInfo" and rid in requests:
                requests[rid]["extra"] = p.get("headers", {})
        entries = []
        for rid in order:
            item = requests[rid]
            req, resp = item["request"], item.get("response")
            if resp is None:
                continue
            body = {"text": ""}
            try:
                b = await call("Network.getResponseBody", requestId=rid)
                body = {"text": b.get("body", "")}
                if b.get("base64Encoded"):
                    body["encoding"] = "base64"
            except asyncio.TimeoutError:
                pass
            headers = dict(req.get("headers", {}))
            headers.update(item.get("extra", {}))
            entry = {
                "startedDateTime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(item["time"])),
                "time": 0,
                "request": {
                    "method": req["method"],
                    "url": req["url"],
                    "httpVersion": "HTTP/1.1",
                    "headers": pairs(headers),
                    "queryString": [],
                    "cookies": [],
                    "headersSize": -1,
                    "bodySize": len(req.get("postData", "")),
                },
                "response": {
                    "status": resp["status"],
                    "statusText": resp.get("statusText", ""),
                    "httpVersion": "HTTP/1.1",
                    "headers": pairs(resp.get("headers")),
                    "cookies": [],
                    "content": dict(body, size=len(body["text"]), mimeType=resp.get("mimeType", "")),
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": -1,
                },
                "cache": {},
                "timings": {"send": 0, "wait": 0, "receive": 0},
            }
            if "postData" in req:
                mime = headers.get("Content-Type") or headers.get("content-type") or ""
                entry["request"]["postData"] = {"mimeType": mime, "text": req["postData"]}
            entries.append(entry)
        return {"log": {"version": "1.2", "creator": {"name": "har_record.py", "version": "1"}, "entries": entries}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("out")
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if not chromium:
        sys.exit("chromium is not installed: apt-get install chromium")
    port = free_port()
    profile = tempfile.mkdtemp(prefix="har-record-")
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
         f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + a.timeout
        page = None
        while time.monotonic() < deadline and page is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                page = pages[0]["webSocketDebuggerUrl"] if pages else None
            except OSError:
                time.sleep(0.2)
        if page is None:
            sys.exit(f"chromium's DevTools did not answer on port {port} within {a.timeout} s")
        har = asyncio.run(record(page, a.url, a.timeout))
        with open(a.out, "w") as f:
            json.dump(har, f, indent=1)
        print(f"recorded {len(har['log']['entries'])} entries into {a.out}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
