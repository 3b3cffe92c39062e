"""The configuration search of one server session (tasks/plan/tune.py's methods over its server's knobs): one whole
server life per configuration, every configuration's rows kept, the best one marked, and how a configuration
scores (`config_score`)."""

from __future__ import annotations

import time

from tasks.core.confidence import row_verdict
from tasks.core.errors import ConfigError
from tasks.measure.context import SessionContext
from tasks.measure.life import serve_life
from tasks.plan.tune import Trial, estimate_config_s, search
from tasks.serve.knobs import apply_config, knob_values
from tasks.serve.options import ServingOptions


def tune_session(ctx: SessionContext, base: ServingOptions, knobs: tuple) -> dict:
    """The configuration search of one server session (tasks/plan/tune.py): one whole session per configuration,
    every configuration's rows kept (its `config_id` and `config` columns), the best marked `best_config`."""
    config, session = ctx.config, ctx.session
    defaults = knob_values(base, knobs)
    outs: list[dict] = []

    def measure(values: dict, cid: str) -> Trial:
        started = time.monotonic()
        try:
            options = apply_config(base, values, knobs)
        except ConfigError as exc:  # a combination the server refuses (e.g. a preferred batch > max batch)
            return Trial(dict(values), cid, None, None, 0.0, note=f"not a valid configuration: {exc}")
        out = serve_life(ctx, options, cid, values)
        outs.append(out)
        score, p99 = config_score(out["rows"], config.p99_bound_ms)
        note = "" if score is not None else no_score_reason(out["rows"], config.p99_bound_ms)
        return Trial(dict(values), cid, score, p99, time.monotonic() - started, note=note)

    result = search(config.tune, measure, knobs, defaults, budget_s=config.tune_budget_s,
                    estimate_s=estimate_config_s(session.cells, config.warmup_s, config.duration_s, config.workers))
    rows = [row for out in outs for row in out["rows"]]
    best = result.best.config_id if result.best else None
    for row in rows:
        row["best_config"] = best is not None and row["config_id"] == best
    tuning = {"session_id": session.session_id, "server": session.server, "model": session.model,
              "format": session.format, "p99_bound_ms": config.p99_bound_ms,
              "knobs": [k.to_dict() for k in knobs], **result.to_dict()}
    return {"rows": rows, "timeline": outs[0]["timeline"] if outs else {}, "timelines": [o["timeline"] for o in outs],
            "tuning": tuning}


def _scored(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok" and r.get("throughput_rps") is not None]


def config_score(rows: list[dict], p99_bound_ms: float | None) -> tuple[float | None, float | None]:
    """(best throughput, its p99 or the p99's lower bound) among a configuration's ok points where "p99 within the
    bound" holds (a decision: tasks/core/confidence.py; an undecided point does not score)."""
    within = [r for r in _scored(rows) if p99_bound_ms is None or row_verdict(r, p99_bound_ms) == "holds"]
    if not within:
        return None, None
    top = max(within, key=lambda r: r["throughput_rps"])
    p99 = top.get("latency_ms_p99") if top.get("latency_ms_p99") is not None else top.get("latency_ms_p99_at_least")
    return float(top["throughput_rps"]), None if p99 is None else float(p99)


def no_score_reason(rows: list[dict], p99_bound_ms: float) -> str:
    """Why a configuration has no score: no ok point, or none where the bound holds (how many were undecided)."""
    scored = _scored(rows)
    undecided = sum(row_verdict(r, p99_bound_ms) == "undecided" for r in scored)
    if not scored:
        return "no ok point"
    return (f"no ok point where p99 within {p99_bound_ms:g} ms holds"
            + (f" ({undecided} of {len(scored)} undecided: too few requests)" if undecided else ""))
