"""The article's "which should I choose", made of one run's numbers: per model, the best stack under a p99 bound.

The report hands it each stack's rows over that stack's best wire (`tasks.report.wires.best_wire_rows`), so a
stack is ranked as its users would serve it, not by its JSON parser.

A stack is a server serving one format (`triton/onnx`). For each model and batch size and each bound of
`bounds_for(run's p99_bound_ms)` (the judged bounds and the run's own bound; None: no bound), a stack's figure is
its highest throughput among its ok rows where "p99 within the bound" holds: a decision taken on the count of
requests slower than the bound (tasks/core/confidence.py), not a comparison of a figure with it (any load point of
the run: the sweep's points, the listed loads, the rate search's rates). A stack with ok rows none of which holds,
some undecided (too few requests to tell), is listed in the record's `undecided` with how many more requests its
best such point would need: it is neither ranked nor ruled out. Contended rows (measured while other work took the
host) are never ranked. The best stack is the one with the highest such throughput; the margin to the runner-up is in
percent of the runner-up, `beyond_noise` says whether the two rows' own noise (`tasks.regress.compare.beyond_noise`)
is smaller and `noise` holds the figures it was judged on. `group_by_answer` folds the bounds with the same answer
into one record listing them.

A night with a budget ranks the cells it deferred on their last figures (carried rows, each with its `nights_ago`;
tonight's rows have none): where the fastest and the runner-up (or the two cheapest) were measured on different
nights, the record says how many nights apart (`nights_apart`), and where their margin lies within the host's
between-night noise (BETWEEN_NIGHTS_NOISE, on the log scale) it is `undecided_between` the two, not an answer.

Beside the fastest, each record names the cheapest stack within the bound (`cheapest_per_stack`: each stack's
cheapest ok point whose p99 stays within it, by `cost_basis`) and its margin: how much more the runner-up costs,
in % of the cheapest. The cost read is the price of a million inferences where the run was given prices, else the
server's CPU-core-seconds per 1,000 inferences (tasks/core/cost.py); a GPU point without a price has no
comparable cost and is not ranked on cost.

And, where the run measured overload (Param overload), the stack that degrades best (`degrades_per_stack`): at the
highest burst every stack ran (3x its own capacity), the one that recovered, soonest; among those that did not,
the one that still served most of its capacity during the burst (`goodput_pct`); a stack whose server died is
never it. Its margin (`overload_margin`) is the runner-up's later recovery in seconds, that the runner-up did not
recover, or the goodput in points of capacity. Overload does not depend on the p99 bound: each bound's record
holds the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tasks.core.confidence import judged_bounds, row_decision, row_verdict
from tasks.core.metrics import number
from tasks.core.results import is_overload
from tasks.plan.candidates import BETWEEN_NIGHTS_NOISE
from tasks.regress.compare import NOISE_SIGMAS, beyond_noise, noise_basis


def bounds_for(p99_bound_ms: float | None) -> tuple[float | None, ...]:
    """The judged bounds with the run's own `p99_bound_ms` among them (the nightly suite's 1,000 ms), in order, no
    bound last."""
    return (*judged_bounds(number(p99_bound_ms)), None)


def stack_of(row: dict) -> str:
    return f"{row.get('server')}/{row.get('format')}"


def ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") == "ok" and number(r.get("throughput_rps")) is not None]


def _best_of_each_stack(rows: list[dict], p99_bound_ms: float | None, key: Callable[[dict], tuple]) -> list[dict]:
    """Each stack's ok row within the bound that sorts first by `key` (rows `key` cannot rank, None, left out), the
    stacks in that order."""
    best: dict[str, dict] = {}
    for row in ok_rows(rows):
        if key(row) is None or (p99_bound_ms is not None and row_verdict(row, p99_bound_ms) != "holds"):
            continue
        stack = stack_of(row)
        if stack not in best or key(row) < key(best[stack]):
            best[stack] = row
    return sorted(best.values(), key=key)


def best_per_stack(rows: list[dict], p99_bound_ms: float | None = None) -> list[dict]:
    """Each stack's highest-throughput ok row within the bound, best stack first (ties: lower p99, name)."""
    return _best_of_each_stack(rows, p99_bound_ms, lambda r: (*_rank(r), stack_of(r)))


