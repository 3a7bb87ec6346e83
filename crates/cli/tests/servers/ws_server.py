#!/usr/bin/env python3
"""WebSocket servers for throng's tests (PyPI `websockets`), on loopback.

    ws_server.py PORT_FILE MODE [AUTHORIZATION]

MODE: echo (every message back), push (a message "push N" every second),
pushping (push, and a ping every 0.1 s: a socket that leaves one unanswered
for 0.5 s is closed with 1011), refuse (403 to every upgrade), close (closes
each socket at once with code 1008), flood (never reads the socket again
and writes pings, 125 bytes each, as fast as the client takes them, so
its pongs fill the buffers both ways), deaf
(never reads the socket again, sends nothing). In every mode SIGUSR1 closes every open socket with 1001 (going
away) while the server keeps listening, and each socket's close code (the
client's, when it closed first) is appended to PORT_FILE.closes. With
AUTHORIZATION, an upgrade whose Authorization header is not exactly that
value is refused with 401. Writes the port it listens on to PORT_FILE, then
serves until killed.
"""
import asyncio
import http
import os
import signal
import sys

from websockets.asyncio.server import serve

OPEN = set()


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def push(ws):
    n = 0
    while True:
        n += 1
        await ws.send(f"push {n}")
        await asyncio.sleep(1)


async def flood(ws):
    # Pings written raw, a thousand at a time (the library's ping() is too
    # slow to fill the buffers): the client's pongs pile up unread.
    batch = (b"\x89\x7d" + b"p" * 125) * 1000
    t = ws.transport
    while not t.is_closing():
        t.pause_reading()
        if t.get_write_buffer_size() < 1 << 20:
            t.write(batch)
        await asyncio.sleep(0.001)


async def deaf(ws):
    while True:
        ws.transport.pause_reading()
        await asyncio.sleep(0.05)


async def close(ws):
    await ws.close(1008, "policy")


def refuse(connection, request):
    return connection.respond(http.HTTPStatus.FORBIDDEN, "no\n")


def requiring(authorization):
    def check(connection, request):
        if request.headers.get("Authorization") != authorization:
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "no\n")
        return None
    return check


def tracked(handler, closes):
    async def run(ws):
        OPEN.add(ws)
        try:
            await handler(ws)
        except Exception:
            pass
        finally:
            OPEN.discard(ws)
            await ws.wait_closed()
            with open(closes, "a") as f:
                f.write(f"{ws.close_code}\n")
    return run


def going_away():
    for ws in list(OPEN):
        asyncio.ensure_future(ws.close(1001, "going away"))


async def main(port_file, mode, authorization=None):
    handler = {"echo": echo, "push": push, "pushping": push, "refuse": echo, "close": close,
               "flood": flood, "deaf": deaf}[mode]
    kwargs = {"process_request": refuse} if mode == "refuse" else {}
    if authorization is not None:
        kwargs = {"process_request": requiring(authorization)}
    pings = {"ping_interval": 0.1, "ping_timeout": 0.5} if mode == "pushping" else {"ping_interval": None}
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, going_away)
    run = tracked(handler, port_file + ".closes")
    async with serve(run, "127.0.0.1", 0, max_size=None, **pings, **kwargs) as server:
        port = server.sockets[0].getsockname()[1]
        with open(port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(port_file + ".tmp", port_file)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
