"""The night's duets: every cell whose inputs changed is measured beside its reference's, on the host that
measured it, after tonight's A/A duet of the control cell has measured the duet's own noise there.

    planned = plan_duets(references, plan)              # in the regression check (tasks/regress/check.py)
    regressions = run_duets(started, conversions, regressions, host=...)   # one task per measuring host

A duet group is one server session's changed cells that share their reference night: each cell's load point gets its
own pairs, and every pair runs on two servers started fresh for it (tasks/measure/duet.py). Each side is built from
its inputs record (tasks/measure/inputs.py): the artifact from this host's cache or the store, the spec and serving
options as they were, the runtime folder from the checkout or, when it changed, the reference's snapshot in the
store with a venv built from its requirements (or, in a container, the image it ran). A reference that cannot be had
again is reported as such (`unconfirmed`, with the reason), never silently skipped. Both sides are driven by
tonight's load generator.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

from tasks.convert.artifact import Artifact
from tasks.convert.core import local_artifact
from tasks.core.paths import DOCKER_DIR, run_dir
from tasks.core.results import SESSION_KEY
from tasks.core.spec import ModelSpec
from tasks.loadgen.settings import LoadSettings
from tasks.measure.duet import DuetSettings, DuetSide, measure_duet
from tasks.measure.inputs import OPTION_FIELDS
from tasks.plan.cells import Plan
from tasks.plan.control import control_cell, control_row
from tasks.regress.duet import DUET_METRICS, DuetThresholds, aa_noise, decided, judge_pairs
from tasks.regress.references import Reference, row_inputs
from tasks.runtimes.venvs import files_sha256
from tasks.serve.budget import plan_budget
from tasks.serve.launchers import get_launcher
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.store.runtimes import fetch_runtime
from tasks.store.s3 import S3Store
from tasks.validate.outcome import pair_host_flag

AA_PAIRS = 4  # pairs of tonight's A/A duet of the control cell
REFERENCES_FILE = "references.json"  # in the host's cache: what tonight's references need kept
POINT_FIELDS = ("batch_size", "mode", "load", "protocol")


def _host_of(row: dict, plan: Plan) -> str | None:
    for session in plan.sessions:
        if session.cells and all(getattr(session.cells[0], k) == row.get(k) for k in SESSION_KEY):
            return session.host
    return None


def plan_duets(references: list[Reference], plan: Plan) -> list[dict]:
    """The night's duet groups: changed cells grouped by their server session and reference night."""
    groups: dict[tuple, dict] = {}
    for ref in references:
        if ref.state != "changed":
            continue
        row = ref.row
        key = (*(row.get(k) for k in SESSION_KEY), row.get("config_id"), ref.reference.get("run_id"),
               ref.reference.get("inputs_sha"), row.get("inputs_sha"))
        group = groups.setdefault(key, {
            "duet_id": f"duet{len(groups)}.{row['model']}.{row['format']}.{row['server']}",
            "host": _host_of(row, plan), "session": {k: row.get(k) for k in (*SESSION_KEY, "config_id")},
            "reference": {"run_id": ref.reference.get("run_id"), "logical_date": ref.reference.get("logical_date"),
                          "inputs": ref.reference_inputs},
            "candidate": {"inputs": row_inputs(row)}, "changes": ref.changes, "points": []})
        group["points"].append({k: row.get(k) for k in POINT_FIELDS})
    return list(groups.values())


def plan_aa(rows: list[dict], plan: Plan) -> dict | None:
    """Tonight's A/A duet: the control cell's ok row, its inputs on both sides (None without a control)."""
    control = control_cell(plan.config)
    row = control_row(rows, control)
    if row is None or not row.get("inputs"):
        return None
    return {"duet_id": "aa.control", "host": _host_of(row, plan),
            "session": {k: row.get(k) for k in (*SESSION_KEY, "config_id")},
            "reference": {"run_id": row.get("run_id"), "inputs": row_inputs(row)},
            "candidate": {"inputs": row_inputs(row)}, "changes": [],
            "points": [{k: row.get(k) for k in POINT_FIELDS}]}