def cost_basis(rows: list[dict]) -> str:
    """What the cost ranking reads: `price_per_million` where any row has a price, else `server_core_s_per_1k`."""
    return "price_per_million" if any(number(r.get("price_per_million")) is not None for r in rows) else \
        "server_core_s_per_1k"


def cost_of(row: dict, basis: str) -> float | None:
    """A row's cost on `basis`; core-seconds leave a GPU row out (its GPU, the larger part, is not in them)."""
    if basis == "server_core_s_per_1k" and row.get("device") == "gpu":
        return None
    return number(row.get(basis))


def cheapest_per_stack(rows: list[dict], p99_bound_ms: float | None, basis: str) -> list[dict]:
    """Each stack's cheapest ok row within the bound on `basis`, cheapest stack first (ties: higher throughput)."""
    def key(row: dict) -> tuple[float, float, str] | None:
        cost = cost_of(row, basis)
        return None if cost is None else (cost, _rank(row)[0], stack_of(row))

    return _best_of_each_stack(rows, p99_bound_ms, key)


def _rank(row: dict) -> tuple[float, float]:
    p99 = number(row.get("latency_ms_p99"))
    return (-(number(row.get("throughput_rps")) or 0.0), p99 if p99 is not None else float("inf"))


def undecided_stacks(rows: list[dict], p99_bound_ms: float | None) -> list[dict]:
    """The stacks with ok rows none of which holds the bound and some undecided (or not decided at all: rows
    published before schema 1.8): each with its fastest such point, the requests it rests on, those slower than the
    bound and how many more would decide it."""
    if p99_bound_ms is None:
        return []
    holding = {stack_of(r) for r in ok_rows(rows) if row_verdict(r, p99_bound_ms) == "holds"}
    out: dict[str, dict] = {}
    for row in sorted(ok_rows(rows), key=_rank):
        stack = stack_of(row)
        decision = row_decision(row, p99_bound_ms)
        if stack in holding or stack in out or (decision is not None and decision["verdict"] != "undecided"):
            continue
        out[stack] = {**_point(row), "requests": row.get("latency_samples"),
                      "exceed": None if decision is None else decision["exceed"],
                      "more_requests": None if decision is None else decision["more_requests"],
                      "recorded": decision is not None}  # False: a row published before decisions (schema 1.8)
    return sorted(out.values(), key=lambda u: u["stack"])


def _point(row: dict) -> dict:
    return {"stack": stack_of(row), "server": row.get("server"), "format": row.get("format"),
            "nights_ago": row.get("nights_ago") or 0, "logical_date": row.get("logical_date"),
            "wire": row.get("wire"), "protocol": row.get("protocol"), "mode": row.get("mode"),
            "load": number(row.get("load")),
            "throughput_rps": number(row.get("throughput_rps")), "latency_ms_p99": number(row.get("latency_ms_p99")),
            "latency_ms_p99_at_least": number(row.get("latency_ms_p99_at_least")),
            "latency_samples": row.get("latency_samples"),
            "cv": number(row.get("cv")), "stable": row.get("stable"),
            "generator_saturated": row.get("generator_saturated"), "remeasured": bool(row.get("remeasured")),
            "throughput_rps_ci_low": number(row.get("throughput_rps_ci_low")),
            "throughput_rps_ci_high": number(row.get("throughput_rps_ci_high")), "windows": row.get("windows"),
            "neighbour_cpu_pct": number(row.get("neighbour_cpu_pct")),
            "server_cpu_share_pct": number(row.get("server_cpu_share_pct")),
            "server_core_s_per_1k": number(row.get("server_core_s_per_1k")),
            "gpu_s_per_1k": number(row.get("gpu_s_per_1k")),
            "price_per_million": number(row.get("price_per_million"))}


