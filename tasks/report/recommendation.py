"""The report's recommendation section: per model and batch size, one row per answer of `tasks.report.recommend`
(the fastest stack within each p99 bound, the runner-up and the margin, whether beyond noise, the cheapest stack,
and where the run measured overload the stack that degrades best), then how every stack behaved under overload."""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.confidence import DECISION_PCT
from tasks.core.metrics import number
from tasks.report.formatting import (
    DASH,
    bounds_text,
    cell_value,
    count_or_figure,
    format_value,
    latency_text,
    load_text,
    unit,
)
from tasks.report.overload import burst_view, overload_glance
from tasks.report.recommend import bounds_for, group_by_answer, recommend
from tasks.report.templating import render


def noise_text(record: dict) -> str:
    """Whether the margin is beyond noise, with the figures it was judged on."""
    basis, verdict = record.get("noise"), record["beyond_noise"]
    if record["runner_up"] is None:
        return "–"
    if basis is None or verdict is None:
        return "unknown (no spread published)"
    rps = unit("throughput_rps")
    if basis.get("between_sessions") is not None:
        sessions = (f"; beside the night's A/A duet's spread between sessions, "
                    f"{100 * basis['between_sessions']:.1f} % a ratio (the margin must exceed twice it: "
                    f"{'it does' if basis['beyond_sessions'] else 'it does not'})")
    else:
        sessions = "; no A/A duet measured the noise between sessions tonight"
    if basis["method"] == "intervals":
        (a_lo, a_hi), (b_lo, b_hi) = basis["a"], basis["b"]
        figures = (f"95 % intervals {format_value(b_lo)}–{format_value(b_hi)} (best) and "
                   f"{format_value(a_lo)}–{format_value(a_hi)} {rps} (runner-up)")
        overlap = "do not overlap" if basis["within_point"] else "overlap"
        return f"{'yes' if verdict else 'no, within noise'}: the {figures} {overlap}{sessions}"
    figures = (f"the difference {format_value(basis['delta'])} {rps} against 2·sqrt((cv₁·x₁)² + (cv₂·x₂)²) = "
               f"{format_value(basis['threshold'])} {rps} (CVs {100 * basis['cv_b']:.0f} % and "
               f"{100 * basis['cv_a']:.0f} %)")
    return f"{'yes' if verdict else 'no, within noise'}: {figures}{sessions}"


def _noise_short(record: dict) -> str:
    """"yes" or "no, within noise" in the table; the figures it was judged on (`noise_text`) go on hover."""
    if record["runner_up"] is None:
        return "–"
    if record.get("noise") is None or record["beyond_noise"] is None:
        return "unknown"
    return "yes" if record["beyond_noise"] else "no, within noise"


def _point_view(point: dict | None) -> dict | None:
    if point is None:
        return None
    return {"stack": point["stack"], "wire": point.get("wire"), "throughput": cell_value(point["throughput_rps"]),
            "p99": latency_text(point, "latency_ms_p99"), "requests": count_or_figure(point.get("latency_samples")),
            "load": load_text(point["mode"], point["load"]), "when": when_text(point)}


def when_text(point: dict) -> str | None:
    """"measured 2 nights ago (2026-12-05)" for a point carried from an earlier night (None: tonight's)."""
    ago = point.get("nights_ago") or 0
    if not ago:
        return None
    return f"measured {ago} night{'s' if ago != 1 else ''} ago ({str(point.get('logical_date') or '')[:10]})"


def between_text(between: dict | None) -> str | None:
    """"undecided between A and B (measured 2 nights apart)": an answer across nights within their noise."""
    if not between:
        return None
    apart = between["nights_apart"]
    return (f"undecided between {between['a']} and {between['b']} (measured {apart} night{'s' if apart != 1 else ''} "
            "apart, within the host's between-night noise)")


def _cost_view(point: dict | None, basis: str | None) -> dict | None:
    """The cheapest point: its stack and wire, its cost on the record's basis, and its core-seconds per 1,000."""
    if point is None or basis is None:
        return None
    return {"stack": point["stack"], "wire": point.get("wire"), "cost": format_value(point[basis]),
            "unit": unit(basis), "load": load_text(point["mode"], point["load"]),
            "core_s": None if basis == "server_core_s_per_1k" else cell_value(point["server_core_s_per_1k"]),
            "when": when_text(point)}


