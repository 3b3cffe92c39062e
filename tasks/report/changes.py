"""The report's changes since the previous comparable run: the cells side by side (`trend.json`'s changes), the
trend of each model's best figures over the nights, and the regression check as it judged tonight (duets)."""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.verdicts import duet_figures, is_not_settled, is_regression, size_alone
from tasks.regress.size_verdict import SCOPE
from tasks.report.formatting import REASON_CHARS, cell_value, label, unit
from tasks.report.plots import Series, line_chart
from tasks.report.templating import render

CHANGE_METRICS = ("throughput_rps", "latency_ms_p99")


def _change(entry: dict | None) -> dict | None:
    """A metric's change between the two runs: its text, its class (better/worse beyond noise), its mark."""
    if not entry or entry.get("a") is None and entry.get("b") is None:
        return None
    text = f"{cell_value(entry['a'])} → {cell_value(entry['b'])}"
    if entry.get("change_pct") is not None:
        text += f" ({entry['change_pct']:+.1f} %)"
    if entry.get("beyond_noise"):
        return {"text": text, "cls": entry["direction"], "mark": "▲" if entry["direction"] == "better" else "▼",
                "noise_unknown": False}
    unknown = entry.get("beyond_noise") is None and entry.get("change_pct") is not None
    return {"text": text, "cls": "", "mark": None, "noise_unknown": unknown}


def changes_table(changes: list[dict], metrics: tuple[str, ...] = CHANGE_METRICS) -> Markup:
    """The side-by-side table of `tasks.regress.compare.compare_rows` records."""
    cells = [{"label": c["label"], "status_a": c["status_a"] or "–", "status_b": c["status_b"] or "–",
              "metrics": [_change(c["metrics"].get(m)) for m in metrics], "verdict": c["verdict"],
              "notes": "; ".join(c["notes"])} for c in changes]
    return render("changes_table.html", metrics=metrics, cells=cells)


def _trend_plots(trend: dict) -> list[Markup]:
    nights = trend.get("nights") or []
    ticks = [(float(i), str(n["logical_date"])[5:10]) for i, n in enumerate(nights)]
    plots = []
    for model in sorted({m for n in nights for m in n["models"]}):
        for key, stack_key, metric in (("best_throughput_rps", "best_throughput_stack", "throughput_rps"),
                                       ("best_p99_ms", "best_p99_stack", "latency_ms_p99")):
            seen = [(i, n) for i, n in enumerate(nights) if n["models"].get(model, {}).get(key) is not None]
            points = tuple((float(i), n["models"][model][key]) for i, n in seen)
            labels = tuple(f"{n['run_id']} ({n['models'][model][stack_key]})" for _, n in seen)
            what = "best throughput" if metric == "throughput_rps" else "best p99"
            plots.append(line_chart(f"trend-{metric}", f"{model}: {what} of any stack, last {len(nights)} runs",
                                    [Series(model, points, labels)], "run (logical date)",
                                    f"{label(metric)} ({unit(metric)})", x_ticks=ticks))
    return plots


def _where(record: dict) -> str:
    return "/".join(str(record.get(k)) for k in ("model", "format", "server", "load") if record.get(k) is not None)


VERDICT_TEXT = {"regression_uncertain": "regression, size uncertain", "improvement_uncertain": "improvement, size "
                "uncertain", "no_change": "no change", "undecided": "not settled: undecided",
                "disputed": "not settled: disputed (the duet said no change)"}


