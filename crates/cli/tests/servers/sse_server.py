"""An event-stream server that is not throng's: sse-starlette on uvicorn
(both from PyPI), for crates/cli/tests/cli/sse.rs.

usage: sse_server.py PORT_FILE
GET /events?n=N&interval_ms=MS  N events ("data: I"), then the end;
sse-starlette ends its lines with CRLF.
The port is written to PORT_FILE once the socket listens.
"""

import asyncio
import socket
import sys

import uvicorn
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.routing import Route


async def events(request):
    n = min(int(request.query_params.get("n", "5")), 10000)
    interval = min(int(request.query_params.get("interval_ms", "1")), 10000) / 1000

    async def stream():
        for i in range(n):
            await asyncio.sleep(interval)
            yield {"id": str(i), "event": "tick", "data": str(i)}

    return EventSourceResponse(stream())


app = Starlette(routes=[Route("/events", events)])


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(sock.getsockname()[1]))
    import os

    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
