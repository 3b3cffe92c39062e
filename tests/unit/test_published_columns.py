"""What a night publishes stays the same: the published columns and hashes of a recorded run, recomputed.

`tests/data/recorded_run/` holds the raw inputs from which a night's published columns are computed (two steady load
points' request-by-request recordings with the server's counters, timings and CPU reading, the resource sampler's
samples, the host's /proc/stat and process readings around each point, an overload phase's recording) and what a
conversion and a cell's inputs hash (an artifact file and folder, two inputs records, the catalogue's cache keys).
`expected.json` holds what the code computed from them; every value must come back bit-identical (exact float
equality), each mismatch named by its column.

A change that is meant to change a published column re-records the expected values with
`python -m tests.unit.test_published_columns` and says in its commit which columns changed and why.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tasks.convert.core import artifact_key
from tasks.convert.graph import HOPS
from tasks.convert.parity import file_sha256
from tasks.core.cost import Prices, cost_fields
from tasks.core.results import COLUMNS
from tasks.core.spec import load_spec
from tasks.loadgen.measurement import ServerCounts, ServerTiming, server_cpu, summarize
from tasks.loadgen.overload import OverloadPhases, summarize_overload
from tasks.loadgen.recording import Recording
from tasks.loadgen.resources import ProcessTreeSampler
from tasks.loadgen.settings import LoadSettings
from tasks.measure.hoststate import Reading, host_state, read_proc_stat
from tasks.measure.inputs import inputs_sha
from tasks.validate.overload import OverloadSigns, classify_overload

DATA = Path(__file__).parents[1] / "data" / "recorded_run"
EXPECTED = DATA / "expected.json"
CACHE_KEYS = (("mlp", "onnx"), ("mlp", "torchscript"), ("tiny-cnn-tf", "savedmodel"))


def _recording(data: dict) -> Recording:
    arrays = {k: np.asarray(data[k], dtype=np.int64) for k in ("scheduled_ns", "sent_ns", "done_ns", "codes")}
    return Recording(
        data["t0_ns"], data["warmup_end_ns"], data["end_ns"], **arrays, generator_cpu_s=data["generator_cpu_s"],
        wall_s=data["wall_s"], workers=data["workers"], worker_cpu_pct=tuple(data["worker_cpu_pct"]),
        stopped_early=data["stopped_early"], generator_late=data["generator_late"],
        slots=None if data["slots"] is None else np.asarray(data["slots"], dtype=np.int64),
        first_error=data["first_error"], first_error_ns=data["first_error_ns"],
        request_bytes=data["request_bytes"], response_bytes=data["response_bytes"])


def _reading(data: dict, stat: Path) -> Reading:
    stat.write_text(data["stat"])
    waits = data["server_waits_ns"]
    return Reading(
        t_s=data["t_s"], cpus=read_proc_stat(stat), own_s=data["own_s"], self_s=data["self_s"],
        helpers_s={int(pid): s for pid, s in data["helpers_s"].items()}, server_cpu_s=data["server_cpu_s"],
        server_waits_ns=None if waits is None else {tuple(int(v) for v in k.split(",")): ns
                                                      for k, ns in waits.items()},
        pressure_us=data["pressure_us"], load_avg_1m=data["load_avg_1m"])


def _resources(samples: dict) -> dict:
    """The resource sampler's summary of recorded samples (what its thread would have appended)."""
    sampler = ProcessTreeSampler(pid=0)
    sampler._cpu, sampler._rss = list(samples["cpu"]), list(samples["rss"])
    sampler._gpu = [tuple(g) for g in samples["gpu"]]
    return sampler.summary().to_dict()


def point_columns(point: dict, workdir: Path) -> dict:
    """A steady load point's published columns, computed as a session computes them from what it read."""
    settings = LoadSettings(**point["settings"])
    counts = ServerCounts(**point["server_counts"]) if point["server_counts"] else None
    timing = ServerTiming.from_deltas(point["timing_deltas"]) if point["timing_deltas"] else None
    measurement = summarize(_recording(point["recording"]), settings, point["latency_from"], counts, timing,
                            point["server_window_cpu_pct"])
    data = measurement.to_dict()
    fields = {k: v for k, v in data.items() if k in COLUMNS and k != "errors_by_kind"}
    fields["errors_by_kind"] = measurement.errors_by_kind_json()
    fields.update(_resources(point["samples"]))
    fields["server_cpu_pct"], per_request = server_cpu(measurement, fields["server_cpu_pct"])
    if per_request is not None:
        fields["server_cpu_us_per_request"] = per_request
    host = point["host"]
    state = host_state(_reading(host["a"], workdir / "stat_a"), _reading(host["b"], workdir / "stat_b"),
                       tuple(host["server_cpus"]), tuple(host["generator_cpus"]))
    fields.update(state.row_fields(), host_state=state.to_json())
    prices = point["prices"]
    fields.update(cost_fields({**point["row"], **fields}, Prices(prices["per_core_hour"], prices["per_gpu_hour"])))
    return fields


