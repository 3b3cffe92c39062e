"""The host estimate of docs/scaling.md (tasks/plan/capacity.py) on synthetic timelines, and the measuring time
`plan` prints."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.sweep import DEFAULT_MAX_POINTS, MAX_CONFIRMS
from tasks.plan.capacity import cell_durations, hosts_needed, measuring_estimate_s, run_matrix
from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig


def _session(host: str, start: float, points: list[float], overhead: float = 2.0) -> dict:
    cells, t = {}, start + overhead / 2
    for i, p in enumerate(points):
        cells[f"c{i}"] = {"load_begin": t, "load_end": t + p}
        t += p
    return {"host": host, "start": start, "stopped": t + overhead / 2, "cells": cells}


def test_durations_per_point_session_and_gap_between_sessions_on_a_host():
    timelines = [_session("a", 0, [3, 3]), _session("a", 12, [3, 3]), _session("b", 0, [3, 3]),
                 {"session_id": "skipped", "cells": {}}]
    d = cell_durations(timelines)
    assert (d.sessions, d.points, d.point_s, d.overhead_s) == (3, 6, 3.0, 2.0)
    assert (d.gap_s, d.gaps, d.hosts, d.busy_s) == (4.0, 1, ("a", "b"), 24.0)


def test_hosts_for_a_matrix_in_a_window():
    d = cell_durations([_session("a", 0, [3, 3]), _session("a", 12, [3, 3])])  # overhead 2 s, gap 4 s, point 3 s
    est = hosts_needed(d, models=3, stacks=6, loads=10, window_s=3600)  # 18 sessions of 2 + 30 + 4 = 36 s
    assert est.session_s == 36.0 and est.sessions == 18 and est.sessions_per_host == 100 and est.hosts_needed == 1
    est = hosts_needed(d, models=3, stacks=6, loads=10, window_s=300)  # 8 per host
    assert est.hosts_needed == 3
    too_long = hosts_needed(d, models=1, stacks=1, loads=1000, window_s=600)
    assert too_long.hosts_needed is None and "longer than the window" in too_long.note
    with pytest.raises(ConfigError, match="models"):
        hosts_needed(d, models=0, stacks=1, loads=1, window_s=60)
    with pytest.raises(ConfigError, match="sessions.json"):
        cell_durations([{"cells": {}}])


def test_the_matrix_of_a_published_plan():
    plan = {"sessions": [{"model": m, "server": s, "format": "onnx", "cells": [{}, {}]} for m in "xy" for s in "pqr"]
            + [{"model": "x", "server": "p", "format": "onnx", "cells": [{}], "role": "control"}]}
    assert run_matrix(plan) == (2, 3, 2)
    # a budgeted night's plan keeps the cells that ran; the matrix counts those its budget deferred
    deferred = [{"cell_id": f"x.onnx.{s}.c{i}", "model": "x", "server": s, "format": "onnx"} for s in "ps"
                for i in range(3)]
    assert run_matrix({**plan, "night": {"deferred": deferred}}) == (2, 4, 5)


def test_the_plan_estimates_the_longer_looks_a_rate_search_takes_below_its_highest_rate():
    """`plan`'s estimate: each rate-search point warm-up plus duration_s; a lengthening rate search's look is first
    a point of its own 10 % below its highest passing rate, then warm-up plus max_point_s, at most MAX_CONFIRMS."""
    params = {"models": ["mlp"], "servers": ["custom"], "formats": ["onnx"], "mode": "rate", "rates": [50],
              "rate_search": True, "p99_bound_ms": 20, "control_cell": "none", "duration_s": 8, "warmup_s": 2}
    short = RunConfig.from_params(params)
    (cell,) = make_plan(short).cells
    assert measuring_estimate_s([cell], short) == (DEFAULT_MAX_POINTS * 10.0, 0.0, 0.0)
    longer = RunConfig.from_params({**params, "max_point_s": 90})
    planned, typical, most = measuring_estimate_s(make_plan(longer).cells, longer)
    assert (planned, typical, most) == (DEFAULT_MAX_POINTS * 10.0, 10.0 + 92.0, MAX_CONFIRMS * (10.0 + 92.0))
