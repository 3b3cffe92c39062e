"""A lean HTTP/1.1 keep-alive client for the hot path, on asyncio.Protocol (uvloop when installed).

General clients (aiohttp) spend most of a small request's CPU on machinery the load generator does not
need. This one writes pre-encoded request bytes and parses just the status line and the Content-Length or
chunked framing of the response; one request in flight per connection. It creates no Future per request:
`data_received` hands the finished response to its driver's `on_response`, which records it and may write
the next request on the same connection straight away.

The fast path is the common case of a whole response in one read whose Content-Length line declares exactly
the bytes after the head (found as one token, cached per length, instead of parsed); partial reads, other
spellings and chunked bodies go through a buffered slow path.
"""

from __future__ import annotations

import asyncio
from time import monotonic_ns
from typing import Protocol

HEADER_END = b"\r\n\r\n"
_OK = b"HTTP/1.1 200 "
_LENGTH_TOKENS: dict[int, tuple[bytes, bytes]] = {}  # body length -> its Content-Length line, as servers spell it
_LENGTH_TOKENS_MAX = 4096


def _length_tokens(length: int) -> tuple[bytes, bytes]:
    tokens = _LENGTH_TOKENS.get(length)
    if tokens is None:
        tokens = (b"\nContent-Length: %d\r" % length, b"\ncontent-length: %d\r" % length)
        if len(_LENGTH_TOKENS) < _LENGTH_TOKENS_MAX:  # a model's responses come in a few sizes
            _LENGTH_TOKENS[length] = tokens
    return tokens


class Driver(Protocol):
    """What a connection calls back: the engine's closed- or open-loop driver."""

    def on_response(self, conn: HttpConnection, status: int, body: bytes) -> None: ...

    def on_lost(self, conn: HttpConnection, exc: BaseException | None) -> None: ...


class HttpConnection(asyncio.Protocol):
    """One keep-alive connection. `busy` while a request is in flight; `scheduled_ns`/`sent_ns` belong to it."""

    __slots__ = ("driver", "slot", "transport", "busy", "scheduled_ns", "sent_ns", "_buf", "_body_start", "_length",
                 "_chunked", "_status")

    def __init__(self, driver: Driver, slot: int = -1) -> None:
        self.driver = driver
        self.slot = slot  # the closed loop's connection slot (kept across reconnects); -1 in the open loop
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.scheduled_ns = 0
        self.sent_ns = 0
        self._buf = bytearray()
        self._body_start = -1
        self._length = -1
        self._chunked = False
        self._status = 0

    @classmethod
    async def open(cls, host: str, port: int, driver: Driver, slot: int = -1) -> HttpConnection:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(lambda: cls(driver, slot), host, port)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.driver.on_lost(self, exc)

    def send(self, request: bytes, scheduled_ns: int) -> None:
        """Write one whole request; the actual send time is taken here."""
        self.scheduled_ns = scheduled_ns
        self.busy = True
        self.sent_ns = monotonic_ns()
        self.transport.write(request)  # type: ignore[union-attr]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self.busy:
            return  # nothing asked for (a late reply after a timeout): the connection is being dropped
        if not self._buf:
            end = data.find(HEADER_END)
            if end > 0:
                # the whole response, nothing more, iff the head declares exactly the bytes after it
                tokens = _length_tokens(len(data) - end - 4)
                if data.find(tokens[0], 0, end + 1) > 0 or data.find(tokens[1], 0, end + 1) > 0:
                    self.busy = False
                    self.driver.on_response(self, 200 if data.startswith(_OK) else int(data[9:12]), data[end + 4:])
                    return
        self._slow(data)

    def _slow(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        if self._body_start < 0:
            end = buf.find(HEADER_END)
            if end < 0:
                return
            head = bytes(buf[:end]).lower()
            self._status = int(head[9:12])
            self._body_start = end + 4
            pos = head.find(b"\r\ncontent-length:")
            if pos >= 0:
                stop = head.find(b"\r\n", pos + 2)
                self._length = int(head[pos + 17: stop if stop > 0 else len(head)])
                self._chunked = False
            else:
                self._chunked = b"chunked" in head and b"transfer-encoding" in head
                self._length = 0
        if self._chunked:
            body = self._parse_chunked()
            if body is None:
                return
        else:
            stop = self._body_start + self._length
            if len(buf) < stop:
                return
            body = bytes(buf[self._body_start:stop])
            del buf[:stop]
        status = self._status
        self._body_start, self._length, self._chunked = -1, -1, False
        if buf:  # bytes past the response we asked for: the framing is broken, keep-alive cannot go on
            del buf[:]
            self.busy = False
            self.driver.on_response(self, 0, b"")
            return
        self.busy = False
        self.driver.on_response(self, status, body)

    def _parse_chunked(self) -> bytes | None:
        buf, pos, parts = self._buf, self._body_start, []
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
            if size == 0:
                trailer_end = buf.find(HEADER_END[:2], line_end + 2)
                if trailer_end < 0:
                    return None
                del buf[:trailer_end + 2]
                return b"".join(parts)
            if len(buf) < line_end + 2 + size + 2:
                return None
            parts.append(bytes(buf[line_end + 2: line_end + 2 + size]))
            pos = line_end + 2 + size + 2


def build_request(method: str, host: str, port: int, path: str, body: bytes = b"",
                  content_type: str = "application/json", headers: dict[str, str] | None = None) -> bytes:
    """Encode one complete HTTP/1.1 request, once, for reuse on every send (`headers`: more header lines)."""
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: keep-alive"]
    if body or method in ("POST", "PUT"):
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
