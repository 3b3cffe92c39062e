"""A stack's capacity for the overload phase: its fastest wire's best ok point; other wires are skipped."""

from __future__ import annotations

from tasks.measure.overload import session_capacity, slower_wire_reason


def test_a_stack_is_overloaded_on_its_fastest_wire_only():
    from tasks.plan.cells import Cell

    def steady(protocol: str, rps: float, status: str = "ok", batch: int = 1) -> dict:
        return {"status": status, "mode": "concurrency", "batch_size": batch, "protocol": protocol,
                "throughput_rps": rps}

    rows = [steady("kserve_v2_rest", 900.0), steady("kserve_v2_binary", 1400.0), steady("kserve_v2_binary", 1200.0),
            steady("kserve_v2_rest", 5000.0, status="contended"), steady("kserve_v2_rest", 9000.0, batch=8)]

    def cell(protocol: str) -> Cell:
        return Cell("mlp", "onnx", "custom", "process", "cpu", 1, "overload", 3.0, protocol)

    assert session_capacity(rows, cell("kserve_v2_binary")) == 1400.0  # its wire's best ok point at its batch size
    assert slower_wire_reason(rows, cell("kserve_v2_binary")) is None
    assert session_capacity(rows, cell("kserve_v2_rest")) == 900.0  # the contended 5,000 is not the stack's
    reason = slower_wire_reason(rows, cell("kserve_v2_rest"))
    assert reason.startswith("overload is measured on the stack's fastest wire only: kserve_v2_binary at 1400.0")
    assert slower_wire_reason(rows, cell("kserve_v2_grpc")) is None  # no capacity: the cell says so itself
