"""Missing cells (tasks/regress/missing.py): a planned cell's outcome, and the cells ok on the previous night that are
gone tonight: missing (and still missing the night after, since the night it went), or removed from the plan once."""

from __future__ import annotations

from tasks.plan.cells import Cell, Session
from tasks.regress.missing import (
    BY_DESIGN,
    HOST_SKIP,
    MISSING,
    OVERDUE,
    REMOVED,
    UNSPOKEN,
    Night,
    cell_outcome,
    cell_outcomes,
    missing_records,
)

CONFIG = {"suite": "smoke", "servers": ["custom", "triton"], "concurrencies": [1]}


def cell(server: str = "custom", load: float = 1.0, **kw) -> Cell:
    return Cell("mlp", "onnx", server, "process", "cpu", 1, kw.pop("mode", "concurrency"), load, **kw)


def row(c: Cell, status: str, reason: str | None = None, **kw) -> dict:
    return {"model": c.model, "format": c.format, "server": c.server, "launcher": c.launcher, "device": c.device,
            "batch_size": c.batch_size, "mode": c.mode,
            "load": c.load, "protocol": c.protocol, "status": status, "reason": reason, **kw}


def night(run_id: str, date: str, cells_rows: list[tuple[Cell, list[dict]]], config: dict = CONFIG,
          missing: dict | None = None) -> Night:
    session = Session("s", "mlp", "onnx", "custom", tuple(c for c, _ in cells_rows))
    rows = [r for _, rs in cells_rows for r in rs]
    return Night(run_id, date, config, cell_outcomes([session], rows), missing or {})


def test_a_cells_outcome_reads_its_rows_and_whose_reason_a_skip_is():
    c = cell()
    assert cell_outcome(c, [row(c, "ok")]).status == "ok"
    failed = cell_outcome(c, [row(c, "failed", "server died")])
    assert (failed.status, failed.reason) == ("failed", "server died")
    assert cell_outcome(c, [row(c, "contended", "busy host")]).status == "contended"
    assert cell_outcome(c, [row(c, "skipped", "TensorRT needs an NVIDIA GPU")]).skip == HOST_SKIP
    unspoken = cell(wire="grpc", skip="custom does not speak grpc")
    assert cell_outcome(unspoken, [row(unspoken, "skipped", unspoken.skip)]).skip == UNSPOKEN
    burst = cell(mode="overload", load=3.0)
    assert cell_outcome(burst, [row(burst, "skipped", "not the fastest wire")]).skip == BY_DESIGN
    sweep = cell(mode="concurrency-sweep", load=4.0)
    probe = {**row(sweep, "failed", "timeouts", beyond_capacity=True), "mode": "concurrency", "load": 4.0}
    ok = {**row(sweep, "ok"), "mode": "concurrency", "load": 2.0}
    assert cell_outcome(sweep, [ok, probe]).status == "ok"  # a probe beyond capacity is the sweep's answer
    assert cell_outcome(c, []).status == "failed"  # planned and never measured


def test_a_cell_dropped_with_the_same_params_is_missing_and_stays_missing_since_its_night():
    kept, dropped = cell("custom"), cell("triton")
    first = night("n1", "2026-02-01T02:00:00+00:00", [(kept, [row(kept, "ok")]), (dropped, [row(dropped, "ok")])])
    second = night("n2", "2026-02-02T02:00:00+00:00", [(kept, [row(kept, "ok")])])
    (record,) = missing_records(second, first)
    assert (record["verdict"], record["cell_id"], record["server"]) == (MISSING, dropped.cell_id, "triton")
    assert record["since"] == second.logical_date and record["reference_run_id"] == "n1"
    assert "not in tonight's plan" in record["reason"]
    second = Night(**{**second.__dict__, "missing": {record["cell_id"]: record}})
    third = night("n3", "2026-02-03T02:00:00+00:00", [(kept, [row(kept, "ok")])])
    (again,) = missing_records(third, second)
    assert again["verdict"] == MISSING and again["since"] == second.logical_date  # the night it went missing
    back = night("n4", "2026-02-04T02:00:00+00:00", [(kept, [row(kept, "ok")]), (dropped, [row(dropped, "ok")])])
    assert missing_records(back, Night(**{**third.__dict__, "missing": {again["cell_id"]: again}})) == []


def test_a_cell_removed_with_the_params_is_said_once():
    kept, dropped = cell("custom"), cell("triton")
    first = night("n1", "2026-02-01T02:00:00+00:00", [(kept, [row(kept, "ok")]), (dropped, [row(dropped, "ok")])])
    fewer = {**CONFIG, "servers": ["custom"]}
    second = night("n2", "2026-02-02T02:00:00+00:00", [(kept, [row(kept, "ok")])], fewer)
    (record,) = missing_records(second, first)
    assert record["verdict"] == REMOVED and "servers changed since n1" in record["reason"]
    second = Night(**{**second.__dict__, "missing": {record["cell_id"]: record}})
    assert missing_records(night("n3", "2026-02-03T02:00:00+00:00", [(kept, [row(kept, "ok")])], fewer),
                           second) == []


def test_a_skip_the_host_causes_is_no_record_one_it_does_not_is():
    c = cell("triton")
    first = night("n1", "2026-02-01T02:00:00+00:00", [(c, [row(c, "ok")])])
    host = night("n2", "2026-02-02T02:00:00+00:00", [(c, [row(c, "skipped", "needs Docker")])])
    assert missing_records(host, first) == []
    wire = cell("triton", skip="triton no longer speaks it")
    lost = night("n2", "2026-02-02T02:00:00+00:00", [(wire, [row(wire, "skipped", wire.skip)])])
    (record,) = missing_records(lost, first)
    assert record["verdict"] == MISSING and "no longer speaks it" in record["reason"]
    assert missing_records(first, None) == []  # a first night has nothing to miss


def test_a_deferred_cell_is_not_missing_until_past_its_k_then_overdue_every_night():
    kept, later = cell("custom"), cell("triton")
    first = night("n1", "2026-02-01T02:00:00+00:00", [(kept, [row(kept, "ok")]), (later, [row(later, "ok")])])
    session = Session("s", "mlp", "onnx", "custom", (kept,))
    deferred = {"cell_id": later.cell_id, "model": "mlp", "format": "onnx", "server": "triton",
                "reason": "the night's budget", "last_run_id": "n1", "last_logical_date": first.logical_date}
    within = Night("n2", "2026-02-02T02:00:00+00:00", CONFIG,
                   cell_outcomes([session], [row(kept, "ok")], [{**deferred, "overdue": False}]))
    assert within.outcomes[later.cell_id].status == "deferred"
    assert missing_records(within, first) == []  # within its K: a later night measures it
    past = Night("n3", "2026-02-03T02:00:00+00:00", CONFIG,
                 cell_outcomes([session], [row(kept, "ok")], [{**deferred, "overdue": True}]))
    (record,) = missing_records(past, within)
    assert (record["verdict"], record["cell_id"], record["reference_run_id"]) == (OVERDUE, later.cell_id, "n1")
    assert record["since"] == past.logical_date and "past its coverage K" in record["reason"]
    still = Night("n4", "2026-02-04T02:00:00+00:00", CONFIG, past.outcomes)
    (again,) = missing_records(still, Night(**{**past.__dict__, "missing": {later.cell_id: record}}))
    assert again["verdict"] == OVERDUE and again["since"] == past.logical_date  # overdue since the night it went
