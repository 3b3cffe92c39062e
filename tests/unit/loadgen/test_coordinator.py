"""A load point's driver (tasks/loadgen/coordinator.py): bad input and an unreachable endpoint refused before any load,
server scrapes that fail without failing the point, the server's CPU over the measured window only."""

from __future__ import annotations

import time

import pytest

from tasks.core.errors import ConfigError, LoadTestError
from tasks.loadgen.coordinator import ServerScraper, check_reachable, run_load_point, server_probe
from tasks.loadgen.settings import LoadSettings
from tasks.plan.config import RunConfig
from tasks.runtimes.ports import free_port
from tasks.serve.base import Endpoint


def test_bad_run_config_before_load():
    for params, field in (({"concurrencies": [0]}, "concurrencies"), ({"mode": "rate", "rates": [0]}, "rates"),
                          ({"duration_s": 2, "window_s": 5}, "window_s")):
        with pytest.raises(ConfigError) as info:
            RunConfig.from_params(params)
        assert info.value.field == field


def test_unreachable_endpoint_fails_before_load(tmp_path):
    endpoint = Endpoint("127.0.0.1", free_port(), "mlp", "kserve_v2_rest")
    with pytest.raises(LoadTestError, match="endpoint=http://127.0.0.1:.*must accept TCP connections"):
        check_reachable(endpoint)
    with pytest.raises(LoadTestError, match="no load was sent"):
        run_load_point(endpoint, None, LoadSettings(duration_s=1, window_s=1), tmp_path)
    assert not list(tmp_path.glob("recording*"))


class Reader:
    """A server's reader (tasks.loadgen.window_reader.ServerWindowReader) made of functions; one not given reads
    nothing."""

    def __init__(self, count=None, timings=None, cpu=None) -> None:
        self._count, self._timings, self._cpu = count, timings, cpu

    def request_count(self) -> float | None:
        return self._count() if self._count else None

    def timings(self) -> dict | None:
        return self._timings() if self._timings else None

    def cpu_s(self) -> float | None:
        return self._cpu() if self._cpu else None


def test_a_timing_scrape_that_fails_never_fails_the_point():
    def broken() -> dict:
        raise OSError("connection refused")

    assert server_probe(Reader(count=lambda: 5.0, timings=broken))() == {"count": 5.0}
    assert server_probe(Reader(timings=lambda: {"requests": 2, "infer_ms": 3.0}))() == {"timing.requests": 2.0,
                                                                                         "timing.infer_ms": 3.0}
    assert server_probe(Reader(cpu=broken))() == {} and server_probe(Reader(cpu=lambda: None))() == {}


def test_the_server_cpu_is_read_over_the_measured_window_only():
    """A server clock that burns half a core only inside the measured window: the window reads 50 %, where a mean
    over the whole load point (its warm-up idle) would read less."""
    settings = LoadSettings(duration_s=0.4, warmup_s=0.3, window_s=0.2)
    start_ns = time.monotonic_ns() + 50_000_000
    window = (start_ns + 300_000_000, start_ns + 700_000_000)

    def cpu_s() -> float:  # 0.5 CPU-s per second inside the window, none outside it
        now = min(max(time.monotonic_ns(), window[0]), window[1])
        return 0.5 * (now - window[0]) / 1e9

    scraper = ServerScraper(server_probe(Reader(cpu=cpu_s)), start_ns, settings)
    time.sleep((window[1] - time.monotonic_ns()) / 1e9 + 0.1)
    scraper.finish()
    assert scraper.cpu_pct() == pytest.approx(50.0, abs=3.0)
    no_reader = ServerScraper(server_probe(Reader()), start_ns, settings)
    no_reader.finish()
    assert no_reader.cpu_pct() is None