def overload_columns(recorded: dict) -> dict:
    """An overload row's published columns from its phase's recording."""
    phases = OverloadPhases(**recorded["phases"])
    figures = summarize_overload(_recording(recorded["recording"]), phases, recorded["request_timeout_s"])
    signs = OverloadSigns(figures.fast_errors, figures.queued, figures.burst_p99_ms, figures.pre_burst_p99_ms)
    return {"duration_s": phases.burst_s, "requests": figures.requests, "errors": figures.errors,
            "error_rate": figures.errors / figures.requests if figures.requests else None,
            "timeouts": figures.timeouts, "errors_by_kind": json.dumps(figures.errors_by_kind, sort_keys=True),
            "goodput_rps": figures.goodput_rps, "goodput_pct": figures.goodput_pct,
            "burst_p99_ms": figures.burst_p99_ms, "pre_burst_p99_ms": figures.pre_burst_p99_ms,
            "recovery_s": figures.recovery_s, "recovered": figures.recovered,
            "overload_class": classify_overload(signs, recorded["server_alive"]), "overload": figures.to_json()}


def hashes() -> dict:
    """What a conversion and a cell's inputs hash to: the artifact's `model_sha256` (a file, a SavedModel folder),
    `inputs_sha` and the `inputs` column of two inputs records, each converter's fingerprint and the catalogue's
    cache keys (a changed key converts every artifact of it again)."""
    records = json.loads((DATA / "inputs.json").read_text())
    out = {"model_sha256 file": file_sha256(DATA / "artifact" / "model.onnx"),
           "model_sha256 folder": file_sha256(DATA / "artifact" / "model.savedmodel")}
    for name, inputs in records.items():
        out[f"inputs_sha {name}"] = inputs_sha(inputs)
        out[f"inputs {name}"] = json.dumps(inputs, sort_keys=True)
    out.update({f"converter fingerprint {hop.name} ({hop.runtime})": hop.fingerprint() for hop in HOPS})
    out.update({f"artifact key {model}/{fmt}": artifact_key(load_spec(model), fmt) for model, fmt in CACHE_KEYS})
    return out


def recompute(workdir: Path) -> dict:
    points = json.loads((DATA / "points.json").read_text())
    published = {name: point_columns(point, workdir) for name, point in sorted(points.items())}
    published["overload"] = overload_columns(json.loads((DATA / "overload.json").read_text()))
    published["hashes"] = hashes()
    return published


def test_the_recorded_run_publishes_the_recorded_columns(tmp_path: Path) -> None:
    expected = json.loads(EXPECTED.read_text())
    got = json.loads(json.dumps(recompute(tmp_path)))  # as the expected values were written: JSON, floats by repr
    assert sorted(got) == sorted(expected)
    mismatches = []
    for part in sorted(expected):
        missing = sorted(set(expected[part]) ^ set(got[part]))
        mismatches += [f"{part}: column {name} only in {'expected' if name in expected[part] else 'recomputed'}"
                       for name in missing]
        mismatches += [f"{part}: column {name}: recorded {expected[part][name]!r}, recomputed {got[part][name]!r}"
                       for name in sorted(set(expected[part]) & set(got[part]))
                       if got[part][name] != expected[part][name]
                       or type(got[part][name]) is not type(expected[part][name])]
    assert not mismatches, "published columns changed:\n" + "\n".join(mismatches)


def test_every_published_measurement_column_is_held() -> None:
    """The steady points' recomputed columns cover every column a load point's measurement fills."""
    expected = json.loads(EXPECTED.read_text())
    for part in ("closed_loop", "open_loop"):
        held = set(expected[part])
        for name in ("throughput_rps", "throughput_rps_ci_low", "throughput_rps_ci_high", "latency_ms_p99",
                     "latency_hdr", "server_cpu_us_per_request", "neighbour_cpu_pct", "host_state",
                     "server_core_s_per_1k", "price_per_million"):
            assert name in held, f"{part}: column {name} is not held by the recorded run"
            assert name in COLUMNS, f"{name}: not a column of the results contract"


@pytest.mark.parametrize("part, windows", [("closed_loop", 11), ("open_loop", 14)])
def test_recorded_points_cover_interval_degrees_of_freedom(part: str, windows: int) -> None:
    """The closed-loop point's interval has 10 degrees of freedom (a value the typed t table held), the open-loop
    point's 13 (one it lacked)."""
    assert json.loads(EXPECTED.read_text())[part]["windows"] == windows


def main() -> None:
    """Re-record expected.json from the recorded inputs (a change meant to change a published column)."""
    import tempfile

    with tempfile.TemporaryDirectory() as workdir:
        EXPECTED.write_text(json.dumps(recompute(Path(workdir)), indent=1, sort_keys=True) + "\n")
    print(f"wrote {EXPECTED}", file=sys.stderr)


if __name__ == "__main__":
    main()
