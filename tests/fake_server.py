"""A tiny asyncio HTTP/1.1 server speaking just enough KServe v2 REST, with an injected stall and error rate.

It is a stand-in, used only where the real servers cannot do what a test needs: a *known* stall at a known
time (to show that latency from the scheduled send time reveals it and latency from the actual send time
hides it), a known share of failing requests (to show failures are counted and never enter the
percentiles) and a known latency mixture (a known share of slow successes, so a bound's decision can be checked
against the truth). The real servers (custom, Triton) cannot produce any of them on demand; every other load test
runs against them.

    python -m tests.fake_server --port P [--stall-after-s X --stall-s S] [--error-every K --error-delay-ms D]
        [--slow-every K --slow-ms D]

The stall starts X seconds after the first inference request and holds every response until it ends;
every K-th inference request gets a 500 after D ms (slower than a success, so a failed request counted as a
success would show in the percentiles); with --slow-every, every K-th inference request succeeds after D ms.
Bound to 127.0.0.1 only; it ends on SIGTERM or after --max-s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tasks.runtimes.ports import free_port
from tasks.serve.base import Endpoint

HEADER_END = b"\r\n\r\n"


class FakeKServe(asyncio.Protocol):
    def __init__(self, state: dict) -> None:
        self.state = state
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(HEADER_END)
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
            asyncio.get_running_loop().create_task(self.respond(head.split(" ")[1], body))

    async def respond(self, path: str, body: bytes) -> None:
        s = self.state
        if not path.endswith("/infer"):
            return self.write(200, b"{}")
        now = time.monotonic()
        if s["first"] is None:
            s["first"] = now
        s["count"] += 1
        stall_at = s["first"] + s["stall_after_s"]
        if s["stall_s"] > 0 and stall_at <= now < stall_at + s["stall_s"]:
            await asyncio.sleep(stall_at + s["stall_s"] - now)
        if s["slow_every"] and s["count"] % s["slow_every"] == 0:
            await asyncio.sleep(s["slow_ms"] / 1000)
        if s["error_every"] and s["count"] % s["error_every"] == 0:
            await asyncio.sleep(s["error_delay_ms"] / 1000)
            return self.write(500, b'{"error": "injected"}')
        batch = json.loads(body)["inputs"][0]["shape"][0]
        outputs = [{"name": "output", "shape": [batch, 10], "datatype": "FP32", "data": [0.0] * (batch * 10)}]
        self.write(200, json.dumps({"model_name": "mlp", "outputs": outputs}).encode())

    def write(self, status: int, body: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        reason = "OK" if status == 200 else "Internal Server Error"
        self.transport.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                             f"content-length: {len(body)}\r\n\r\n".encode() + body)


@contextmanager
def fake_server(*args: str) -> Iterator[Endpoint]:
    """This server in a process of its own on a free loopback port (options as on the command line), ended by its
    PID when the block ends."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_server", "--port", str(port), "--max-s", "60", *args])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield Endpoint("127.0.0.1", port, "mlp", "kserve_v2_rest")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def serve(args: argparse.Namespace) -> None:
    state = {"first": None, "count": 0, "stall_after_s": args.stall_after_s, "stall_s": args.stall_s,
             "error_every": args.error_every, "error_delay_ms": args.error_delay_ms, "slow_every": args.slow_every,
             "slow_ms": args.slow_ms}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FakeKServe(state), "127.0.0.1", args.port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), timeout=args.max_s)
    except TimeoutError:
        pass
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stall-after-s", type=float, default=0.0)
    parser.add_argument("--stall-s", type=float, default=0.0)
    parser.add_argument("--error-every", type=int, default=0)
    parser.add_argument("--error-delay-ms", type=float, default=0.0)
    parser.add_argument("--slow-every", type=int, default=0)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    parser.add_argument("--max-s", type=float, default=300.0)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
