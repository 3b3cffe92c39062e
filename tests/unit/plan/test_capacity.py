"""The host estimate of docs/scaling.md (tasks/plan/capacity.py) on synthetic timelines."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.plan.capacity import cell_durations, hosts_needed, run_matrix


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
