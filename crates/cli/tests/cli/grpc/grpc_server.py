#!/usr/bin/env python3
"""A gRPC server (grpcio) for throng's tests: service throngtest.Tester
(tester.proto), written with generic handlers so no code is generated.

Call answers with the status code the request asks for (field 2), after
sleeping sleep_ms (field 3); with need_metadata (field 4) set it answers
FAILED_PRECONDITION unless the call carries that metadata key. Watch
(server streaming) sends count (field 6) replies, sleep_ms apart (the first
at once), then
ends with the status code asked for. Messages are
decoded by hand (only varints and length-delimited fields are used), so
only grpcio is needed, not protobuf.

Usage: grpc_server.py PORT [CERT KEY]   prints "ready" when serving; runs
until killed, or 120 s at most.
"""
import sys
import time
from concurrent import futures

import grpc


def varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def decode(data):
    fields = {}
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, i = varint(data, i)
        elif kind == 2:
            n, i = varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % kind)
        fields[number] = value
    return fields


def reply(text):
    b = text.encode()
    return b"\x0a" + bytes([len(b)]) + b if len(b) < 128 else b"\x0a" + bytes([len(b) & 0x7F | 0x80, len(b) >> 7]) + b


def call(request, context):
    f = decode(request)
    if f.get(3):
        time.sleep(f[3] / 1000)
    need = f.get(4, b"").decode()
    if need and need not in dict(context.invocation_metadata()):
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, "missing metadata " + need)
    code = f.get(2, 0)
    if code:
        status = next(s for s in grpc.StatusCode if s.value[0] == code)
        context.abort(status, "asked for " + status.name)
    return reply("hello " + f.get(1, b"").decode())


def watch(request, context):
    """Server streaming: count replies "hello NAME #i", sleep_ms apart (the
    first at once),
    then the status code asked for (after the replies)."""
    f = decode(request)
    name = f.get(1, b"").decode()
    for i in range(min(f.get(6, 0), 100000)):
        if i and f.get(3):
            time.sleep(f[3] / 1000)
        if not context.is_active():
            return
        yield reply("hello %s #%d" % (name, i))
    code = f.get(2, 0)
    if code:
        status = next(s for s in grpc.StatusCode if s.value[0] == code)
        context.abort(status, "asked for " + status.name)


def main():
    port = int(sys.argv[1])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    handler = grpc.method_handlers_generic_handler(
        "throngtest.Tester",
        {
            "Call": grpc.unary_unary_rpc_method_handler(call),
            "Watch": grpc.unary_stream_rpc_method_handler(watch),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    if len(sys.argv) > 3:
        key = open(sys.argv[3], "rb").read()
        cert = open(sys.argv[2], "rb").read()
        server.add_secure_port("127.0.0.1:%d" % port, grpc.ssl_server_credentials([(key, cert)]))
    else:
        server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination(timeout=120)


if __name__ == "__main__":
    main()
