"""The load generator's HTTP/1.1 response parser (tasks/loadgen/http.py): fast, slow and chunked paths."""

from __future__ import annotations

from tasks.loadgen.http import HttpConnection


class _Collect:
    def __init__(self) -> None:
        self.responses: list[tuple[int, bytes]] = []

    def on_response(self, conn, status, body):
        self.responses.append((status, body))
        conn.busy = True  # expect the next response on the same connection

    def on_lost(self, conn, exc):
        pass


def test_http_parser_fast_slow_and_chunked_paths():
    driver = _Collect()
    conn = HttpConnection(driver)
    conn.busy = True
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")  # whole response: fast path
    conn.data_received(b"HTTP/1.1 503 Busy\r\ncontent-length: 5\r\n\r\nab")  # split body: slow path
    conn.data_received(b"cde")
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    conn.data_received(b"2\r\nde\r\n0\r\n\r\n")
    conn.data_received(b"HTTP/1.1 404 Not Found\r\ncontent-length: 1\r\n\r\nx")  # lower case, not 200: fast
    # 2 bytes after a head that declares 20 must not pass for a whole response ("2" is a prefix of "20")
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nxy")
    conn.data_received(b"z" * 18)
    conn.data_received(b"HTTP/1.0 200 OK\r\nContent-Length:3\r\n\r\nabc")  # other spelling: slow path
    assert driver.responses == [(200, b"hi"), (503, b"abcde"), (200, b"abcde"), (404, b"x"),
                                (200, b"xy" + b"z" * 18), (200, b"abc")]
