"""Waiting for a store that does not answer: each request tried again with backoff, for a bounded time.

A store "does not answer" when the request never got an answer from S3 itself: the connection was refused, reset,
closed or timed out, or the answer was a 5xx, a 429 or a throttling code (the service, or whatever stands in front
of it, is down or overloaded). Every other answer is S3's word and is not waited on: a 403 (credentials), a
missing bucket or key, a bad request, a certificate the client refuses. Those fail at once, as they would
tomorrow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tasks.core.errors import StoreError

T = TypeVar("T")

BACKOFF_FIRST_S = 1.0  # the first pause after a request the store did not answer
BACKOFF_MAX_S = 60.0  # pauses double up to this, so a store back after an hour is seen within a minute
AWAY_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "SlowDown", "Throttling",
                        "ThrottlingException", "ServiceUnavailable", "InternalError"})


class StoreAway(StoreError):
    """The store did not answer for the whole wait; the message names the store and the request."""


def is_away(exc: BaseException) -> bool:
    """True when `exc` says the store did not answer (see the module docstring), False for an answer."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, IncompleteReadError, SSLError

    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return status >= 500 or status == 429 or exc.response.get("Error", {}).get("Code") in AWAY_CODES
    if isinstance(exc, SSLError):  # a certificate refused is configuration, not an outage
        return False
    return isinstance(exc, (ConnectionError, HTTPClientError, IncompleteReadError))


def next_pause_s(pause_s: float) -> float:
    """The pause after `pause_s`: doubled, at most BACKOFF_MAX_S."""
    return min(2 * pause_s, BACKOFF_MAX_S)


def say(line: str) -> None:
    print(line, flush=True)  # a task's log shows each attempt as it happens


def wait_for_store(call: Callable[[], T], *, where: str, what: str, wait_s: float,
                   log: Callable[[str], object] = say) -> T:
    """`call()`, tried again while the store does not answer, until `wait_s` seconds after its first failure; one
    line per failed attempt to `log` (what failed, how long it has waited, what is left). StoreAway past the wait,
    naming `where` (the store) and `what` (the request); an answer that is an error is raised at once."""
    first_failure = None
    pause_s = BACKOFF_FIRST_S
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except Exception as exc:
            if not is_away(exc):
                raise
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            waited_s, left_s = now - first_failure, wait_s - (now - first_failure)
            failure = f"{type(exc).__name__}: {exc}"[:500]
            if left_s <= 0:
                raise StoreAway(f"result store {where} did not answer {what} for {waited_s:.0f} s (Param "
                                f"store_wait_s {wait_s:g}; {attempt} attempts): {failure}") from exc
            pause = min(pause_s, left_s)
            log(f"store: {where} did not answer {what} (attempt {attempt}): {failure}; waited {waited_s:.0f} s of "
                f"{wait_s:g} s, {left_s:.0f} s left; next try in {pause:.1f} s")
            time.sleep(pause)
            pause_s = next_pause_s(pause_s)