def margin_pct(better: float | None, worse: float | None, higher_is_better: bool) -> float | None:
    """How far the runner-up is behind, in % of the runner-up (higher is better) or of the winner (lower)."""
    if better is None or worse is None:
        return None
    base = worse if higher_is_better else better
    return 100.0 * abs(better - worse) / base if base else None


def recommend(rows: list[dict], bounds: tuple[float | None, ...] = bounds_for(None),
              between_sessions: float | None = None) -> list[dict]:
    """One record per (model, batch size, bound): best stack, runner-up, margin and whether beyond noise (the two
    points' own noise and, given the night's A/A spread of a throughput log ratio, `between_sessions`, twice it)."""
    records = []
    groups = sorted({(str(r.get("model")), int(r.get("batch_size") or 0)) for r in ok_rows(rows)})
    basis = cost_basis(rows)
    for model, batch in groups:
        group = [r for r in rows if str(r.get("model")) == model and int(r.get("batch_size") or 0) == batch]
        stacks = len({stack_of(r) for r in ok_rows(group)})
        for bound in bounds:
            ranked = best_per_stack(group, bound)
            record = {"model": model, "batch_size": batch, "p99_bound_ms": bound, "stacks": stacks,
                      "meeting": len(ranked), "best": None, "runner_up": None, "margin_pct": None,
                      "beyond_noise": None, "noise": None, "caveats": [], **_cheapest(group, bound, basis),
                      **_degrades(group), "undecided": undecided_stacks(group, bound)}
            if ranked:
                top = ranked[0]
                record["best"] = _point(top)
                if top.get("stable") is False:
                    record["caveats"].append("the best point was not stable")
                if top.get("generator_saturated"):
                    record["caveats"].append("the load generator may have set the pace")
                if top.get("remeasured"):
                    record["caveats"].append("the best point was re-measured (its first measurement was contended)")
            if len(ranked) > 1:
                top, runner = ranked[0], ranked[1]
                record["runner_up"] = _point(runner)
                top_rps, runner_rps = number(top.get("throughput_rps")) or 0.0, number(runner.get("throughput_rps"))
                if runner_rps:
                    record["margin_pct"] = 100.0 * (top_rps - runner_rps) / runner_rps
                record["beyond_noise"], record["noise"] = _margin_noise(runner, top, between_sessions)
                record.update(_nights_apart(record["best"], record["runner_up"], "fastest"))
            if record.get("cheapest") and record.get("cheapest_runner_up"):
                cheap = _nights_apart(record["cheapest"], record["cheapest_runner_up"], "cheapest", basis)
                record.update({f"cheapest_{k}": v for k, v in cheap.items()})
            for apart in (record.get("nights_apart"), record.get("cheapest_nights_apart")):
                if apart:
                    record["caveats"].append(f"figures measured {apart} night{'s' if apart != 1 else ''} apart")
            records.append(record)
    return records


def _nights_apart(top: dict, runner: dict, what: str, basis: str = "throughput_rps") -> dict:
    """Whether two points of an answer were measured on different nights, and whether that leaves it undecided:
    their margin within the between-night noise (BETWEEN_NIGHTS_NOISE)."""
    apart = abs((top.get("nights_ago") or 0) - (runner.get("nights_ago") or 0))
    if not apart:
        return {"nights_apart": 0, "undecided_between": None}
    a, b = number(top.get(basis)), number(runner.get(basis))
    within = bool(a and b and abs(math.log(a / b)) <= BETWEEN_NIGHTS_NOISE)
    return {"nights_apart": apart, "undecided_between": {"a": top["stack"], "b": runner["stack"], "what": what,
                                                         "nights_apart": apart} if within else None}


