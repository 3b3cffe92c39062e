"""How budgeted nights kept their budget: per published night, each stage planned against actual, how long it took of
its budget, what it measured and deferred (by class), K, the changed cells, and what its regression work settled and
left for the next night.

    .venv/bin/python benchmarks/night_budget.py demo-results/run=<id> [demo-results/run=<id> ...]

Each folder is a published run's objects as `make demo` copies them out (night.json, plan.json, regressions.json,
manifest.json). Figures, not pass/fail: docs/measuring.md#the-nights-budget quotes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.plan.night import STAGE_NAMES, STAGE_ORDER  # noqa: E402
from tasks.plan.past_nights import published_night  # noqa: E402


def _read(folder: Path, name: str, default):
    path = folder / name
    return json.loads(path.read_text()) if path.is_file() else default


def night_summary(folder: Path) -> dict:
    """One night's budget in figures (from its published objects)."""
    manifest = _read(folder, "manifest.json", {})
    night = published_night(_read(folder, "night.json", {}), manifest.get("published_at"))
    regressions = _read(folder, "regressions.json", {})
    if not night:
        raise SystemExit(f"{folder}: no night.json (a run without night_budget_s)")
    classes = night.get("classes") or {}
    deferred = night.get("deferred") or []
    later = Counter(d.get("class") for d in deferred)
    planned = Counter(classes.values())
    verdicts = Counter(r.get("verdict") for r in regressions.get("records", []) if r.get("kind") == "duet")
    left = sum("left for the next night" in str(r.get("reason") or "") for r in regressions.get("records", []))
    return {"run_id": manifest.get("run_id"), "status": manifest.get("status"), "budget_s": night.get("budget_s"),
            "elapsed_s": night.get("elapsed_s"), "planned_s": night.get("planned_s"),
            "stages": {s: night["stages"][s] for s in STAGE_ORDER if s in (night.get("stages") or {})},
            "classes": {k: {"planned": planned[k], "deferred": later[k]} for k in planned},
            "deferred": len(deferred), "deferred_at_run": sum(d.get("when") == "measure" for d in deferred),
            "K": (night.get("coverage") or {}).get("K"), "overdue": len((night.get("coverage") or {}).get("overdue")
                                                                       or []),
            "changed": len(night.get("changed_cells") or {}), "duet_verdicts": dict(verdicts), "left": left}


def print_summary(summary: dict) -> None:
    budget, elapsed = summary["budget_s"], summary["elapsed_s"]
    print(f"night {summary['run_id']} ({summary['status']}): {elapsed / 60:.1f} of {budget / 60:.0f} min "
          f"({100 * elapsed / budget:.0f} % of its budget), planned {summary['planned_s'] / 60:.1f} min")
    print("  stage                 planned   actual")
    for stage, figures in summary["stages"].items():
        actual = figures.get("actual_s")
        shown = "       –" if actual is None else f"{actual:8.0f}"
        print(f"  {STAGE_NAMES[stage]:<20} {figures.get('planned_s', 0):8.0f} {shown}   s")
    classes = ", ".join(f"{k} {v['planned'] - v['deferred']}/{v['planned']}" for k, v in summary["classes"].items())
    print(f"  cells run/planned by class: {classes}; {summary['deferred']} deferred "
          f"({summary['deferred_at_run']} by the clock), K {summary['K']}, {summary['overdue']} overdue")
    print(f"  changed cells {summary['changed']}; duet records {summary['duet_verdicts'] or 'none'}; "
          f"{summary['left']} left for the next night")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="published run folders (demo-results/run=<id>)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    summaries = [night_summary(folder) for folder in args.runs]
    if args.json:
        print(json.dumps(summaries, indent=2))
    else:
        for summary in summaries:
            print_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