def side_from_inputs(label: str, inputs: dict, server_name: str, launcher: str, store: S3Store | None,
                     cpus: int) -> DuetSide:
    """A duet side that serves exactly what `inputs` describes (tasks/measure/inputs.py); ValueError or a store
    error naming what is missing when it cannot be had on this host."""
    model = inputs["model"]
    artifact = local_artifact(Artifact.from_dict(model["artifact"]), store, log=lambda _: None)
    spec = ModelSpec.from_dict(model["spec"])
    serving = dict(inputs.get("serving") or {})
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in serving.items() if k in OPTION_FIELDS}
    values["cpus"] = cpus  # the duet's budget: both sides the same CPUs
    runtime = inputs.get("runtime") or {}
    name = runtime.get("name")
    if launcher == "docker":
        image = str(runtime.get("image") or "")
        values["runtime_image"] = image.rpartition("@")[2] or image
    elif runtime.get("files_sha256") and runtime["files_sha256"] != files_sha256(DOCKER_DIR / name):
        values["runtime_dir"] = str(fetch_runtime(store, name, runtime["files_sha256"]))
    return DuetSide(label, get_server(server_name, ServingOptions(**values)), artifact, spec, inputs)


def _load(point: dict, config) -> LoadSettings:
    return LoadSettings(mode=point["mode"], load=point["load"], batch_size=point["batch_size"],
                        duration_s=config.duration_s, warmup_s=config.warmup_s, window_s=config.window_s,
                        stability_pct=config.stability_pct, request_timeout_s=config.request_timeout_s,
                        workers=config.workers)


def measure_group(group: dict, started: dict, config, store: S3Store | None, *, pairs: tuple[int, int],
                  thresholds: DuetThresholds | None, tests: int = 1, measure: Callable = measure_duet) -> dict:
    """One duet group measured: {"pairs": [...], "error", "stop_reason", ...} (tasks/measure/duet.py)."""
    session = group["session"]
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus)
    directory = Path(started["run"]["run_dir"])
    if not directory.is_dir():
        directory = run_dir(started["run"]["run_id"])
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    try:
        reference = side_from_inputs("reference", group["reference"]["inputs"], session["server"],
                                     session["launcher"], store, budget.cpu_count)
        candidate = side_from_inputs("candidate", group["candidate"]["inputs"], session["server"],
                                     session["launcher"], store, budget.cpu_count)
    except Exception as exc:  # noqa: BLE001 - the reference cannot be had again: said, not skipped
        return {"pairs": [], "error": f"the reference cannot be served again: {type(exc).__name__}: {exc}"[:2000],
                "stop_reason": ""}
    settings = DuetSettings(run_id=started["run"]["run_id"], duet_id=group["duet_id"], log_dir=directory / "logs",
                            launcher=get_launcher(session["launcher"]),
                            loads=tuple(_load(p, config) for p in group["points"]),
                            protocols=tuple(p.get("protocol") for p in group["points"]), server_cpus=budget.cpus,
                            generator_cpus=budget.generator_cpus, memory=budget.memory,
                            ready_timeout_s=config.ready_timeout_s, min_pairs=pairs[0], max_pairs=pairs[1],
                            max_batch_size=config.max_batch_size)

    def settled(load_index: int, so_far: list) -> bool:
        return thresholds is not None and decided(trusted_pairs([p.to_dict() for p in so_far])[0], thresholds,
                                                   tests)

    return measure(reference, candidate, settings, settled).to_dict()


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


def _records_of(regressions: dict, group: dict) -> list[dict]:
    session = group["session"]
    points = [tuple(p.get(k) for k in POINT_FIELDS) for p in group["points"]]
    return [r for r in regressions["records"] if r.get("kind") == "duet"
            and all(r.get(k) == session[k] for k in session)
            and tuple(r.get(k) for k in POINT_FIELDS) in points]


def settle_group(regressions: dict, group: dict, measured: dict, thresholds: DuetThresholds, tests: int) -> None:
    """Each pending record of the group gets its duet's verdict (or `unconfirmed` with the reason)."""
    for record in _records_of(regressions, group):
        index = next(i for i, p in enumerate(group["points"])
                     if all(p.get(k) == record.get(k) for k in POINT_FIELDS))
        mine, flags = trusted_pairs([p for p in measured["pairs"] if p["load"] == index])
        record["duet"] = {"duet_id": group["duet_id"], "pairs": len(mine), "stop_reason": measured["stop_reason"],
                          "set_aside": flags,
                          "thresholds": {"min_effect_pct": 100 * thresholds.min_effect[record["metric"]],
                                         "noise_floor_pct": 100 * thresholds.noise_floor[record["metric"]],
                                         **thresholds.source}}
        if len(mine) < 2 and (measured.get("error") or flags):
            record.update(verdict="unconfirmed", reason=measured.get("error") or (
                f"{len(flags)} of the duet's pairs were set aside ({flags[0]}); fewer than 2 remain"))
            continue
        judged = next(j for j in judge_pairs(mine, thresholds, tests) if j["metric"] == record["metric"])
        record.update({k: judged[k] for k in ("ratio", "ratio_ci", "change_pct", "p_value", "p_improvement",
                                              "min_effect_pct", "verdict")})
        record["reason"] = (f"duet of {len(mine)} pairs: {record['metric']} x{judged['ratio']:.3f} against "
                            f"{group['reference']['run_id']}" if judged["ratio"] else judged.get("reason"))


