"""Regression alerts on real nights: record short real nights here, then judge false alarms and injected steps.

    .venv/bin/python benchmarks/regression_nights.py record --out tests/data/regression_nights.csv
    .venv/bin/python benchmarks/regression_nights.py judge  [--data tests/data/regression_nights.csv]

`record` runs N real nights of the MLP on the custom service (ONNX and TorchScript, closed loop at
concurrency 1 and 4) through `tasks.pipeline.run_pipeline` against an embedded (moto) S3, each night a day
apart in logical date; after each night it re-measures every cell the way the confirmation step does
(`tasks.regress.confirm.remeasure`: fresh sessions, the control cell before, between and after), so that any night's
suspect can be confirmed offline. Nights are of four kinds (`--schedule`):

- `aa`: nothing changed;
- `step`: the TorchScript stack got slower: its server process runs a thread that spins `--step-duty` of
  every 2 ms (a server option that slows it), in the night's measurement and in its re-measurement;
- `blip`: a one-off: the same thread spinning all the time, during the night's measurement only;
- `host`: the host got slower: a neighbour process (not ours) spinning on the server's core for the whole
  night (every stack, the control included).
Each row records `neighbour_cpu_pct`: the CPU other work used on the host meanwhile (`tasks.measure.hostload`; for
the nightly rows over the whole night's pipeline, for the re-measured rows over their session).

`judge` replays the recorded nights through the detector (`tasks.regress.detect`) and the confirmation rule
(`tasks.regress.confirm`) exactly as the pipeline applies them night after night, and prints the false-alarm rate
per night (real A/A nights; and suites of 36 cells x 10 metrics made of the recorded cells' real series,
rotated), the detection rate of 10 % throughput and p99 steps applied to the real A/A nights, and what the
real injected nights (step, blip, host) were judged. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / "tests" / "data" / "regression_nights.csv"
DEFAULT_SCHEDULE = "aa:12,step:3,aa:6,blip:1,aa:4,host:1,aa:4"
FIRST_NIGHT = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
HOG_PERIOD_S = 0.002
RECORDED_METRICS = ("throughput_rps", "throughput_sps", "latency_ms_mean", "latency_ms_p50", "latency_ms_p90",
                    "latency_ms_p95", "latency_ms_p99", "latency_ms_p999", "error_rate", "startup_s", "cv", "windows",
                    "requests", "errors", "throughput_rps_ci_low", "throughput_rps_ci_high")
CSV_COLUMNS = ("night", "kind", "logical_date", "run_id", "phase", "round", "role", "model", "format", "server",
               "launcher", "device", "batch_size", "mode", "load", "protocol", "status", "cpu_model", "cpu_count",
               "gpu_name", *RECORDED_METRICS, "neighbour_cpu_pct", "loadavg_1m")
# A busy loop that spins `duty` of every HOG_PERIOD_S (duty 1: always): a neighbour on the host.
HOG = (f"import sys, time\nduty = float(sys.argv[1]); period = {HOG_PERIOD_S}\n"
       "while True:\n    t0 = time.perf_counter()\n    while time.perf_counter() - t0 < duty * period: pass\n"
       "    if duty < 1: time.sleep(period * (1 - duty))\n")
# Runs the server with a thread that spins `duty` of every HOG_PERIOD_S: the stack itself got slower. At
# duty 1 the thread also holds the interpreter for 50 ms at a time (a server slowed ~tenfold, whatever the noise).
HOG_THREAD_WRAPPER = (
    "import runpy, sys, threading, time\nduty = float(sys.argv[1])\n"
    "if duty >= 1: sys.setswitchinterval(0.05)\n"
    f"def hog():\n    period = {HOG_PERIOD_S}\n    while True:\n        t0 = time.perf_counter()\n"
    "        while time.perf_counter() - t0 < duty * period: pass\n"
    "        if duty < 1: time.sleep(period * (1 - duty))\n"
    "threading.Thread(target=hog, daemon=True).start()\nsys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def night_conf(bucket: str, duration_s: float, warmup_s: float = 0.5, window_s: float = 0.5) -> dict:
    return {"models": ["mlp"], "formats": ["onnx", "torchscript"], "servers": ["custom"], "concurrencies": [1, 4],
            "duration_s": duration_s, "warmup_s": warmup_s, "window_s": window_s, "s3_bucket": bucket,
            "s3_prefix": "nights",
            "aws_conn_id": "serving_eval_s3", "fail_on_cell_failure": False, "confirm_regressions": False}


def hogged_custom_server():
    """The custom service, with a busy thread in its own process for the formats in `duty_by_format`."""
    from tasks.serve.servers.custom import CustomServer

    class HoggedCustomServer(CustomServer):
        duty_by_format: dict[str, float] = {}  # noqa: RUF012 - the benchmark's switch, set per night
        starts_left: dict[str, int] = {}  # noqa: RUF012 - with an entry: only that many more starts are hogged

        def write_layout(self, artifact, spec, workdir):
            self._format = artifact.format
            return super().write_layout(artifact, spec, workdir)

        def run_spec(self, layout, spec, ports):
            from dataclasses import replace

            run = super().run_spec(layout, spec, ports)
            fmt = getattr(self, "_format", "")
            duty = self.duty_by_format.get(fmt, 0.0)
            if fmt in self.starts_left:
                duty = duty if self.starts_left[fmt] > 0 else 0.0
                self.starts_left[fmt] -= 1
            if not duty:
                return run
            return replace(run, argv=("python", "-c", HOG_THREAD_WRAPPER, str(duty), *run.argv[1:]))

    return HoggedCustomServer


def start_host_hog() -> int:
    """A neighbour: a full CPU hog pinned to the server's cores, not a descendant of this process; its PID."""
    from tasks.serve.budget import plan_budget

    cpus = plan_budget(None, None, True).cpus or tuple(sorted(os.sched_getaffinity(0)))
    script = f"taskset -c {','.join(map(str, cpus))} {sys.executable} -c \"$HOG\" 1.0 >/dev/null 2>&1 & echo $!"
    out = subprocess.run(["sh", "-c", script], env={**os.environ, "HOG": HOG}, capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


def stop_host_hog(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def parse_schedule(text: str) -> list[str]:
    kinds = []
    for part in text.split(","):
        kind, _, count = part.partition(":")
        if kind not in ("aa", "step", "blip", "host"):
            raise SystemExit(f"--schedule: kind {kind!r} must be one of aa, step, blip, host")
        kinds += [kind] * int(count or 1)
    return kinds


def csv_row(night: int, kind: str, logical: str, run_id: str, phase: str, rnd: int, role: str, row: dict,
            neighbour_cpu_pct: float) -> dict:
    out = {"night": night, "kind": kind, "logical_date": logical, "run_id": run_id, "phase": phase, "round": rnd,
           "role": role, "loadavg_1m": round(os.getloadavg()[0], 2), "neighbour_cpu_pct": round(neighbour_cpu_pct, 1)}
    for k in CSV_COLUMNS:
        if k not in out:
            value = row.get(k)
            out[k] = "" if value is None else (f"{value:.5g}" if isinstance(value, float) else value)
    return out


def record(args: argparse.Namespace) -> int:
    from tasks.measure.hostload import NeighbourProbe
    from tasks.pipeline import cleanup_run_dir, convert_in_run, run_pipeline, start_run, sweep_leftovers
    from tasks.plan.config import RunConfig
    from tasks.plan.control import control_cell, control_row
    from tasks.regress.confirm import remeasure, remeasure_order
    from tasks.serve.servers import SERVERS, register_server
    from tasks.store.embedded_s3 import start_embedded_s3

    kinds = parse_schedule(args.schedule)
    original = SERVERS["custom"]
    server_cls = register_server(hogged_custom_server())
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    started_s = time.monotonic()
    try:
        with start_embedded_s3() as s3, open(out_path, "w", newline="") as out:
            s3.create_bucket("nights")
            conn = s3.connection("serving_eval_s3")
            writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
            writer.writeheader()
            conf = night_conf("nights", args.duration_s, args.warmup_s, args.window_s)
            config = RunConfig.from_params(conf)
            for night, kind in enumerate(kinds, start=1):
                logical = (FIRST_NIGHT + timedelta(days=night - 1)).isoformat()
                run_id = f"night{night:02d}_{kind}"
                host_hog = start_host_hog() if kind == "host" else None
                try:
                    server_cls.duty_by_format = {"step": {"torchscript": args.step_duty},
                                                 "blip": {"torchscript": 1.0}}.get(kind, {})
                    with NeighbourProbe() as probe:
                        _, rows = run_pipeline(conf, run_id=run_id, logical_date=logical, conn=conn)
                    for row in rows:
                        writer.writerow(csv_row(night, kind, logical, run_id, "nightly", 0, "cell", row,
                                                probe.result.neighbour_cpu_pct))
                    server_cls.duty_by_format = {"step": {"torchscript": args.step_duty}}.get(kind, {})
                    started = start_run(conf, run_id=run_id + "_remeasure", logical_date=logical, conn=conn)
                    try:
                        converted = [convert_in_run(c, started, conn) for c in started["conversions"]]
                        control = control_row(rows, control_cell(config))
                        order = remeasure_order([r for r in rows if r["status"] == "ok"], control)
                        for item in remeasure(order, converted, started["run"], config):
                            writer.writerow(csv_row(night, kind, logical, run_id, "remeasure", item["round"],
                                                    item["role"], item["row"], item["neighbour_cpu_pct"]))
                    finally:
                        sweep_leftovers(run_id + "_remeasure")
                        cleanup_run_dir(run_id + "_remeasure")
                finally:
                    if host_hog is not None:
                        stop_host_hog(host_hog)
                out.flush()
                ok = sum(r["status"] == "ok" for r in rows)
                print(f"night {night:2d} {kind:4s}: {ok}/{len(rows)} cells ok, load {os.getloadavg()[0]:.2f}, "
                      f"{time.monotonic() - started_s:.0f} s so far", flush=True)
    finally:
        SERVERS["custom"] = original
    print(f"recorded {len(kinds)} nights to {out_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="record real nights (tens of minutes)")
    rec.add_argument("--out", default=str(DEFAULT_DATA))
    rec.add_argument("--schedule", default=DEFAULT_SCHEDULE, help="kind:count,... (kinds: aa, step, blip, host)")
    # Short points by default (a night a minute); `--duration-s 8 --warmup-s 2 --window-s 1` are the nightly
    # suite's own points, whose night-to-night spread is what the detector faces in production.
    rec.add_argument("--duration-s", type=float, default=2.0)
    rec.add_argument("--warmup-s", type=float, default=0.5)
    rec.add_argument("--window-s", type=float, default=0.5)
    rec.add_argument("--step-duty", type=float, default=0.15, help="busy fraction of the step nights' hog")
    rec.set_defaults(func=record)
    judge_p = sub.add_parser("judge", help="judge the recorded nights (default)")
    judge_p.add_argument("--data", default=str(DEFAULT_DATA))
    judge_p.add_argument("--real-only", action="store_true", help="skip the synthetic comparison (minutes)")
    judge_p.add_argument("--mean-of-two", action="store_true",
                         help="also judge the nights as if each cell's figure were the mean of its two sessions")
    judge_p.set_defaults(func=judge)
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["judge", *(argv or [])])
    return args.func(args)


SUITE_COPIES = 9  # 9 x the 4 recorded cells = a suite of 36 cells
SYNTHETIC_CVS = ((0.03, 2.0), (0.03, 1.0), (0.05, 2.0))  # (night-to-night log sd, the tail's multiple of it)
SYNTHETIC_NIGHTS = 30
STEP = 0.10
WITHIN_NIGHTS = 3


def _rate(hits: int, total: int) -> str:
    return f"{hits}/{total} ({100 * hits / total:.0f} %)" if total else "0/0"


def history_bands(n: int, min_history: int) -> dict[str, list[int]]:
    """The nights judged with 3-7 and with 8+ earlier nights (indices into the series)."""
    return {"3-7 earlier nights": list(range(min_history, min(8, n))), "8+ earlier nights": list(range(8, n))}


def aa_figures(title: str, nights: list[dict], min_history: int, confirm: bool = True) -> None:
    from benchmarks.nights_replay import alarms, replay
    from tasks.regress.detect import ALPHA_NIGHT

    judged = replay(nights, confirm=confirm)  # confirm=False: nights without re-measurements, Holm alone
    per_night = max(len([r for r in j["records"] if r.get("p_value") is not None]) for j in judged)
    print(f"{title}: {per_night} tests a night")
    if confirm:
        unconfirmed_mode, ungated = replay(nights, confirm=False), replay(nights, neighbour_max_pct=100.0)
    for band, idx in history_bands(len(nights), min_history).items():
        loud = [i for i in idx if alarms(judged[i])]
        named = f" ({[nights[i]['run_id'] for i in loud]})" if loud else ""
        if not confirm:
            print(f"  {band}: nights with an alarm (Holm at {100 * ALPHA_NIGHT:.0f} %, no confirmation) "
                  f"{_rate(len(loud), len(idx))}{named}")
            continue
        suspects = sum(any(r.get("confirmation") for r in judged[i]["records"]) for i in idx)
        busy = sum(any((r.get("confirmation") or {}).get("outcome") == "host_busy" for r in judged[i]["records"])
                   for i in idx)
        without = sum(bool(alarms(unconfirmed_mode[i])) for i in idx)
        gate_off = sum(bool(alarms(ungated[i])) for i in idx)
        print(f"  {band}: nights with an alarm {_rate(len(loud), len(idx))}{named}"
              f"; with a suspect re-measured {_rate(suspects, len(idx))} (host busy in {busy}); "
              f"alarms with the busy-host gate off {_rate(gate_off, len(idx))}; "
              f"without confirmation (Holm at {100 * ALPHA_NIGHT:.0f} %) {_rate(without, len(idx))}")


def step_figures(title: str, nights: list[dict], factors: dict, metric: str, min_history: int,
                 cells: list[tuple], every: int = 1, confirm: bool = True) -> None:
    """A step applied (from night s on) to one cell of the real A/A series; found within WITHIN_NIGHTS nights?"""
    from benchmarks.nights_replay import replay, scaled

    cache: dict = {}
    found, total, first, others = 0, 0, [], 0
    by_band = {"3-7": [0, 0], "8+": [0, 0]}
    by_cell = {cell: [0, 0] for cell in cells}
    for start in range(min_history, len(nights) - WITHIN_NIGHTS + 1, every):
        for cell in cells:
            def pick(row, cell=cell):
                return (row["model"], row["format"], row["load"]) == cell

            trial = nights[:start] + [scaled(n, pick, factors, "+step") for n in nights[start:start + WITHIN_NIGHTS]]
            judged = replay(trial, cache=cache, confirm=confirm)[start:]
            hit = [any(r["verdict"] == "regression" and r["metric"] == metric and pick(r) for r in j["records"])
                   for j in judged]
            others += sum(any(r["verdict"] == "regression" and not pick(r) for r in j["records"]) for j in judged)
            total += 1
            band = by_band["3-7" if start < 8 else "8+"]
            band[1] += 1
            by_cell[cell][1] += 1
            if any(hit):
                found += 1
                band[0] += 1
                by_cell[cell][0] += 1
                first.append(hit.index(True) + 1)
    mean_first = sum(first) / len(first) if first else float("nan")
    print(f"{title}: found within {WITHIN_NIGHTS} nights in {_rate(found, total)} of trials "
          f"(with 3-7 earlier nights {_rate(*by_band['3-7'])}, 8+ {_rate(*by_band['8+'])}); "
          f"on night {mean_first:.1f} of the step on average; alarms on other cells in those nights: {others}")
    print("    per cell: " + ", ".join(f"{fmt}/c{load:g} {_rate(*by_cell[(model, fmt, load)])}"
                                     for model, fmt, load in cells))


def judge(args: argparse.Namespace) -> int:
    from benchmarks.nights_replay import (
        alarms,
        log_spread,
        mean_of_two_sessions,
        noise_sources,
        read_nights,
        replay,
        slower,
        synthetic_nights,
        tail_slower,
        widened,
    )
    from tasks.regress.detect import MIN_HISTORY

    nights = read_nights(Path(args.data))
    aa = [n for n in nights if n["kind"] == "aa"]
    loads = [m["row"]["loadavg_1m"] for n in nights for m in n["remeasured"]]
    kinds = ", ".join(f"{k}: {sum(n['kind'] == k for n in nights)}" for k in ("aa", "step", "blip", "host"))
    print(f"{len(nights)} recorded nights ({kinds}); 1-minute load average while recording "
          f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    for metric in ("throughput_rps", "latency_ms_p50", "latency_ms_p99"):
        spread = log_spread(aa, metric)
        print(f"  A/A night-to-night spread of {metric} (1.4826 MAD, log): "
              + ", ".join(f"{k} {v:.3f}" for k, v in spread.items()))
        # Which remedy could narrow it: a second session a night averages only what the two sessions do not
        # share; dividing by the control removes only what the cell shares with the control that night.
        print("    one session / mean of the night's two sessions (r between them) / over the control: "
              + ", ".join(f"{k} {v['one']:.3f}/{v['mean_of_two']:.3f} (r {v['r']:+.2f})/{v['over_control']:.3f}"
                          for k, v in noise_sources(aa, metric).items()))
    cells = sorted({(r["model"], r["format"], r["load"]) for n in aa for r in n["rows"]})
    print("\nFalse alarms (A/A: the recorded unchanged nights in order, each judged against those before it)")
    aa_figures(f"  the recorded suite ({len(cells)} cells)", aa, MIN_HISTORY)
    suite = widened(aa, SUITE_COPIES)
    aa_figures(f"  suites of {len(cells) * SUITE_COPIES} cells (each recorded cell's real series, rotated)", suite,
               MIN_HISTORY)
    print(f"\nDetection of a {100 * STEP:.0f} % step applied to one cell of the real A/A nights from night s on")
    for label, factors, metric in ((f"throughput -{100 * STEP:.0f} % (the stack slower)", slower(STEP),
                                    "throughput_rps"),
                                   (f"p99 +{100 * STEP:.0f} % (only the tail)", tail_slower(STEP), "latency_ms_p99")):
        step_figures(f"  {label}, {len(cells)}-cell suite", aa, factors, metric, MIN_HISTORY, cells)
        step_figures(f"  {label}, {len(cells) * SUITE_COPIES}-cell suite", suite, factors, metric, MIN_HISTORY,
                     cells)
    if args.mean_of_two:
        mean = mean_of_two_sessions(aa)
        mean_suite = widened(mean, SUITE_COPIES)
        print("\nIf the nightly measured every cell in two sessions and judged their mean (the night's session and "
              "its re-measurement minutes later; no third session to confirm with, so Holm alone decides)")
        aa_figures(f"  the recorded suite ({len(cells)} cells)", mean, MIN_HISTORY, confirm=False)
        aa_figures(f"  suites of {len(cells) * SUITE_COPIES} cells", mean_suite, MIN_HISTORY, confirm=False)
        for label, factors, metric in ((f"throughput -{100 * STEP:.0f} %", slower(STEP), "throughput_rps"),
                                       (f"p99 +{100 * STEP:.0f} % (tail only)", tail_slower(STEP),
                                        "latency_ms_p99")):
            step_figures(f"  {label}, {len(cells)}-cell suite", mean, factors, metric, MIN_HISTORY, cells,
                         confirm=False)
            step_figures(f"  {label}, {len(cells) * SUITE_COPIES}-cell suite", mean_suite, factors, metric,
                         MIN_HISTORY, cells, confirm=False)
    for cv, tail in () if args.real_only else SYNTHETIC_CVS:
        syn = synthetic_nights(2026, SYNTHETIC_NIGHTS, cv, tail_cv_factor=tail)
        syn_cells = sorted({(r["model"], r["format"], r["load"]) for r in syn[0]["rows"]})
        print(f"\nFor comparison, synthetic nights of a quieter host (throughput {100 * cv:.0f} % night-to-night, p99 "
              f"{100 * cv * (1 + tail**2) ** 0.5:.0f} %; {SYNTHETIC_NIGHTS} nights, re-measurements drawn alike)")
        aa_figures(f"  {len(syn_cells)} cells", syn, MIN_HISTORY)
        syn_suite = widened(syn, SUITE_COPIES)
        aa_figures(f"  {len(syn_cells) * SUITE_COPIES} cells", syn_suite, MIN_HISTORY)
        for label, factors, metric in ((f"throughput -{100 * STEP:.0f} %", slower(STEP), "throughput_rps"),
                                       (f"p99 +{100 * STEP:.0f} % (tail only)", tail_slower(STEP),
                                        "latency_ms_p99")):
            step_figures(f"  {label}, {len(syn_cells) * SUITE_COPIES}-cell suite", syn_suite, factors, metric,
                         MIN_HISTORY, syn_cells, every=2)
    print("\nThe real nights in recorded order (injected nights included), as the pipeline judged them")
    judged = replay(nights)
    for night, result in zip(nights, judged, strict=True):
        flagged = [r for r in result["records"] if r.get("confirmation")]
        if night["kind"] == "aa" and not flagged:
            continue
        drift = result["control"].get("drift", {}).get("throughput_rps", {})
        line = (f"  {night['run_id']}: control throughput {drift.get('change_pct') or 0:+.0f} %; "
                f"{len(alarms(result))} regressions, {result['unconfirmed']} unconfirmed")
        print(line)
        for r in flagged:
            c = r["confirmation"]
            print(f"    {r['format']}/c{r['load']:g} {r['metric']}: {r['verdict']} (tonight {r['change_pct']:+.0f} % "
                  f"vs {r['history_n']} nights; {c['outcome']}: {c.get('reason', '')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
