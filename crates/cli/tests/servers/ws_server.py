#!/usr/bin/env python3
"""WebSocket servers for throng's tests (PyPI `websockets`), on loopback.

    ws_server.py PORT_FILE MODE

MODE: echo (every message back), push (a message "push N" every second),
refuse (403 to every upgrade), close (closes each socket at once with code
1008). Writes the port it listens on to PORT_FILE, then serves until killed.
"""
import asyncio
import http
import sys

import websockets
from websockets.asyncio.server import serve


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def push(ws):
    n = 0
    while True:
        n += 1
        await ws.send(f"push {n}")
        await asyncio.sleep(1)


async def close(ws):
    await ws.close(1008, "policy")


def refuse(connection, request):
    return connection.respond(http.HTTPStatus.FORBIDDEN, "no\n")


async def main(port_file, mode):
    handler = {"echo": echo, "push": push, "refuse": echo, "close": close}[mode]
    kwargs = {"process_request": refuse} if mode == "refuse" else {}
    async with serve(handler, "127.0.0.1", 0, ping_interval=None, max_size=None, **kwargs) as server:
        port = server.sockets[0].getsockname()[1]
        with open(port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.rename(port_file + ".tmp", port_file)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
