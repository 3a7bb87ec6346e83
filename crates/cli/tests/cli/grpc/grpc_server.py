#!/usr/bin/env python3
"""A gRPC server (grpcio) for throng's tests: service throngtest.Tester
(tester.proto), written with generic handlers so no code is generated.

Call answers with the status code the request asks for (field 2), after
sleeping sleep_ms (field 3); with need_metadata (field 4) set it answers
FAILED_PRECONDITION unless the call carries that metadata key. Watch
(server streaming) sends count (field 6) replies, sleep_ms apart (the first
at once), then
ends with the status code asked for. Upload (client streaming) counts the
messages it read and Chat (bidirectional) answers each (both log them to
GRPC_CALL_LOG). Messages are
decoded by hand (only varints and length-delimited fields are used), so
only grpcio is needed, not protobuf.

With --reflection it also serves server reflection (grpcio-reflection:
grpc.reflection.v1alpha only), from descriptors of tester.proto and
common.proto built here by hand (no protoc).

With the environment variable GRPC_CALL_LOG set to a file, every Call that
reaches its handler appends one line to it (what the server counted).

Usage: grpc_server.py [--reflection] PORT [CERT KEY]   prints "ready" when
serving; runs until killed, or 120 s at most.
"""
import os
import sys
import threading
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
    n, length = len(b), b""
    while n >= 0x80:
        length += bytes([n & 0x7F | 0x80])
        n >>= 7
    return b"\x0a" + length + bytes([n]) + b


CALL_LOG = os.environ.get("GRPC_CALL_LOG")
CALL_LOG_LOCK = threading.Lock()


def call(request, context):
    if CALL_LOG:
        with CALL_LOG_LOCK, open(CALL_LOG, "a") as log:
            log.write("call\n")
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
    return reply("hello " + f.get(1, b"").decode() + "x" * min(f.get(7, 0), 16 << 20))


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


def log(line):
    if CALL_LOG:
        with CALL_LOG_LOCK, open(CALL_LOG, "a") as f:
            f.write(line + "\n")


def upload(requests, context):
    """Client streaming: reads every message (each after sleeping its
    sleep_ms), logs "upload N" with the number read, answers "received N",
    or the last status code a message asked for."""
    n = code = 0
    for request in requests:
        f = decode(request)
        if f.get(3):
            time.sleep(f[3] / 1000)
        n += 1
        code = f.get(2, 0) or code
    log("upload %d" % n)
    if code:
        status = next(s for s in grpc.StatusCode if s.value[0] == code)
        context.abort(status, "asked for " + status.name)
    return reply("received %d" % n)


def chat(requests, context):
    """Bidirectional: answers each message with "hello NAME" (after its
    sleep_ms), logs "chat N" once the client half-closed, then ends with
    the last status code a message asked for."""
    n = code = 0
    for request in requests:
        f = decode(request)
        if f.get(3):
            time.sleep(f[3] / 1000)
        n += 1
        code = f.get(2, 0) or code
        yield reply("hello " + f.get(1, b"").decode())
    log("chat %d" % n)
    if code:
        status = next(s for s in grpc.StatusCode if s.value[0] == code)
        context.abort(status, "asked for " + status.name)


def descriptors():
    """tester.proto and common.proto as FileDescriptorProtos, added to the
    default pool that grpcio-reflection answers from."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    F = descriptor_pb2.FieldDescriptorProto

    def fields(message, spec):
        for name, number, kind, *rest in spec:
            camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
            label = F.LABEL_REPEATED if "repeated" in rest else F.LABEL_OPTIONAL
            f = message.field.add(name=name, number=number, type=kind, label=label, json_name=camel)
            if kind == F.TYPE_MESSAGE:
                f.type_name = rest[0]

    common = descriptor_pb2.FileDescriptorProto(name="common.proto", package="throngtest.common", syntax="proto3")
    fields(common.message_type.add(name="Tag"),
           [("key", 1, F.TYPE_STRING), ("values", 2, F.TYPE_STRING, "repeated")])
    tester = descriptor_pb2.FileDescriptorProto(name="tester.proto", package="throngtest", syntax="proto3",
                                                dependency=["common.proto"])
    fields(tester.message_type.add(name="CallRequest"), [
        ("name", 1, F.TYPE_STRING), ("code", 2, F.TYPE_INT32), ("sleep_ms", 3, F.TYPE_INT32),
        ("need_metadata", 4, F.TYPE_STRING), ("tag", 5, F.TYPE_MESSAGE, ".throngtest.common.Tag"),
        ("count", 6, F.TYPE_INT32), ("pad", 7, F.TYPE_INT32)])
    fields(tester.message_type.add(name="CallReply"), [("message", 1, F.TYPE_STRING)])
    svc = tester.service.add(name="Tester")
    svc.method.add(name="Call", input_type=".throngtest.CallRequest", output_type=".throngtest.CallReply")
    svc.method.add(name="Watch", input_type=".throngtest.CallRequest", output_type=".throngtest.CallReply",
                   server_streaming=True)
    svc.method.add(name="Upload", input_type=".throngtest.CallRequest", output_type=".throngtest.CallReply",
                   client_streaming=True)
    svc.method.add(name="Chat", input_type=".throngtest.CallRequest", output_type=".throngtest.CallReply",
                   client_streaming=True, server_streaming=True)
    pool = descriptor_pool.Default()
    pool.AddSerializedFile(common.SerializeToString())
    pool.AddSerializedFile(tester.SerializeToString())


def main():
    reflect = "--reflection" in sys.argv
    if reflect:
        sys.argv.remove("--reflection")
    port = int(sys.argv[1])
    # GRPC_COMPRESSION=gzip: replies compressed (to clients that accept gzip);
    # =identity: gzip disabled (only identity enabled), so a request message
    # compressed with it is answered UNIMPLEMENTED.
    compression = os.environ.get("GRPC_COMPRESSION")
    options = [("grpc.max_send_message_length", 32 << 20)]
    if compression == "identity":
        options.append(("grpc.compression_enabled_algorithms_bitset", 1))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         compression=grpc.Compression.Gzip if compression == "gzip" else None,
                         options=options)
    handler = grpc.method_handlers_generic_handler(
        "throngtest.Tester",
        {
            "Call": grpc.unary_unary_rpc_method_handler(call),
            "Watch": grpc.unary_stream_rpc_method_handler(watch),
            "Upload": grpc.stream_unary_rpc_method_handler(upload),
            "Chat": grpc.stream_stream_rpc_method_handler(chat),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    if reflect:
        from grpc_reflection.v1alpha import reflection

        descriptors()
        reflection.enable_server_reflection(["throngtest.Tester", reflection.SERVICE_NAME], server)
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