def _cheaper(record: dict) -> dict:
    """How much more the next cheapest stack costs, in % of the cheapest ("X costs 127.5 % more")."""
    if record.get("cheapest") is None:
        return {"text": DASH, "than": None}
    if record.get("cheapest_runner_up") is None:
        return {"text": "only stack", "than": None}
    if record.get("cheapest_undecided_between"):
        return {"text": between_text(record["cheapest_undecided_between"]), "than": None}
    margin = record.get("cheapest_margin_pct")
    if margin is None:
        return {"text": DASH, "than": None}
    return {"text": f"{record['cheapest_runner_up']['stack']} costs {margin:.1f} % more", "than": None}


def undecided_text(record: dict) -> str:
    """The stacks that were neither ranked nor ruled out under the bound, and why: their best undecided point's
    requests, how many were slower than the bound, and how many more would decide it."""
    parts = []
    unrecorded = [u["stack"] for u in record.get("undecided", []) if not u.get("recorded", True)]
    for u in record.get("undecided", []):
        if not u.get("recorded", True):
            continue
        more = (f"about {u['more_requests']:,} more would decide it" if u.get("more_requests") is not None
                else "no count at this share would decide it")
        parts.append(f"{u['stack']}: {u['exceed']} of {count_or_figure(u.get('requests'))} requests slower at "
                     f"{load_text(u['mode'], u['load'])}, {more}")
    if unrecorded:
        parts.append(f"no decision recorded for {', '.join(unrecorded)} (rows published before schema 1.8)")
    return "; ".join(parts) or DASH


def _ahead(record: dict) -> dict:
    """How far ahead under overload the stack that degrades best is."""
    runner, margin = record.get("degrades_runner_up"), record.get("overload_margin")
    if runner is None or margin is None:
        return {"text": "only stack", "than": None}
    if margin["kind"] == "recovery_s":
        return {"text": f"{format_value(margin['value'])} s sooner", "than": runner["stack"]}
    if margin["kind"] == "not_recovered":
        return {"text": f"{runner['stack']} did not recover", "than": None}
    return {"text": f"{margin['value']:+.0f} points of capacity", "than": runner["stack"]}


def _answer_view(record: dict) -> dict:
    margin = "only stack" if record["runner_up"] is None else (
        f"+{record['margin_pct']:.1f} %" if record["margin_pct"] is not None else "–")
    if record.get("undecided_between"):
        margin = f"{margin}: {between_text(record['undecided_between'])}"
    top = record.get("degrades_best")
    return {"model": record["model"], "batch": record["batch_size"], "bounds": bounds_text(record["bounds"]),
            "stacks": record["stacks"], "best": _point_view(record["best"]),
            "runner_up": _point_view(record["runner_up"]),
            "margin": margin, "noise": _noise_short(record), "noise_text": noise_text(record),
            "cheapest": _cost_view(record.get("cheapest"), record.get("cost_basis")), "cheaper": _cheaper(record),
            "degrades": None if top is None else burst_view(top), "ahead": None if top is None else _ahead(record),
            "caveats": "; ".join(record["caveats"]), "undecided": undecided_text(record)}


def recommendation_section(rows: list[dict], p99_bound_ms: float | None = None,
                           between_sessions: float | None = None) -> Markup:
    """The section: its table of answers (the explanation after it: the first screen shows the answers);
    `between_sessions`: the night's A/A duet's spread of a throughput log ratio (tasks/regress/duet_verdict.py)."""
    records = group_by_answer(recommend(rows, bounds_for(p99_bound_ms), between_sessions))
    run_bound = None if number(p99_bound_ms) is None else f"{p99_bound_ms:,g}"
    confidence = next((number(r.get("p99_bound_confidence_pct")) for r in rows
                       if number(r.get("p99_bound_confidence_pct")) is not None), DECISION_PCT)
    return render("recommendation.html", answers=[_answer_view(r) for r in records], run_bound=run_bound,
                  confidence=f"{confidence:g} %",
                  overload=any(r.get("degrades_best") for r in records),
                  glance=overload_glance(rows) if records else Markup(""))
