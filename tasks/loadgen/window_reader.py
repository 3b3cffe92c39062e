"""What a load point reads from the server it drives: the interface the load generator needs, kept apart from how
a server is read (tasks/measure/window_reader.py reads a live server through its launcher's handle).

The load point reads it before its start, at both ends of its measured window and after it (`run.ServerScraper`),
so the server's own figures cover exactly the window the client's throughput is counted in.
"""

from __future__ import annotations

from typing import Protocol


class ServerWindowReader(Protocol):
    """The server's cumulative figures, each read on demand."""

    def request_count(self) -> float | None:
        """Successful requests so far by the server's own counter; None where it exposes none. A failed read
        raises: the count is checked against the client's, so a wrong one must not pass silently."""

    def timings(self) -> dict[str, float] | None:
        """The server's own cumulative time per part of a request (`measurement.ServerTiming`'s keys); None where
        the stack reports none. A read that fails (OSError, ValueError, KeyError) leaves the point without them."""

    def cpu_s(self) -> float | None:
        """CPU seconds the server has used so far; None where it cannot be read."""
