"""The sides the regression check serves again tonight, built from inputs records (tasks/measure/inputs.py), and the
settings they are measured under: one place for the night's duets (tasks/regress/duets.py), the sizes measured
alone (tasks/regress/sizing.py) and the hybrids of one changed part (tasks/regress/attribution.py).

    sides = build_sides(group, started, config, store)             # (settings, reference side, candidate side)
    measured = measure_group(group, started, config, store, pairs=(3, 6), thresholds=..., tests=...)

Each side is built from its inputs record: the artifact from this host's cache or the store, the spec and serving
options as they were, the runtime folder from the checkout (or `$SERVING_EVAL_RUNTIMES`) or, when its files
changed, the reference's snapshot in the store with a venv built from its requirements (a hybrid's folder where the
record names one), or, in a container, the image it ran. A reference that cannot be had again raises, naming what
is missing; the callers record it as `unconfirmed`, never skip it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.convert.artifact import Artifact
from tasks.convert.core import local_artifact
from tasks.core.paths import run_dir, runtime_home
from tasks.core.spec import ModelSpec
from tasks.loadgen.settings import LoadSettings
from tasks.measure.duet import DuetSettings, DuetSide, measure_duet
from tasks.measure.interleaved import measure_interleaved
from tasks.regress.duet import DuetThresholds, decided
from tasks.runtimes.venvs import files_sha256
from tasks.serve.budget import plan_budget
from tasks.serve.launchers import get_launcher
from tasks.serve.options import OPTION_FIELDS, ServingOptions
from tasks.serve.servers import get_server
from tasks.store.runtimes import fetch_runtime
from tasks.store.s3 import S3Store
from tasks.validate.outcome import pair_host_flag


@dataclass(frozen=True)
class Night:
    """What tonight's regression measurements run with: the run (its plan), its config, the store, the duets'
    thresholds and the number of tests they are corrected for, and the measuring functions (tests pass their
    own)."""

    started: dict
    config: Any
    store: S3Store | None
    thresholds: DuetThresholds | None = None
    tests: int = 1
    measure: Callable = measure_duet
    measure_alone: Callable = measure_interleaved


def runtime_folder_of(inputs: dict, store: S3Store | None) -> Path | None:
    """The runtime folder `inputs` served with, on this host (process launcher; None for a container's image): a
    hybrid's folder where the record names one, this checkout's when its files are the same, else the snapshot
    from the store (StoreError when it cannot be had)."""
    runtime = inputs.get("runtime") or {}
    if runtime.get("folder"):
        return Path(runtime["folder"])
    name = runtime.get("name")
    if not name or runtime.get("launcher") == "docker":
        return None
    home = runtime_home(name)
    if not runtime.get("files_sha256") or runtime["files_sha256"] == files_sha256(home):
        return home
    return fetch_runtime(store, name, runtime["files_sha256"])


def side_from_inputs(label: str, inputs: dict, server_name: str, launcher: str, store: S3Store | None,
                     cpus: int) -> DuetSide:
    """A side that serves exactly what `inputs` describes; ValueError or a store error naming what is missing when
    it cannot be had on this host."""
    model = inputs["model"]
    artifact = local_artifact(Artifact.from_dict(model["artifact"]), store, log=lambda _: None)
    spec = ModelSpec.from_dict(model["spec"])
    serving = dict(inputs.get("serving") or {})
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in serving.items() if k in OPTION_FIELDS}
    values["cpus"] = cpus  # the check's budget: both sides the same CPUs
    runtime = inputs.get("runtime") or {}
    if launcher == "docker":
        image = str(runtime.get("image") or "")
        values["runtime_image"] = image.rpartition("@")[2] or image
    else:
        folder = runtime_folder_of(inputs, store)
        if folder is not None and folder != runtime_home(str(runtime.get("name"))):
            values["runtime_dir"] = str(folder)
    return DuetSide(label, get_server(server_name, ServingOptions(**values)), artifact, spec, inputs)


def load_of(point: dict, config) -> LoadSettings:
    return LoadSettings(mode=point["mode"], load=point["load"], batch_size=point["batch_size"],
                        duration_s=config.duration_s, warmup_s=config.warmup_s, window_s=config.window_s,
                        stability_pct=config.stability_pct, request_timeout_s=config.request_timeout_s,
                        workers=config.workers)


def build_sides(group: dict, night: Night, *, duet_id: str | None = None, inputs: tuple[dict, dict] | None = None,
                pairs: tuple[int, int] = (2, 2)) -> tuple[DuetSettings, DuetSide, DuetSide]:
    """The group's settings (its load points, the host's budget) and its two sides (`inputs`: other records than
    the group's reference and candidate, a hybrid's). Raises when a side cannot be had on this host."""
    session, started, config, store = group["session"], night.started, night.config, night.store
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus)
    directory = Path(started["run"]["run_dir"])
    if not directory.is_dir():
        directory = run_dir(started["run"]["run_id"])
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    reference_inputs, candidate_inputs = inputs or (group["reference"]["inputs"], group["candidate"]["inputs"])
    reference = side_from_inputs("reference", reference_inputs, session["server"], session["launcher"], store,
                                 budget.cpu_count)
    candidate = side_from_inputs("candidate", candidate_inputs, session["server"], session["launcher"], store,
                                 budget.cpu_count)
    settings = DuetSettings(run_id=started["run"]["run_id"], duet_id=duet_id or group["duet_id"],
                            log_dir=directory / "logs", launcher=get_launcher(session["launcher"]),
                            loads=tuple(load_of(p, config) for p in group["points"]),
                            protocols=tuple(p.get("protocol") for p in group["points"]), server_cpus=budget.cpus,
                            generator_cpus=budget.generator_cpus, memory=budget.memory,
                            ready_timeout_s=config.ready_timeout_s, min_pairs=pairs[0], max_pairs=pairs[1],
                            max_batch_size=config.max_batch_size)
    return settings, reference, candidate


def unavailable(exc: BaseException) -> str:
    return f"the reference cannot be served again: {type(exc).__name__}: {exc}"[:2000]


def trusted_pairs(pairs: list[dict]) -> tuple[list[dict], list[str]]:
    """The pairs whose two sides saw the same host state, and why each other pair was set aside: a duet's ratio
    cancels only the other work both sides saw (`pair_host_flag`)."""
    trusted, flags = [], []
    for pair in pairs:
        flag = pair_host_flag(pair.get("sides") or {})
        if flag is None:
            trusted.append(pair)
        else:
            flags.append(f"pair {pair.get('index', len(trusted) + len(flags))}: {flag}")
    return trusted, flags


def measure_group(group: dict, night: Night, *, pairs: tuple[int, int], duet_id: str | None = None,
                  inputs: tuple[dict, dict] | None = None) -> dict:
    """One duet measured: {"pairs": [...], "error", "stop_reason", ...} (tasks/measure/duet.py); its pairs are added
    until `decided` on the trusted pairs (with the night's thresholds; none: all `pairs[1]`)."""
    try:
        settings, reference, candidate = build_sides(group, night, duet_id=duet_id, inputs=inputs, pairs=pairs)
    except Exception as exc:  # noqa: BLE001 - the reference cannot be had again: said, not skipped
        return {"pairs": [], "error": unavailable(exc), "stop_reason": ""}

    def settled(load_index: int, so_far: list) -> bool:
        return night.thresholds is not None and decided(trusted_pairs([p.to_dict() for p in so_far])[0],
                                                         night.thresholds, night.tests)

    return night.measure(reference, candidate, settings, settled).to_dict()
