"""The report under a trace (tasks/report/traces.py): each stack's answer is the largest speed whose bound holds,
the ranking is set against the fixed request's, and a trace's rows never enter the fixed request's answers."""

from __future__ import annotations

from tasks.report.page import render_report
from tasks.report.traces import held_speed, ranking, traces_section
from tests.claims import decided_claims
from tests.unit.report.test_page import _published
from tests.unit.report.test_recommend import steady

LABEL = "trace:synthetic-day@552396b410ac"


def replay(server: str, speed: float, p99: float, rps: float = 8.0, **fields) -> dict:
    row = steady(server, rps, p99, 50.0)
    row.update(mode="trace", load=speed, workload=LABEL, requests=488, late_starts=1, generator_late_starts=0,
               schedule_lag_ms_p99=0.4, generator_saturated=False, **decided_claims(p99, bounds=(50.0,)))
    row.update(fields)
    return row


def night() -> list[dict]:
    fixed = [steady("triton", 2000.0, 40.0, 200.0), steady("custom", 1000.0, 30.0, 50.0)]
    for r in fixed:
        r.update(decided_claims(r["latency_ms_p99"], bounds=(50.0,)))
    # the custom service keeps the trace at 4 x, Triton only at 1 x: the ranking turns over
    return fixed + [replay("triton", 1.0, 20.0), replay("triton", 2.0, 90.0), replay("custom", 1.0, 10.0),
                    replay("custom", 4.0, 45.0), replay("custom", 8.0, 300.0)]


def test_each_stacks_answer_is_the_fastest_speed_it_holds_and_the_ranking_turns_over():
    rows = night()
    assert held_speed([r for r in rows if r.get("workload") and r["server"] == "custom"], 50.0) == 4.0
    assert held_speed([r for r in rows if r.get("workload") and r["server"] == "triton"], 50.0) == 1.0
    assert held_speed([r for r in rows if r.get("workload")], None) is None  # no bound: described, not judged
    fixed = [r for r in rows if not r.get("workload")]
    traced = {"triton/onnx": [r for r in rows if r.get("workload") and r["server"] == "triton"],
              "custom/onnx": [r for r in rows if r.get("workload") and r["server"] == "custom"]}
    order = ranking(fixed, traced, 50.0)
    assert order == {"fixed": ["triton/onnx", "custom/onnx"], "trace": ["custom/onnx", "triton/onnx"],
                     "changes": True, "compared": 2}
    html = str(traces_section(rows, 50.0))
    assert "holds up to 4 × the recorded speed" in html and "The ranking changes" in html
    assert str(traces_section(fixed, 50.0)) == ""


def test_a_traces_rows_stay_out_of_the_fixed_requests_answers():
    rows = night() + [replay("kserve", 1.0, 5.0, rps=99_999.0)]  # the fastest figure of all, but a replay's
    page = render_report(_published(rows))
    recommendation = page[page.index('id=recommendation'):page.index('id=traces')]
    assert "kserve" not in recommendation and "triton/onnx" in recommendation
    assert "href='#traces'" in page and "fails at every speed measured" not in page


def test_a_replay_the_generator_did_not_keep_claims_no_speed():
    rows = [replay("custom", 1.0, 10.0), replay("custom", 8.0, 12.0, generator_saturated=True)]
    assert held_speed(rows, 50.0) == 1.0
