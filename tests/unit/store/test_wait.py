"""Waiting for a store that does not answer (tasks/store/wait.py): what counts as not answering, the backoff, the
progress lines, the error past the wait; and a store whose endpoint is closed, for real."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
    SSLError,
)

from tasks.core.errors import ConfigError
from tasks.plan.config import MAX_STORE_WAIT_S, RunConfig
from tasks.runtimes.ports import free_port
from tasks.store.s3 import ConnectionFields, S3Store
from tasks.store.wait import BACKOFF_FIRST_S, BACKOFF_MAX_S, StoreAway, is_away, next_pause_s, wait_for_store


def answered(status: int, code: str) -> ClientError:
    """What botocore raises for an answer of S3 with this HTTP status and error code."""
    return ClientError({"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "PutObject")


@pytest.mark.parametrize("exc", [
    EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
    ConnectionClosedError(endpoint_url="http://127.0.0.1:1"),
    ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
    answered(503, "ServiceUnavailable"), answered(500, "InternalError"), answered(502, "BadGateway"),
    answered(429, "TooManyRequests"), answered(503, "SlowDown"), answered(400, "RequestTimeout"),
])
def test_no_answer_is_waited_for(exc):
    assert is_away(exc)


@pytest.mark.parametrize("exc", [
    answered(403, "AccessDenied"), answered(404, "NoSuchBucket"), answered(404, "NoSuchKey"),
    answered(400, "InvalidRequest"), answered(403, "SignatureDoesNotMatch"),
    SSLError(endpoint_url="https://127.0.0.1:1", error="certificate verify failed"), NoCredentialsError(),
    ValueError("a bug"),
])
def test_an_answer_is_not_waited_for(exc):
    assert not is_away(exc)


def test_the_pauses_double_up_to_the_cap():
    pauses = [BACKOFF_FIRST_S]
    while len(pauses) < 12:
        pauses.append(next_pause_s(pauses[-1]))
    assert pauses[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(pauses) == BACKOFF_MAX_S == pauses[-1]


def test_a_store_back_within_the_wait_answers_the_same_request():
    answers = [EndpointConnectionError(endpoint_url="http://s3"), "bytes"]
    lines: list[str] = []

    def call():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_for_store(call, where="s3://b/p", what="GET k", wait_s=0.3, log=lines.append) == "bytes"
    (line,) = lines
    assert "s3://b/p did not answer GET k (attempt 1): EndpointConnectionError" in line
    assert "waited 0 s of 0.3 s" in line and "left; next try in 0.3 s" in line


def test_an_answer_that_is_an_error_is_raised_at_once():
    lines: list[str] = []

    def call():
        raise answered(403, "AccessDenied")

    with pytest.raises(ClientError, match="AccessDenied"):
        wait_for_store(call, where="s3://b/p", what="PUT k", wait_s=60, log=lines.append)
    assert lines == []


def test_past_the_wait_the_error_names_the_store_and_the_request():
    calls: list[int] = []

    def call():
        calls.append(1)
        raise answered(503, "ServiceUnavailable")

    with pytest.raises(StoreAway, match=r"result store s3://b/p did not answer PUT k for 0 s \(Param store_wait_s "
                                        r"0.2; 2 attempts\): ClientError"):
        wait_for_store(call, where="s3://b/p", what="PUT k", wait_s=0.2, log=lambda _: None)
    assert len(calls) == 2


def test_a_waiting_store_whose_endpoint_is_closed_fails_naming_it():
    endpoint = f"http://127.0.0.1:{free_port()}"
    lines: list[str] = []
    store = S3Store("results", "eval", ConnectionFields("serving_eval_s3", "k", "s", {"endpoint_url": endpoint}),
                    wait_s=0.5, log=lines.append)
    with pytest.raises(StoreAway, match=rf"s3://results/eval via connection 'serving_eval_s3' \({endpoint}\) did "
                                        "not answer GET eval/latest.json"):
        store.get("eval/latest.json")
    assert lines and all("EndpointConnectionError" in line for line in lines)


@pytest.mark.parametrize("value", [-1, MAX_STORE_WAIT_S + 1, True, "60"])
def test_store_wait_s_is_refused_out_of_bounds(value):
    with pytest.raises(ConfigError, match="store_wait_s"):
        RunConfig(store_wait_s=value).check()
    RunConfig(store_wait_s=0).check()  # not waiting at all is allowed
