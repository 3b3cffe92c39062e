"""Recorded duet pairs and size rounds, and measuring functions that replay them: the regression work's rules tested
on real figures with no server.

The figures are `benchmarks/data/duet_nights.json` (docs/regressions.md#what-it-finds-on-this-machine): real duets
(up to 6 pairs) and real interleaved size rounds (12) of known steps in the served MLP, and duets of changed-but-equal
nights, on the 2-core development machine. `Replay` stands in for a Night's `measure`, `measure_alone` and `build`
(tasks/regress/sides.py), handing out those pairs and rounds one call at a time and moving a clock of its own by
what each took: what a test checks is the order of the work, its stop rules and the deadline, not the measuring.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tasks.loadgen.settings import LoadSettings
from tasks.measure.duet import DuetSettings
from tasks.plan.cells import Cell, Plan, Session
from tasks.plan.config import RunConfig

RECORDED = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "duet_nights.json"


def recorded() -> dict:
    return json.loads(RECORDED.read_text())


def trial(stack: str, step: str) -> dict:
    """One recorded trial of a step: its duet's `pairs` and its size's `rounds`."""
    entry = recorded()["stacks"][stack]["trials"][step][0]
    return {"pairs": entry["duet"]["pairs"], "rounds": entry["size"]["rounds"]}


def equal_pairs(stack: str, night: int = 0) -> list[dict]:
    """The duet pairs of a recorded changed-but-equal night (the same compute in another file)."""
    return recorded()["stacks"][stack]["equal"][night]["duet"]["pairs"]


@dataclass
class FakeResult:
    data: dict

    def to_dict(self) -> dict:
        return self.data


@dataclass
class Replay:
    """Fake measuring: per duet id (a point's duet, its size `<id>.size<i>`, a part's `<id>.part<k>.<i>`) the
    pairs or rounds to hand out in turn, each taking `pair_s` or `round_s` of this replay's clock."""

    pairs: dict[str, list[dict]] = field(default_factory=dict)
    rounds: dict[str, list[dict]] = field(default_factory=dict)
    pair_s: float = 10.0
    round_s: float = 20.0
    t: float = 1_000_000.0
    calls: list[tuple[str, int]] = field(default_factory=list)  # (duet id, pair or round number), in order
    lefts: list[str] = field(default_factory=list)  # what each call's progress line would say is left

    def now(self) -> float:
        return self.t

    def measuring(self):
        """This replay as the regression work's measuring functions (tasks/regress/sides.py `Measuring`)."""
        from tasks.regress.sides import Measuring

        return Measuring(self.measure, self.measure_alone, self.build, self.now)

    def build(self, group: dict, night, *, duet_id: str | None = None, inputs=None, pairs=(2, 2)):
        point = group["points"][0]
        load = LoadSettings(mode=point["mode"], load=point["load"], batch_size=point["batch_size"], duration_s=2.0,
                            warmup_s=0.5)
        return DuetSettings(run_id="tonight", duet_id=duet_id or group["duet_id"], log_dir=Path("/nonexistent"),
                            launcher=None, loads=(load,)), "reference", "candidate"

    def measure(self, reference, candidate, settings: DuetSettings, decided=None) -> FakeResult:
        self.t += self.pair_s
        self.calls.append((settings.duet_id, settings.first_index))
        self.lefts.append(settings.progress_left)
        source = self.pairs.get(settings.duet_id) or []
        if settings.first_index >= len(source):
            return FakeResult({"pairs": [], "error": f"no recorded pair {settings.first_index}", "stop_reason": ""})
        pair = {**source[settings.first_index], "index": settings.first_index}
        return FakeResult({"pairs": [pair], "error": None, "stop_reason": "", "served": {}, "versions": {}})

    def measure_alone(self, reference, candidate, settings: DuetSettings, *, load_index: int, rounds: int,
                      budget_s: float, seed: str, first_index: int = 0) -> FakeResult:
        self.t += self.round_s
        self.calls.append((settings.duet_id + ".size", first_index))
        self.lefts.append(settings.progress_left)
        source = self.rounds.get(settings.duet_id) or []
        if first_index >= len(source):
            return FakeResult({"rounds": [], "error": f"no recorded round {first_index}", "stop_reason": ""})
        return FakeResult({"rounds": [{**source[first_index], "index": first_index}], "error": None,
                           "stop_reason": "", "seconds": self.round_s})


def cell(server: str = "custom", load: float = 1.0, mode: str = "concurrency", model: str = "mlp") -> Cell:
    return Cell(model, "onnx", server, "process", "cpu", 1, mode, load, protocol="kserve_v2_rest", wire="json")


def planned(sessions: list[Session], night: dict | None = None, run_id: str = "tonight", **config) -> dict:
    """A run's plan as the duet step reads it (no conversion, no measuring): its config, sessions and night."""
    values = {"models": ["mlp"], "servers": ["custom"], "duet_min_pairs": 3, "duet_max_pairs": 6, "size_rounds": 12,
              "size_budget_s": 600.0, "duration_s": 2.0, "warmup_s": 0.5, **config}
    plan = Plan(RunConfig.from_dict(values), [], sessions, night or {})
    return {**plan.to_dict(), "run": {"run_id": run_id, "run_dir": "/nonexistent"}}


def cell_row(c: Cell, run_id: str, inputs_sha: str, cpu_model: str = "EPYC", throughput_rps: float = 100.0) -> dict:
    """An ok row of a planned cell with an inputs record whose model file is `inputs_sha`."""
    inputs = {"model": {"sha256": inputs_sha}, "runtime": {"name": "custom"}, "serving": {}}
    return {"model": c.model, "format": c.format, "server": c.server, "launcher": c.launcher, "device": c.device,
            "batch_size": c.batch_size, "mode": c.mode, "load": c.load, "config_id": "default",
            "protocol": c.protocol, "wire": c.wire, "cpu_model": cpu_model, "cpu_count": 2, "gpu_name": None,
            "status": "ok", "run_id": run_id, "logical_date": "2026-02-02", "inputs": json.dumps(inputs),
            "inputs_sha": inputs_sha, "throughput_rps": throughput_rps}


def changed_night(cells: list[Cell], run: dict, documents: dict | None = None, reference: str = "a" * 64,
                  candidate: str = "b" * 64, cpu_model: str = "EPYC") -> dict:
    """regressions.json of a night whose cells' model changed (`reference` → `candidate`) before its duets, as the
    regression check writes it (tasks/regress/check.py): pending records, duet groups, the order, and the work
    carried from `documents` (earlier nights' regressions.json, oldest first)."""
    from tasks.regress.carry import carry_over
    from tasks.regress.check import stack_records
    from tasks.regress.night_duets import plan_duets
    from tasks.regress.order import work_order
    from tasks.regress.references import Reference

    plan = Plan.from_dict(run)
    refs = [Reference(cell_row(c, run["run"]["run_id"], candidate, cpu_model), cell_row(c, "night1", reference,
                                                                                     cpu_model),
                      "changed", [f"mlp: model sha256 {reference[:8]}… → {candidate[:8]}…"]) for c in cells]
    groups = plan_duets(refs, plan)
    carry_over(groups, documents or {})
    return {"records": stack_records(refs), "duets": groups, "aa": None,
            "order": work_order(groups, [r.row for r in refs], plan)}
