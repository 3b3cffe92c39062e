"""How sure a published night's answers are: the share of its bound decisions ("p99 within X ms") that are
`undecided`, as published and as its points' first looks alone would have left them (one look each, nothing
lengthened: the night without `max_point_s`), the time its longer looks took, and each model's answers under the
run's own bound (fastest and cheapest stack) with the decisions they rest on.

    .venv/bin/python benchmarks/night_claims.py demo-results/run=<run id>     # a run `make demo` copied out

The folder is a published run's objects (results.parquet, plan.json, manifest.json, logs/sessions.json). The night
without its longer looks is estimated from the same night: its length less the longer looks' time, its decisions
from each first look's counts (`decide_counts` at one look). A rate search's longer look is at a point of its own,
10 % below its highest passing rate (tasks/loadgen/sweep.py), which a night without them would not run: that
point's first look counts in the looks' time (warm-up plus its duration) and not among the first looks' decisions.
Figures, not pass/fail: docs/measuring.md#confidence quotes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.core.confidence import decide_counts  # noqa: E402
from tasks.report.recommend import recommend  # noqa: E402


def first_looks(sessions: list[dict], warmup_s: float) -> tuple[dict[str, dict], float]:
    """Each lengthened point's first look (by the point's cell id) and the seconds all longer looks took (with a
    rate search's the first look of their own point)."""
    looks, seconds = {}, 0.0
    for session in sessions:
        for cell_id, events in (session.get("cells") or {}).items():
            for look in events.get("lengthen") or []:
                seconds += (look.get("end") or look["begin"]) - look["begin"]
                if is_claim_point(cell_id):
                    seconds += warmup_s + float(look.get("first_duration_s") or 0.0)
                if "not_counted" not in look:
                    looks[cell_id] = look
    return looks, seconds


def is_claim_point(cell_id: str) -> bool:
    """Whether a point's cell id is a rate search's (`...rate-search...@<rate>`): its longer looks are at points of
    their own (tasks/loadgen/sweep.py)."""
    return ".rate-search" in cell_id.rpartition("@")[0]


def point_key(cell_id: str) -> tuple:
    """A point's cell id (tasks/plan/cells.py: model.format.server.launcher.device.bN.mode[.wire]@load) as the
    fields a published row carries of it: rows do not carry the id."""
    cell, _, load = cell_id.rpartition("@")
    parts = cell.split(".")
    wire = parts[-1] if parts[-1] in ("binary", "grpc") else "json"
    mode = next(p for p in parts if p.startswith(("concurrency", "rate", "overload")))
    return (".".join(parts[:3]), wire, "rate" if mode.startswith("rate") else mode.split("-")[0], float(load))


def row_key(row: dict) -> tuple:
    return (f"{row['model']}.{row['format']}.{row['server']}", row.get("wire") or "json", row.get("mode"),
            float(row["load"]))


def decisions(rows: list[dict], looks: dict[str, dict], confidence_pct: float) -> tuple[Counter, Counter]:
    """(published verdicts, one-look verdicts of the first looks) over every ok row and judged bound."""
    published, first = Counter(), Counter()
    by_point = {point_key(cell_id): look for cell_id, look in looks.items()}
    for row in rows:
        if row.get("status") != "ok" or not row.get("p99_bounds"):
            continue
        look = by_point.get(row_key(row)) if row.get("lengthened") else None
        if row.get("lengthened") and look is None:
            raise SystemExit(f"no first look found for the lengthened row {row_key(row)}")
        counts = json.loads(look["first_bounds"]) if look else json.loads(row["p99_bounds"])
        count = int(look["first_requests"] if look else row["latency_samples"])
        claim_point = look is not None and row.get("mode") == "rate"  # a point only the longer looks ran
        for bound, decided in json.loads(row["p99_bounds"]).items():
            published[(float(bound), decided["verdict"])] += 1
            if claim_point:
                continue
            before = counts[bound]
            verdict = decide_counts(count, float(before["effective"]), int(before["exceed"]), float(bound),
                                    confidence_pct=confidence_pct, looks=1).verdict
            first[(float(bound), verdict)] += 1
    return published, first


def shares(counter: Counter) -> dict[float, str]:
    out = {}
    for bound in sorted({b for b, _ in counter}):
        total = sum(n for (b, _), n in counter.items() if b == bound)
        undecided = counter[(bound, "undecided")]
        out[bound] = f"{undecided}/{total} undecided ({100 * undecided / total:.0f} %)"
    return out


def _claim(point: dict | None) -> str:
    """An answer's point (tasks/report/recommend.py ranks only points whose bound holds)."""
    if point is None:
        return "none holds"
    return (f"{point['stack']} over {point['wire'] or 'json'} at {point['mode']} {point['load']:g}: "
            f"{point['throughput_rps']:.2f} req/s, p99 {point['latency_ms_p99']:.0f} ms of {point['latency_samples']} "
            "requests, holds")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    import pyarrow.parquet as pq  # lazy: only this script reads parquet directly

    rows = pq.read_table(args.run_dir / "results.parquet").to_pylist()
    config = json.loads((args.run_dir / "plan.json").read_text())["config"]
    manifest = json.loads((args.run_dir / "manifest.json").read_text())
    sessions = json.loads((args.run_dir / "logs" / "sessions.json").read_text())
    looks, look_s = first_looks(sessions, float(config.get("warmup_s") or 0.0))
    started = min(datetime.fromisoformat(r["started_at"]) for r in rows)
    night_s = (datetime.fromisoformat(manifest["published_at"]) - started).total_seconds()
    published, first = decisions(rows, looks, float(config.get("confidence_pct") or 95.0))
    lengthened = sum(1 for r in rows if r.get("lengthened"))
    print(f"run {manifest['run_id']}: {len(rows)} rows, {lengthened} lengthened; night {night_s / 60:.1f} min, "
          f"longer looks {look_s / 60:.1f} min; without them {(night_s - look_s) / 60:.1f} min "
          f"(x{night_s / max(1.0, night_s - look_s):.2f})")
    print("bound   first looks alone (one look)          as published")
    before, after = shares(first), shares(published)
    for bound in sorted(after):
        print(f"{bound:>6g}  {before.get(bound, '-'):<38} {after[bound]}")
    bound = config.get("p99_bound_ms")
    for record in recommend([r for r in rows if r.get("role") != "control"], (bound,)) if bound is not None else ():
        print(f"{record['model']} within {bound:g} ms ({record['meeting']} of {record['stacks']} stacks hold it): "
              f"fastest {_claim(record['best'])}; cheapest {_claim(record['cheapest'])}; undecided: "
              + (", ".join(f"{u['stack']} ({u['requests']} requests, {u['exceed']} slower, {u['more_requests']} "
                           "more)" for u in record["undecided"]) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
