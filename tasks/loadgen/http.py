"""A lean HTTP/1.1 keep-alive client for the hot path, on asyncio.Protocol (uvloop when installed).

General clients (aiohttp) spend most of a small request's CPU on machinery the load generator does not
need. This one sends pre-encoded request bytes and parses just the status line, Content-Length or chunked
framing of the response; one request in flight per connection.
"""

from __future__ import annotations

import asyncio

HEADER_END = b"\r\n\r\n"


class ConnectionClosed(ConnectionError):
    pass


class HttpConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.sent_ns = 0  # when the request in flight was written (for the timeout watchdog)
        self._status = 0
        self._body_start = -1
        self._length = -1
        self._chunked = False

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(cls, host, port)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._fail(exc or ConnectionClosed("server closed the connection"))

    def _fail(self, exc: BaseException) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.waiter = None

    def abort(self, exc: BaseException) -> None:
        self._fail(exc)
        if self.transport is not None:
            self.transport.abort()

    def request(self, data: bytes, sent_ns: int) -> asyncio.Future:
        if self.transport is None:
            raise ConnectionClosed("connection is closed")
        self.waiter = asyncio.get_running_loop().create_future()
        self.sent_ns = sent_ns
        self._status, self._body_start, self._length, self._chunked = 0, -1, -1, False
        self.transport.write(data)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is None:
            return
        if self._body_start < 0:
            end = self.buf.find(HEADER_END)
            if end < 0:
                return
            head = bytes(self.buf[:end]).lower()
            self._status = int(head[9:12])
            self._body_start = end + 4
            pos = head.find(b"\r\ncontent-length:")
            if pos >= 0:
                stop = head.find(b"\r\n", pos + 2)
                self._length = int(head[pos + 17: stop if stop > 0 else len(head)])
            else:
                self._chunked = b"transfer-encoding: chunked" in head or b"transfer-encoding:chunked" in head
                self._length = -1 if self._chunked else 0
        if self._chunked:
            body = self._parse_chunked()
            if body is None:
                return
        else:
            stop = self._body_start + self._length
            if len(self.buf) < stop:
                return
            body = bytes(self.buf[self._body_start:stop])
            del self.buf[:stop]
        waiter, self.waiter = self.waiter, None
        if not waiter.done():
            waiter.set_result((self._status, body))

    def _parse_chunked(self) -> bytes | None:
        pos, parts = self._body_start, []
        while True:
            line_end = self.buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(self.buf[pos:line_end]).split(b";")[0], 16)
            if size == 0:
                trailer_end = self.buf.find(b"\r\n", line_end + 2)
                if trailer_end < 0:
                    return None
                del self.buf[:trailer_end + 2]
                return b"".join(parts)
            if len(self.buf) < line_end + 2 + size + 2:
                return None
            parts.append(bytes(self.buf[line_end + 2: line_end + 2 + size]))
            pos = line_end + 2 + size + 2


def build_request(method: str, host: str, port: int, path: str, body: bytes = b"",
                  content_type: str = "application/json") -> bytes:
    """Encode one complete HTTP/1.1 request, once, for reuse on every send."""
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: keep-alive"]
    if body or method in ("POST", "PUT"):
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
