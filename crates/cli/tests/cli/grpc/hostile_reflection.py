#!/usr/bin/env python3
"""A hostile server reflection service (grpcio, grpc.reflection.v1) for
throng's tests: each request is answered with bytes crafted by MODE, not
by grpcio-reflection.

MODE: many-types (one file of 7,000,000 empty message types: 14 MB that
would decode into gigabytes), many-files (400,000 tiny files of distinct
names), not-reflection (a protobuf message that is no ReflectionResponse).

Usage: hostile_reflection.py MODE PORT   prints "ready" when serving; runs
until killed, or 120 s at most.
"""
import sys
from concurrent import futures

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def files_answer(files):
    """ReflectionResponse{file_descriptor_response(4){file_descriptor_proto(1)...}}."""
    return field(4, b"".join(field(1, f) for f in files))


def answer(mode):
    if mode == "many-types":
        # FileDescriptorProto{name: "big.proto", message_type(4): {} x 7,000,000}.
        return files_answer([field(1, b"big.proto") + b"\x22\x00" * 7_000_000])
    if mode == "many-files":
        return files_answer([field(1, b"f%d.proto" % i) for i in range(400_000)])
    # Protobuf, but field 4 as a number where a reflection response has
    # its file descriptors.
    return b"\x20\x01"


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    reply = answer(mode)

    def info(requests, context):
        for _ in requests:
            yield reply

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)],
    )
    handler = grpc.method_handlers_generic_handler(
        "grpc.reflection.v1.ServerReflection",
        {"ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(info)},
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination(timeout=120)


if __name__ == "__main__":
    main()