def _margin_noise(runner: dict, top: dict, between_sessions: float | None) -> tuple[bool | None, dict | None]:
    """Whether the fastest stack's margin is beyond noise, and the figures: beyond both points' own noise
    (`beyond_noise`: their throughput intervals, from each point's windows) and, where the night's A/A duet
    measured it, beyond twice the spread of a throughput ratio between two sessions of one stack."""
    within_point = beyond_noise("throughput_rps", runner, top)
    basis = noise_basis("throughput_rps", runner, top)
    if basis is None or within_point is None:
        return within_point, basis
    basis = {**basis, "within_point": within_point, "between_sessions": between_sessions, "beyond_sessions": None}
    if between_sessions is None:
        return within_point, basis
    top_rps, runner_rps = number(top.get("throughput_rps")), number(runner.get("throughput_rps"))
    beyond_sessions = bool(top_rps and runner_rps and abs(math.log(top_rps / runner_rps)) > NOISE_SIGMAS *
                           between_sessions)
    basis["beyond_sessions"] = beyond_sessions
    return within_point and beyond_sessions, basis


def _cheapest(group: list[dict], bound: float | None, basis: str) -> dict:
    """The cheapest stack within the bound, the next cheapest, and how much more that one costs (% of the
    cheapest)."""
    ranked = cheapest_per_stack(group, bound, basis)
    top = _point(ranked[0]) if ranked else None
    runner = _point(ranked[1]) if len(ranked) > 1 else None
    return {"cost_basis": basis, "cheapest": top, "cheapest_runner_up": runner,
            "cheapest_margin_pct": margin_pct(top[basis], runner[basis], higher_is_better=False)
            if top and runner else None}


def _answer(record: dict) -> tuple:
    def point(p: dict | None) -> tuple | None:
        return None if p is None else (p["stack"], p["mode"], p["load"])

    def burst(p: dict | None) -> tuple | None:
        return None if p is None else (p["stack"], p["overload_factor"])

    return (record["model"], record["batch_size"], point(record["best"]), point(record["runner_up"]),
            point(record.get("cheapest")), point(record.get("cheapest_runner_up")),
            burst(record.get("degrades_best")), burst(record.get("degrades_runner_up")),
            tuple(u["stack"] for u in record.get("undecided", [])))


def group_by_answer(records: list[dict]) -> list[dict]:
    """`recommend`'s records with the same answer (model, batch size, best point, runner-up point) for several bounds
    folded into one, in the order of their first bound, with `bounds` listing the bounds it holds for."""
    groups: dict[tuple, dict] = {}
    for record in records:
        key = _answer(record)
        if key in groups:
            groups[key]["bounds"].append(record["p99_bound_ms"])
        else:
            groups[key] = {**record, "bounds": [record["p99_bound_ms"]]}
    return list(groups.values())


def overload_rows(rows: list[dict]) -> list[dict]:
    """The ok overload rows (mode overload) with their class and goodput: what the overload ranking reads."""
    return [r for r in rows if r.get("status") == "ok" and is_overload(r)
            and r.get("overload_class") and number(r.get("goodput_pct")) is not None]


def _degrade_key(row: dict) -> tuple:
    recovery = number(row.get("recovery_s"))
    recovered = bool(row.get("recovered")) and recovery is not None
    p99 = number(row.get("burst_p99_ms"))
    return (0 if recovered else 1, recovery if recovered else 0.0, -(number(row.get("goodput_pct")) or 0.0),
            p99 if p99 is not None else float("inf"), stack_of(row))


def degrades_per_stack(rows: list[dict]) -> list[dict]:
    """Each stack's ok overload row at the highest burst factor every stack ran, the one that degrades best first:
    recovered before not, then sooner, then more goodput (% of capacity), then a lower p99 in the burst."""
    ok = overload_rows(rows)
    by_stack: dict[str, set[float]] = {}
    for row in ok:
        by_stack.setdefault(stack_of(row), set()).add(number(row.get("overload_factor")) or 0.0)
    if not by_stack:
        return []
    factor = min(max(factors) for factors in by_stack.values())  # the highest burst that every stack ran
    best: dict[str, dict] = {}
    for row in ok:
        if (number(row.get("overload_factor")) or 0.0) == factor:
            stack = stack_of(row)
            if stack not in best or _degrade_key(row) < _degrade_key(best[stack]):
                best[stack] = row
    return sorted(best.values(), key=_degrade_key)


