"""A real HTTP proxy in front of the moto S3 server that fails chosen requests, as a flaky or broken store does.

`fail(request) -> int | None` decides per request: an HTTP status to answer with instead of forwarding (e.g.
503, which botocore's standard retry mode retries), or None to forward it to moto unchanged.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    path: str  # /bucket/key?query


class FaultyS3Proxy:
    def __init__(self, upstream_port: int, fail: Callable[[ProxiedRequest], int | None]) -> None:
        self.upstream_port, self.fail = upstream_port, fail
        self.failed: list[ProxiedRequest] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = ProxiedRequest(self.command, self.path)
                status = proxy.fail(request)
                if status is not None:
                    proxy.failed.append(request)
                    payload = b"<Error><Code>ServiceUnavailable</Code><Message>injected</Message></Error>"
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "content-length"}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        if key.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FaultyS3Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