def _duet(record: dict) -> dict:
    """One duet record's row: the size alone (the ruler) with its interval, the duet's ratio (the detector), the
    verdict and its cause. Records of runs before sizes existed carry the duet's figures as `ratio`."""
    note = "; ".join(record.get("changes") or []) + f" ({record.get('reference_run_id')})"
    if record.get("verdict") == "unconfirmed" or str(record.get("verdict")).endswith("_uncertain") \
            or is_not_settled(record.get("verdict")) or record.get("left"):
        note = f"{note}: {record.get('reason')}"
    (ratio, ci), size, alone = duet_figures(record), record.get("size") or {}, size_alone(record)
    size_ci = record.get("change_ci") if "duet_ratio" in record else None
    confidence = (size.get("verdict_confidence_pct") or size.get("confidence_pct")) if size_ci else None
    verdict = record.get("verdict")
    return {"where": _where(record), "metric": record["metric"], "verdict": VERDICT_TEXT.get(verdict, verdict),
            "bad": is_regression(verdict),
            "size": f"{alone[0]:+.1f} %" if alone else "–",
            "size_ci": (f"{size_ci[0]:+.1f} to {size_ci[1]:+.1f} %" + (f" ({confidence:.4g} %)" if confidence else ""))
            if size_ci else "–",
            "rounds": cell_value(size.get("rounds")) if size else "–",
            "ratio": (f"×{ratio:.3f}" + (f" ({ci[0]:.3f}–{ci[1]:.3f})" if ci else "")) if ratio else "–",
            "pairs": cell_value((record.get("duet") or {}).get("pairs")), "cause": record.get("cause") or "–",
            "note": note[:REASON_CHARS]}


def _side_by_side(regressions: dict) -> dict:
    """The regression check as it judged tonight: each changed cell beside its reference (a duet), the unchanged
    cells, tonight's A/A duet (the duet's own noise), and how the host moved (the control's history)."""
    records = regressions.get("records", [])
    duets = [r for r in records if r.get("kind") == "duet"]
    aa = regressions.get("aa") or {}
    environment = [r for r in records if r.get("kind") == "environment" and r.get("verdict") == "environment"]
    control = regressions.get("control") or {}
    drift = ((control.get("drift") or {}).get("throughput_rps") or {}).get("change_pct")
    return {"flagged": sum(is_regression(r.get("verdict")) for r in duets), "duets": [_duet(r) for r in duets],
            "not_settled": sum(is_not_settled(r.get("verdict")) for r in duets),
            "left": sum(bool(r.get("left")) for r in duets),
            "unchanged": sum(r.get("kind") == "inputs" and r.get("verdict") == "no_change" for r in records),
            "new": sum(r.get("kind") == "inputs" and r.get("verdict") == "no_history" for r in records),
            "duets_run": len(regressions.get("duets") or []), "scope": SCOPE,
            "aa_pairs": len((aa.get("measured") or {}).get("pairs") or []),
            "aa_noise": ", ".join(f"{m} {100 * v:.1f} %" for m, v in sorted(aa["noise"].items()))
            if aa.get("noise") else None,
            "control": str(control.get("name")),
            "moved": ", ".join(f"{r['metric']} {r['change_pct']:+.1f} %" for r in environment
                               if r.get("change_pct") is not None) if environment else None,
            "drift": None if drift is None else f"{drift:+.1f}"}


def changes_section(trend: dict | None, regressions: dict) -> Markup:
    """The section: what changed since the previous comparable run (none without trend.json) and the regressions."""
    context: dict = {"trend": trend is not None, "regressions": _side_by_side(regressions)}
    if trend is not None:
        on = trend["comparable_on"]
        changes = trend.get("changes") or []
        prev = trend.get("previous")
        context.update(
            suite=on["suite"] or "none", host=on["host"], pipeline=on["versions"]["pipeline_version"],
            versions="; ".join(f"{s} {v}" for s, v in on["versions"]["servers"].items()) or "–",
            previous=None if not prev else {"run_id": prev["run_id"], "date": str(prev["logical_date"])[:19],
                                            "status": prev["status"], "git": str(prev["git_sha"])[:12]},
            previous_note=trend.get("previous_note"), changes=len(changes),
            changed=sum(c["verdict"] != "same" for c in changes), worse=sum(c["verdict"] == "worse" for c in changes),
            changes_table=changes_table(changes) if changes else Markup(""), plots=_trend_plots(trend))
    return render("changes.html", **context)