def _burst_point(row: dict) -> dict:
    return {"stack": stack_of(row), "server": row.get("server"), "format": row.get("format"),
            "wire": row.get("wire"), "overload_factor": number(row.get("overload_factor")),
            "capacity_rps": number(row.get("capacity_rps")), "overload_class": row.get("overload_class"),
            "goodput_pct": number(row.get("goodput_pct")), "burst_p99_ms": number(row.get("burst_p99_ms")),
            "pre_burst_p99_ms": number(row.get("pre_burst_p99_ms")), "recovery_s": number(row.get("recovery_s")),
            "recovered": bool(row.get("recovered"))}


def overload_margin(top: dict, runner: dict) -> dict:
    """How far the runner-up degrades worse: {"kind": recovery_s | not_recovered | goodput_pct, "value": ...}."""
    if top["recovered"] and runner["recovered"]:
        return {"kind": "recovery_s", "value": runner["recovery_s"] - top["recovery_s"]}
    if top["recovered"]:
        return {"kind": "not_recovered", "value": None}
    return {"kind": "goodput_pct", "value": (top["goodput_pct"] or 0.0) - (runner["goodput_pct"] or 0.0)}


def _degrades(group: list[dict]) -> dict:
    """The stack that degrades best under overload, the runner-up and the margin (None without overload rows)."""
    ranked = [_burst_point(r) for r in degrades_per_stack(group)]
    top = ranked[0] if ranked else None
    runner = ranked[1] if len(ranked) > 1 else None
    return {"degrades_best": top, "degrades_runner_up": runner,
            "overload_margin": overload_margin(top, runner) if top and runner else None}


def cost_at_bound(rows: list[dict], p99_bound_ms: float | None) -> list[dict]:
    """Per model, batch size and stack: its cheapest ok point within the bound (`cheapest_per_stack`), with its
    core-seconds and GPU-seconds per 1,000 inferences and its price per million (None without prices). Sorted by
    model, batch, cost."""
    out = []
    basis = cost_basis(rows)
    groups = sorted({(str(r.get("model")), int(r.get("batch_size") or 0)) for r in ok_rows(rows)})
    for model, batch in groups:
        group = [r for r in rows if str(r.get("model")) == model and int(r.get("batch_size") or 0) == batch]
        for row in cheapest_per_stack(group, p99_bound_ms, basis):
            out.append({"model": model, "batch_size": batch, "p99_bound_ms": p99_bound_ms, "basis": basis,
                        **_point(row)})
    return out


def efficiency(rows: list[dict]) -> list[dict]:
    """Per model, batch size and stack, at the stack's highest-throughput point: throughput per busy CPU core
    (throughput_rps / (server_cpu_pct / 100)) and the server's memory (RSS). Sorted by model, batch, stack."""
    out = []
    groups = sorted({(str(r.get("model")), int(r.get("batch_size") or 0)) for r in ok_rows(rows)})
    for model, batch in groups:
        group = [r for r in rows if str(r.get("model")) == model and int(r.get("batch_size") or 0) == batch]
        for row in sorted(best_per_stack(group), key=stack_of):
            cpu_pct, rps = number(row.get("server_cpu_pct")), number(row.get("throughput_rps"))
            out.append({"model": model, "batch_size": batch, "stack": stack_of(row),
                        "throughput_rps": rps, "server_cpu_pct": cpu_pct,
                        "throughput_rps_per_core": rps / (cpu_pct / 100.0) if rps is not None and cpu_pct else None,
                        "server_rss_mb": number(row.get("server_rss_mb"))})
    return out
