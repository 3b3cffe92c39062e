"""The sides the regression check serves again tonight, built from inputs records (tasks/measure/inputs.py), and the
settings they are measured under: one place for the night's duets (tasks/regress/night_duets.py), the sizes measured
alone (tasks/regress/size_rounds.py) and the hybrids of one changed part (tasks/regress/attribution.py).

    settings, reference, candidate = build_sides(group, night)     # a group's points, or a sub-group of one
    steps = measure_pairs(group, index, night, schedule, settled)   # one point's pairs, look by look (`step`)

Each side is built from its inputs record: the artifact from this host's cache or the store, the spec and serving
options as they were, the runtime folder from the checkout (or `$SERVING_EVAL_RUNTIMES`) or, when its files
changed, the reference's snapshot in the store with a venv built from its requirements (a hybrid's folder where the
record names one), or, in a container, the image it ran. A reference that cannot be had again raises, naming what
is missing; the callers record it as `unconfirmed`, never skip it.

Pairs and rounds are measured one at a time (`step`), each checked against the clock before it starts
(tasks/regress/clock.py) and judged at the looks of its schedule (tasks/regress/looks.py): the stop rule lives here,
not in the measuring functions, so tests drive it with recorded pairs and no servers (`Night`'s `measure`,
`measure_alone` and `build`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tasks.convert.artifact import Artifact
from tasks.convert.core import local_artifact
from tasks.core.paths import run_dir, runtime_home
from tasks.core.spec import ModelSpec
from tasks.loadgen.settings import LoadSettings
from tasks.measure.duet import DuetSettings, DuetSide, measure_duet
from tasks.measure.interleaved import measure_interleaved
from tasks.regress.clock import WorkClock, first_pair_s, first_round_s
from tasks.regress.duet_verdict import DuetThresholds
from tasks.regress.looks import Schedule
from tasks.regress.size_verdict import trusted_rounds
from tasks.runtimes.venvs import BUILDER, files_sha256, venv_builder
from tasks.serve.budget import plan_budget
from tasks.serve.launchers import get_launcher
from tasks.serve.options import OPTION_FIELDS, ServingOptions
from tasks.serve.servers import get_server
from tasks.store.runtimes import fetch_runtime
from tasks.store.s3 import S3Store
from tasks.validate.outcome import pair_host_flag


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
        built_by = venv_builder(runtime)
        if runtime.get("name") and built_by and built_by != BUILDER:  # a venv built as that night built it
            values["runtime_builder"] = built_by
    return DuetSide(label, get_server(server_name, ServingOptions(**values)), artifact, spec, inputs)


def load_of(point: dict, config) -> LoadSettings:
    return LoadSettings(mode=point["mode"], load=point["load"], batch_size=point["batch_size"],
                        duration_s=config.duration_s, warmup_s=config.warmup_s, window_s=config.window_s,
                        stability_pct=config.stability_pct, request_timeout_s=config.request_timeout_s,
                        workers=config.workers)


def build_sides(group: dict, night, *, duet_id: str | None = None, inputs: tuple[dict, dict] | None = None,
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


@dataclass(frozen=True)
class Night:
    """What tonight's regression measurements run with: the run (its plan), its config, the store, the duets'
    thresholds and the number of tests they are corrected for, the clock, and the functions that build the sides
    and measure them (tests pass their own)."""

    started: dict
    config: Any
    store: S3Store | None
    thresholds: DuetThresholds | None = None
    tests: int = 1
    measure: Callable = measure_duet
    measure_alone: Callable = measure_interleaved
    build: Callable = build_sides
    clock: WorkClock = field(default_factory=WorkClock)

    @property
    def run_id(self) -> str:
        return self.started["run"]["run_id"]


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


@dataclass(frozen=True)
class Measuring:
    """The functions that build the sides, measure them and tell the time: the real ones, or a test's own (recorded
    pairs and rounds replayed on a clock of their own, tests/recorded_duets.py)."""

    measure: Callable = measure_duet
    measure_alone: Callable = measure_interleaved
    build: Callable = build_sides
    now: Callable[[], float] = time.time


@dataclass(frozen=True)
class Pace:
    """What the clock is asked about one more pair or round: its kind, a first guess of its seconds, and the seconds
    tonight's may take in all at this point (Param size_budget_s for a size; no bound for a duet)."""

    kind: str  # "pair" or "round"
    first_guess_s: float
    budget_s: float = float("inf")


@dataclass
class Steps:
    """What one point's pairs (or rounds) came to: all of them (earlier nights' first), why they stopped, whether
    the work is done (False: the time ran out first, left for the next night), the error that stopped them, and
    what the measuring function reported besides (served checks, versions)."""

    items: list[dict]
    stop_reason: str = ""
    done: bool = False
    error: str | None = None
    seconds: list[float] = field(default_factory=list)  # tonight's, one per pair or round
    extra: dict = field(default_factory=dict)