def run_duets(started: dict, conversions: list[dict], regressions: dict, *, host: str | None = None,
              store: S3Store | None = None, measure: Callable = measure_duet) -> dict:
    """Measure the night's duets (with `host`, that host's) and settle their records; first tonight's A/A duet of
    the control cell where it was measured, whose noise sizes the night's thresholds on this host."""
    regressions = copy.deepcopy(regressions)
    plan = Plan.from_dict(started)
    config = plan.config
    groups = [g for g in regressions.get("duets", []) if host is None or g.get("host") in (host, None)]
    aa = regressions.get("aa")
    noise: dict = {}
    if aa and (host is None or aa.get("host") in (host, None)) and config.duets:
        measured = measure_group(aa, started, config, store, pairs=(AA_PAIRS, AA_PAIRS), thresholds=None,
                                 measure=measure)
        noise = {k: v for k, v in aa_noise(measured["pairs"]).items() if v is not None}
        regressions["aa"] = {**aa, "measured": measured, "noise": noise}
    tests = max(1, sum(len(g["points"]) for g in regressions.get("duets", [])) * len(DUET_METRICS))
    for group in groups:
        session = group["session"]
        thresholds = DuetThresholds.for_stack(session["server"], session["format"], noise)
        if not config.duets:
            for record in _records_of(regressions, group):
                record.update(verdict="unconfirmed", reason="Param duets is off: the change was not measured")
            continue
        measured = measure_group(group, started, config, store, pairs=(config.duet_min_pairs, config.duet_max_pairs),
                                 thresholds=thresholds, tests=tests, measure=measure)
        group["measured"] = measured
        settle_group(regressions, group, measured, thresholds, tests)
    return {**regressions, **count_verdicts(regressions["records"])}


def count_verdicts(records: list[dict]) -> dict:
    return {"regressions": sum(r.get("verdict") == "regression" for r in records),
            "unconfirmed": sum(r.get("verdict") == "unconfirmed" for r in records),
            "improvements": sum(r.get("verdict") == "improvement" for r in records),
            "environment": sum(r.get("verdict") == "environment" for r in records),
            "pending": sum(r.get("verdict") == "pending" for r in records)}


def merge_duets(regressions: dict, parts: list[dict | None]) -> dict:
    """One regressions.json from the per-host duet tasks: each pending record as the part that settled it (still
    pending in every part: unconfirmed, no host measured it), the A/A and the duet groups as measured."""
    parts = [p for p in parts if p]
    records = []
    for i, record in enumerate(regressions.get("records", [])):
        settled = [p["records"][i] for p in parts if i < len(p.get("records", []))
                   and p["records"][i].get("verdict") != "pending"]
        chosen = dict(settled[0] if settled else record)
        if chosen.get("verdict") == "pending":
            chosen.update(verdict="unconfirmed", reason="no measuring task ran this cell's duet")
        records.append(chosen)
    measured_aa = next((p["aa"] for p in parts if (p.get("aa") or {}).get("measured")), regressions.get("aa"))
    groups = []
    for i, group in enumerate(regressions.get("duets", [])):
        done = [p["duets"][i] for p in parts if i < len(p.get("duets", [])) and p["duets"][i].get("measured")]
        groups.append(done[0] if done else group)
    return {**regressions, "aa": measured_aa, "duets": groups, "records": records, **count_verdicts(records)}


def live_references(regressions: dict) -> dict:
    """What tonight's references need kept on this host (never evicted: `python -m tasks.cli images prune`)."""
    images, artifacts, snapshots = set(), set(), set()
    for group in regressions.get("duets", []):
        inputs = group["reference"]["inputs"] or {}
        runtime = inputs.get("runtime") or {}
        if runtime.get("image"):
            images.add(str(runtime["image"]).rpartition("@")[2])
        artifacts.add(((inputs.get("model") or {}).get("artifact") or {}).get("key"))
        if runtime.get("files_sha256"):
            snapshots.add(f"{runtime.get('name')}-{runtime['files_sha256'][:16]}")
    return {"images": sorted(i for i in images if i), "artifacts": sorted(a for a in artifacts if a),
            "runtime_snapshots": sorted(snapshots)}


def references_json(regressions: dict) -> str:
    return json.dumps(live_references(regressions), indent=2, sort_keys=True)
