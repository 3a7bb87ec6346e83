#!/usr/bin/env python3
"""A small HTTP/3 server on aioquic, for throng's tests: a real peer that is not throng.

    python3 scripts/h3_server.py --cert server.pem --key server.key [--port 0] [--delay-ms N] --stats FILE

Answers every request with 200 and the body "aioquic\\n" (or N bytes for /bytes/N; /301?WHERE
answers 301 with Location WHERE, /302loop a 302 to itself), after
--delay-ms when given. Prints "listening on PORT" once bound. On SIGTERM or SIGINT it writes
FILE: {"connections": n, "requests": n, "max_concurrent": n, "traceparents": [...]}, where
max_concurrent is the most requests one connection had open at once (received, not yet
answered) and traceparents every traceparent header received, with its path ("PATH VALUE").
Loopback only.
"""

import argparse
import asyncio
import json
import signal
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated

STATS = {"connections": 0, "requests": 0, "max_concurrent": 0, "traceparents": []}
MAX_BODY = 16 * 1024 * 1024


class H3Protocol(QuicConnectionProtocol):
    delay = 0.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._http = None
        self._open = 0
        self._paths = {}

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated):
            self._http = H3Connection(self._quic)
            STATS["connections"] += 1
        if self._http is None:
            return
        for ev in self._http.handle_event(event):
            if isinstance(ev, HeadersReceived):
                fields = dict(ev.headers)
                path = fields.get(b":path", b"/")
                if b"traceparent" in fields:
                    STATS["traceparents"].append((path + b" " + fields[b"traceparent"]).decode(errors="replace"))
                self._paths[ev.stream_id] = path
                if ev.stream_ended:
                    self._start(ev.stream_id)
            elif isinstance(ev, DataReceived) and ev.stream_ended:
                self._start(ev.stream_id)

    def _start(self, stream_id):
        self._open += 1
        STATS["requests"] += 1
        STATS["max_concurrent"] = max(STATS["max_concurrent"], self._open)
        asyncio.get_running_loop().create_task(self._answer(stream_id))

    async def _answer(self, stream_id):
        if self.delay:
            await asyncio.sleep(self.delay)
        path = self._paths.pop(stream_id, b"/")
        body = b"aioquic\n"
        status = b"200"
        headers = []
        if path.startswith(b"/301?") or path == b"/302loop":
            # A redirect to the query (/301?/bytes/3, /301?https://...), or to itself.
            status, body = (b"301", b"") if path.startswith(b"/301?") else (b"302", b"")
            headers = [(b"location", path[5:] if status == b"301" else path)]
        elif path.startswith(b"/bytes/"):
            try:
                body = b"x" * min(int(path[7:]), MAX_BODY)
            except ValueError:
                pass
        self._open -= 1
        try:
            self._http.send_headers(
                stream_id,
                [(b":status", status), (b"server", b"aioquic"), (b"content-length", str(len(body)).encode())]
                + headers,
            )
            self._http.send_data(stream_id, body, end_stream=True)
            self.transmit()
        except Exception:  # the stream or connection went away meanwhile
            pass


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=int, default=0)
    p.add_argument("--stats", required=True)
    p.add_argument("--max-seconds", type=float, default=600, help="exit after this long, whatever happens")
    a = p.parse_args()
    if not a.host.startswith("127.") and a.host != "::1":
        sys.exit("h3_server.py: loopback only")
    H3Protocol.delay = a.delay_ms / 1000.0
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
    config.load_cert_chain(a.cert, a.key)
    server = await serve(a.host, a.port, configuration=config, create_protocol=H3Protocol)
    port = server._transport.get_extra_info("sockname")[1]
    print(f"listening on {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), a.max_seconds)
    except asyncio.TimeoutError:
        pass
    server.close()
    with open(a.stats, "w") as f:
        json.dump(STATS, f)


if __name__ == "__main__":
    asyncio.run(main())