def step(schedule: Schedule, steps: Steps, trusted: Callable[[list[dict]], list[dict]],
         settled: Callable[[list[dict]], bool], one: Callable[[int], tuple[dict | None, str | None]],
         clock: WorkClock, pace: Pace) -> Steps:
    """Measure one more (`one(index)`) at a time until, at a look of `schedule` (counted in trusted ones), the
    look's items are `settled`, or its last look, or the next one would not end before the clock's deadline or
    within `pace.budget_s` of tonight's seconds (the work is then not done: left for the next night). Items set
    aside count toward no look; at most the last look and half as many again are measured in all."""
    kind, first_guess_s, budget_s = pace.kind, pace.first_guess_s, pace.budget_s
    cap = schedule.last + max(2, schedule.last // 2)
    while True:
        kept = trusted(steps.items)
        n = len(kept)
        if schedule.is_look(n) and settled(kept[:n]):
            steps.stop_reason, steps.done = f"settled at look {schedule.taken(n)} of {schedule.count} ({n})", True
            return steps
        if n >= schedule.last:
            steps.stop_reason, steps.done = f"its last look ({schedule.count} of {schedule.count}, {n})", True
            return steps
        if len(steps.items) >= cap:
            steps.stop_reason, steps.done = (f"{len(steps.items)} measured, {len(steps.items) - n} set aside: "
                                             f"at most {cap}"), True
            return steps
        expected = clock.expected_s(kind, steps.seconds, first_guess_s)
        if not clock.fits(kind, steps.seconds, first_guess_s, budget_s - sum(steps.seconds)):
            cut = "the night's deadline" if clock.left_s() < budget_s - sum(steps.seconds) else \
                f"the point's budget of {budget_s:g} s"
            steps.stop_reason = f"{cut}: the next {kind} (about {expected:.0f} s) would not end within it"
            return steps
        with clock.timed(kind, steps.seconds):
            item, error = one(len(steps.items))
        if error:
            steps.error, steps.done = error, True
            steps.stop_reason = f"stopped by an error after {n}"
            return steps
        steps.items.append(item)


def _sub_group(group: dict, index: int) -> dict:
    return {**group, "points": [group["points"][index]]}


def _lazy_sides(build: Callable[[], tuple]) -> Callable[[], tuple]:
    """The sides built on the first call only: a point the clock gives no time builds nothing."""
    built: list = []

    def sides() -> tuple:
        if not built:
            built.append(build())
        return built[0]

    return sides


def measure_pairs(group: dict, index: int, night: Night, schedule: Schedule, settled: Callable[[list[dict]], bool],
                  earlier: list[dict] = (), *, duet_id: str | None = None,
                  inputs: tuple[dict, dict] | None = None) -> Steps:
    """The duet pairs of the group's load point `index` (after `earlier` ones, carried from earlier nights), one at
    a time by `step`; each pair tagged with its point (`load`) and the night that measured it (`night`). A side
    that cannot be had stops them with the reason (`error`)."""
    steps = Steps([dict(p) for p in earlier])
    sides = _lazy_sides(lambda: night.build(_sub_group(group, index), night, duet_id=duet_id, inputs=inputs))

    def one(i: int) -> tuple[dict | None, str | None]:
        try:
            settings, reference, candidate = sides()
        except Exception as exc:  # noqa: BLE001 - the reference cannot be had again: said, not skipped
            return None, unavailable(exc)
        left = f"pair {i + 1} of at most {schedule.last} at load {index + 1} of {len(group['points'])}"
        result = night.measure(reference, candidate, replace(settings, first_index=i, min_pairs=1, max_pairs=1,
                                                             progress_left=left), None).to_dict()
        for key in ("served", "versions", "runtime_images"):
            steps.extra.setdefault(key, result.get(key))
        if result.get("error") or not result.get("pairs"):
            return None, result.get("error") or "the duet measured no pair"
        return {**result["pairs"][0], "load": index, "night": night.run_id}, None

    load = load_of(group["points"][index], night.config)
    return step(schedule, steps, lambda items: trusted_pairs(items)[0], settled, one, night.clock,
                Pace("pair", first_pair_s(load.duration_s, load.warmup_s)))


def measure_rounds(group: dict, index: int, night: Night, schedule: Schedule, settled: Callable[[list[dict]], bool],
                   earlier: list[dict] = ()) -> Steps:
    """The interleaved solo rounds of the group's load point `index` (after `earlier` ones), one at a time by
    `step` within Param size_budget_s of tonight's seconds; each round tagged with the night that measured it."""
    steps = Steps([dict(r) for r in earlier])
    sides = _lazy_sides(lambda: night.build(_sub_group(group, index), night,
                                            duet_id=f"{group['duet_id']}.size{index}"))
    seed = f"{night.run_id}:{group['duet_id']}:{index}"

    def one(i: int) -> tuple[dict | None, str | None]:
        try:
            settings, reference, candidate = sides()
        except Exception as exc:  # noqa: BLE001 - a side that cannot be had: the size is not measured, and says why
            return None, unavailable(exc)
        left = f"round {i + 1} of at most {schedule.last} at load {index + 1} of {len(group['points'])}"
        result = night.measure_alone(reference, candidate, replace(settings, progress_left=left), load_index=0,
                                     rounds=1, budget_s=float("inf"), seed=seed, first_index=i).to_dict()
        if result.get("error") or not result.get("rounds"):
            return None, result.get("error") or "the size measured no round"
        return {**result["rounds"][0], "night": night.run_id}, None

    load = load_of(group["points"][index], night.config)
    return step(schedule, steps, lambda items: trusted_rounds(items, night.config.max_neighbour_pct)[0], settled,
                one, night.clock, Pace("round", first_round_s(load.duration_s, load.warmup_s),
                                       night.config.size_budget_s))
