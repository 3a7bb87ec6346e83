#!/usr/bin/env python3
"""An HTTP/1.1 server for throng's tests that fails every other request.

    alternate.py PORT_FILE

Answers GET requests in turn 200, 503, 200, 503, ... (one count for the
whole server, whatever the connection), each with a short body and
keep-alive. Listens on 127.0.0.1, writes its port to PORT_FILE, then serves
until killed. Independent of throng: the standard library's http.server.
"""
import http.server
import os
import sys
import threading

LOCK = threading.Lock()
COUNT = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per response (headers and body), no Nagle: no delayed-ACK waits.
    wbufsize = 65536
    disable_nagle_algorithm = True

    def do_GET(self):
        with LOCK:
            n = COUNT[0]
            COUNT[0] += 1
        status = 200 if n % 2 == 0 else 503
        body = b"ok\n" if status == 200 else b"unavailable\n"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
