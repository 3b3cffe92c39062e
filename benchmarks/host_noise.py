"""How noisy is this host within the hour, and how much of it would a second session or an interleaved control
remove? The reason regressions are judged side by side (docs/regressions.md): a 10 % step can be found within
three nights from history only where one night's figure moves by about 3 % or less when nothing changed.

    .venv/bin/python benchmarks/host_noise.py record --minutes 40 --out benchmarks/data/host_noise.csv
    .venv/bin/python benchmarks/host_noise.py analyse [--data benchmarks/data/host_noise.csv]

`record` alternates fresh server sessions of the MLP on the custom service, ONNX then TorchScript, each
measuring closed loop at concurrency 1 and 4 at the nightly suite's points (8 s, 2 s warm-up, 1 s windows),
each a fresh server session through `tasks.measure.session.measure_session`, for `--minutes`; one CSV row per cell
and session with its time, and the CPU other work used meanwhile (`tasks.measure.neighbour_probe`).

`analyse` prints, per cell, the spread of the sessions over the recording (1.4826 MAD of the log, as the
nights' benchmark), the autocorrelation of their deviations by lag in minutes (how long a slow spell lasts),
the spread of means of k consecutive sessions of the cell (what k sessions a night would leave), and the
spread of the cell over the mean of the other stack's two sessions around it (what an interleaved control
would leave). Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / "benchmarks" / "data" / "host_noise.csv"
FORMATS = ("onnx", "torchscript")  # alternated session by session
COLUMNS = ("t_s", "session", "format", "load", "throughput_rps", "latency_ms_p50", "latency_ms_p99",
           "neighbour_cpu_pct", "loadavg_1m")
METRICS = ("throughput_rps", "latency_ms_p50", "latency_ms_p99")
LAGS_MIN = (0.7, 1.4, 2.8, 5.6, 11.2)
STEP = 0.10


def noise_conf(bucket: str, duration_s: float, warmup_s: float = 0.5, window_s: float = 0.5) -> dict:
    return {"models": ["mlp"], "formats": list(FORMATS), "servers": ["custom"], "concurrencies": [1, 4],
            "duration_s": duration_s, "warmup_s": warmup_s, "window_s": window_s, "s3_bucket": bucket,
            "s3_prefix": "noise", "aws_conn_id": "serving_eval_s3", "fail_on_cell_failure": False,
            "control_cell": "none"}


def robust_spread(values: list[float]) -> float:
    """1.4826 MAD: the standard deviation of normal values, unmoved by a few outliers."""
    import numpy as np

    v = np.asarray(values)
    return 1.4826 * float(np.median(np.abs(v - np.median(v))))


def record(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tasks.measure.neighbour_probe import NeighbourProbe
    from tasks.measure.session import measure_session
    from tasks.pipeline import cleanup_run_dir, convert_in_run, run_plan, start_run, sweep_leftovers
    from tasks.store.embedded_s3 import start_embedded_s3

    conf = noise_conf("noise", args.duration_s, args.warmup_s, args.window_s)
    run_id = "host_noise"
    sessions = 0
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with start_embedded_s3() as s3, open(out_path, "w", newline="") as out:
        s3.create_bucket("noise")
        conn = s3.connection("serving_eval_s3")
        planned = start_run(conf, run_id=run_id, logical_date="2026-01-01T02:00:00+00:00", conn=conn)
        plan = run_plan(planned)
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        try:
            converted = [convert_in_run(c, planned, conn) for c in planned["conversions"]]
            started_s = time.monotonic()  # the clock of the sessions, after the conversions
            by_format = {s.format: s for s in plan.sessions}
            while time.monotonic() - started_s < 60 * args.minutes:
                session = by_format[FORMATS[sessions % len(FORMATS)]]  # a fresh server for this format's cells
                session = replace(session, session_id=f"noise{sessions}.{session.session_id}")
                with NeighbourProbe() as probe:
                    out_rows = measure_session(session, converted, planned["run"], plan.config)["rows"]
                for row in out_rows:
                    writer.writerow({"t_s": round(time.monotonic() - started_s, 1), "session": sessions,
                                     "format": row["format"], "load": row["load"],
                                     **{m: row.get(m) for m in METRICS},
                                     "neighbour_cpu_pct": round(probe.result.neighbour_cpu_pct or 0.0, 1),
                                     "loadavg_1m": round(os.getloadavg()[0], 2)})
                out.flush()
                sessions += 1
        finally:
            sweep_leftovers(run_id)
            cleanup_run_dir(run_id)
    print(f"recorded {sessions} sessions to {out_path}")
    return 0


def read_sessions(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: (v if k == "format" else float(v) if v else None) for k, v in row.items()}
                for row in csv.DictReader(f)]


def lagged_correlation(values: list[float], lag: int, other: list[float] | None = None) -> float:
    """Pearson correlation of the series with itself `lag` steps later, or with `other` (same length) `lag`
    steps later; nan when fewer than 5 pairs."""
    import numpy as np

    v = np.asarray(values)
    w = v if other is None else np.asarray(other)
    if len(v) - lag < 5 or lag < 0 or (other is None and lag == 0):
        return float("nan")
    return float(np.corrcoef(v[:len(v) - lag], w[lag:])[0, 1])


def means_of(values: list[float], k: int) -> list[float]:
    """Means of consecutive, non-overlapping runs of k values."""
    return [sum(values[i:i + k]) / k for i in range(0, len(values) - k + 1, k)]


def with_neighbours(rows: list[dict], fmt: str, load: float, metric: str) -> list[tuple[float, float]]:
    """(log of the cell, mean log of the same load's cells in the sessions right before and after it: the other
    stack, as sessions alternate) for every session of `fmt` that has both: what an interleaved control shares."""
    by_session = {(int(r["session"]), r["format"]): r for r in rows if r["load"] == load and r.get(metric)}
    out = []
    for (session, f), row in sorted(by_session.items()):
        around = [by_session.get((session + d, g)) for d in (-1, 1) for g in FORMATS if g != fmt]
        if f != fmt or any(a is None for a in around):
            continue
        out.append((math.log(row[metric]), sum(math.log(a[metric]) for a in around) / len(around)))
    return out


def analyse(args: argparse.Namespace) -> int:
    rows = read_sessions(Path(args.data))
    minutes = max(r["t_s"] for r in rows) / 60
    per_session_s = max(r["t_s"] for r in rows) / (max(r["session"] for r in rows) + 1)
    step_sessions = len(FORMATS)  # one cell is measured every len(FORMATS) sessions
    busy = sorted(r["neighbour_cpu_pct"] for r in rows)
    loads = [r["loadavg_1m"] for r in rows if r.get("loadavg_1m") is not None]  # absent from older recordings
    print(f"{len(rows)} rows, {int(max(r['session'] for r in rows)) + 1} sessions over {minutes:.0f} min "
          f"({per_session_s:.0f} s a session, a cell every {per_session_s * step_sessions / 60:.1f} min); other "
          f"work's CPU median {busy[len(busy) // 2]:.0f} %"
          + (f", load average {min(loads):.1f}-{max(loads):.1f}" if loads else ""))
    lags = {m: max(1, round(m * 60 / (per_session_s * step_sessions))) for m in LAGS_MIN}
    for metric in METRICS:
        print(f"\n{metric}: spread over the recording (1.4826 MAD, log) | autocorrelation at "
              + ", ".join(f"{m:g} min" for m in lags) + " | spread of the mean of 2 / 4 consecutive sessions | "
              "spread over the other stack's two sessions around it (their correlation)")
        for fmt in FORMATS:
            for load in sorted({r["load"] for r in rows}):
                series = [math.log(r[metric]) for r in rows if r["format"] == fmt and r["load"] == load and r[metric]]
                one = robust_spread(series)
                if len(series) < 3 or not one:
                    print(f"  {fmt}/c{load:g}: too few sessions ({len(series)})")
                    continue
                acf = ", ".join(f"{lagged_correlation(series, lag):+.2f}" for lag in lags.values())
                two, four = robust_spread(means_of(series, 2)), robust_spread(means_of(series, 4))
                pairs = with_neighbours(rows, fmt, load, metric)
                ctl = robust_spread([a - b for a, b in pairs])
                r = lagged_correlation([a for a, _ in pairs], 0, [b for _, b in pairs])
                print(f"  {fmt}/c{load:g}: {100 * one:.1f} % (n {len(series)}; a {100 * STEP:.0f} % step is "
                      f"{math.log(1 + STEP) / one:.1f} spreads) | {acf} | {100 * two:.1f} % / {100 * four:.1f} % | "
                      f"{100 * ctl:.1f} % (r {r:+.2f})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="record alternating sessions (tens of minutes)")
    rec.add_argument("--out", default=str(DEFAULT_DATA))
    rec.add_argument("--minutes", type=float, default=40.0)
    rec.add_argument("--duration-s", type=float, default=8.0)
    rec.add_argument("--warmup-s", type=float, default=2.0)
    rec.add_argument("--window-s", type=float, default=1.0)
    rec.set_defaults(func=record)
    ana = sub.add_parser("analyse", help="print the recording's figures (default)")
    ana.add_argument("--data", default=str(DEFAULT_DATA))
    ana.set_defaults(func=analyse)
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["analyse", *(argv or [])])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
