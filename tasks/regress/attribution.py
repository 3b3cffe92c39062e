"""Which changed input caused a change: when tonight's inputs differ from the reference's in more than one part, the
reference is served again with one part taken from tonight's, one part at a time, each such hybrid beside the
reference in a duet of its own, and each part's effect is read off its duet.

    parts, notes = change_parts(reference_inputs, candidate_inputs, reference_folder, candidate_folder)
    inputs = hybrid_inputs(reference_inputs, candidate_inputs, part, folder=make_hybrid_folder(...))
    attribution = attribute(whole_pairs, {part.name: pairs_or_error}, thresholds, tests)

The parts (`change_parts`): the model (its file and spec), the serving options and protocol, and the runtime. Under
the process launcher the runtime splits further where a venv can be built from mixed pins: each line of the
runtime's requirements.txt that changed, was added or removed is a part of its own (the resolved packages that
changed with the lines are named with them: they cannot be told apart, one line's bump may bring them), and the
runtime folder's other files (entry scripts) one more; a runtime whose requirements did not change but resolved to
other packages is one part. A container's image is one part. The server's version comes with its runtime (a
venv's package, an image's build): it is never a part alone.

A hybrid runtime folder is the reference's folder with one part of tonight's: its requirements.txt with that one
line of tonight's (`mixed_requirements`), or tonight's other files beside the reference's requirements. Its venv is
built like any runtime's; pins that only resolve together fail to build, and that part is `unconfirmed` with pip's
reason, never guessed.

`attribute` reads each part's duet per metric: `effect` (the duet's own verdict: significant, beyond its threshold),
`no_effect` (its interval rules out a move of the threshold or more in the whole change's direction: it cannot have
caused it), `undecided`. The cause of a metric's change: the one part
with an effect in the whole change's direction; "several: a, b" where more than one has; "interaction" where none
alone has, or where the parts' effects, added on the log scale, miss the whole change's beyond both the threshold
and their combined interval (the parts interact). Every test is corrected, with the night's, for the number of tests
(Bonferroni over the parts times the metrics).
"""

from __future__ import annotations

import math
import re
import shutil
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from tasks.core.metrics import bad_sign
from tasks.measure.inputs import input_changes
from tasks.regress.duet import DUET_METRICS, DuetThresholds, judge_pairs, log_ratios
from tasks.regress.sides import Night, measure_group, runtime_folder_of, trusted_pairs
from tasks.regress.size import UNCERTAIN
from tasks.regress.sizing import point_index
from tasks.runtimes.venvs import folder_files

MAX_PARTS = 6  # more parts than this are not taken apart (a duet each): the change is judged whole
REQUIREMENTS = "requirements.txt"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Part:
    """One separable part of a change: what it is, the change lines it covers, how a hybrid takes it."""

    kind: str  # model | serving | runtime | requirement | runtime_files
    name: str  # for people: "model", "custom: onnxruntime==1.32.0 → onnxruntime==1.22.1", ...
    changes: tuple[str, ...] = ()
    package: str | None = None  # requirement parts: the canonical package name of the line
    line: str | None = None  # ... and tonight's line for it (None: tonight removed it)
    came_with: tuple[str, ...] = field(default=())  # resolved packages that changed along, not told apart

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "changes": list(self.changes), "package": self.package,
                "line": self.line, "came_with": list(self.came_with)}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(text: str) -> dict[str, str]:
    """Canonical package name -> its line, for each requirement line of a requirements file (comments, blank
    lines and options such as --index-url are not requirements)."""
    out = {}
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = _NAME.match(line)
        if match:
            out[canonical(match.group(1))] = line
    return out


def _package_of(change: str, runtime: str) -> str | None:
    """The canonical package a change line names ("custom: onnxruntime 1.20.1 → 1.21.0"), or None."""
    head = f"{runtime}: "
    if not change.startswith(head) or "files of docker/" in change or ": image " in change:
        return None
    return canonical(change[len(head):].split(" ", 1)[0])


def _other_files(folder: Path) -> dict[str, bytes]:
    return {name: path.read_bytes() for name, path in folder_files(folder).items() if name != REQUIREMENTS}


def runtime_parts(reference: dict, candidate: dict, reference_folder: Path | None,
                  candidate_folder: Path | None) -> tuple[list[Part], list[str]]:
    """The runtime's parts of a change (and notes on what could not be separated); [] when it did not change."""
    ref_rt, cur_rt = reference.get("runtime") or {}, candidate.get("runtime") or {}
    name = cur_rt.get("name") or ref_rt.get("name") or "runtime"
    lines = [c for c in input_changes(reference, candidate) if c.startswith(f"{name}: ")
             or c.startswith("server version")]
    if not lines:
        return [], []
    whole = [Part("runtime", f"{name}: the runtime", tuple(lines))]
    if cur_rt.get("launcher") == "docker" or reference_folder is None or candidate_folder is None:
        return whole, ([] if cur_rt.get("launcher") == "docker" else
                       [f"{name}: the runtime folders are not both at hand: the runtime is one part"])
    ref_req = requirement_lines((reference_folder / REQUIREMENTS).read_text())
    cur_req = requirement_lines((candidate_folder / REQUIREMENTS).read_text())
    changed = sorted(p for p in set(ref_req) | set(cur_req) if ref_req.get(p) != cur_req.get(p))
    ref_pk, cur_pk = ref_rt.get("packages") or {}, cur_rt.get("packages") or {}
    moved = {canonical(p) for p in set(ref_pk) | set(cur_pk) if ref_pk.get(p) != cur_pk.get(p)}
    along = tuple(sorted(moved - set(changed)))
    parts = [Part("requirement", f"{name}: {ref_req.get(p, '(none)')} → {cur_req.get(p, '(none)')}",
                  tuple(c for c in lines if _package_of(c, name) == p), p, cur_req.get(p), along) for p in changed]
    if _other_files(reference_folder) != _other_files(candidate_folder):
        parts.append(Part("runtime_files", f"{name}: files of docker/{name}/ besides {REQUIREMENTS}",
                          tuple(c for c in lines if "files of docker/" in c)))
    notes = []
    if along and len(parts) > 1:
        notes.append(f"{name}: {', '.join(along)} changed with the requirements and are not told apart")
    if not parts:  # the same files resolved to other packages: one part, tonight's resolution
        return whole, notes
    if len(parts) == 1:  # nothing to take apart within the runtime: the hybrid takes tonight's runtime whole
        return [Part("runtime", parts[0].name, tuple(lines), came_with=parts[0].came_with)], notes
    return parts, notes


def change_parts(reference: dict, candidate: dict, reference_folder: Path | None = None,
                 candidate_folder: Path | None = None) -> tuple[list[Part], list[str]]:
    """The separable parts in which `candidate`'s inputs differ from `reference`'s (tasks/measure/inputs.py
    records), and notes on what could not be separated. The load generator is never a part: both sides of every
    duet run tonight's."""
    parts: list[Part] = []
    changes = input_changes(reference, candidate)
    if (reference.get("model") or {}).get("sha256") != (candidate.get("model") or {}).get("sha256") or \
            (reference.get("model") or {}).get("spec") != (candidate.get("model") or {}).get("spec"):
        parts.append(Part("model", "model", tuple(c for c in changes if "model sha256" in c)))
    if (reference.get("serving") or {}) != (candidate.get("serving") or {}):
        parts.append(Part("serving", "serving options", tuple(c for c in changes if c.startswith("serving "))))
    runtime, notes = runtime_parts(reference, candidate, reference_folder, candidate_folder)
    return parts + runtime, notes


def mixed_requirements(reference_text: str, part: Part) -> str:
    """The reference's requirements.txt with `part`'s line as tonight's: replaced, added, or removed."""
    out, seen = [], False
    for raw in reference_text.splitlines():
        match = _NAME.match(raw.split(" #", 1)[0].strip()) if not raw.strip().startswith(("#", "-")) else None
        if match and canonical(match.group(1)) == part.package:
            seen = True
            if part.line is not None:
                out.append(part.line)
            continue
        out.append(raw)
    if not seen and part.line is not None:
        out.append(part.line)
    return "\n".join(out) + "\n"


def make_hybrid_folder(part: Part, reference_folder: Path, candidate_folder: Path, target: Path) -> Path:
    """A runtime folder that is the reference's with `part` of tonight's (a requirement line, or the other files)."""
    if target.exists():
        shutil.rmtree(target)
    if part.kind == "runtime_files":
        shutil.copytree(candidate_folder, target)
        shutil.copy2(reference_folder / REQUIREMENTS, target / REQUIREMENTS)
    else:
        shutil.copytree(reference_folder, target)
        (target / REQUIREMENTS).write_text(mixed_requirements((reference_folder / REQUIREMENTS).read_text(), part))
    return target


def hybrid_inputs(reference: dict, candidate: dict, part: Part, folder: Path | None = None) -> dict:
    """The reference's inputs with `part` taken from tonight's (`folder`: the hybrid runtime folder of a
    requirement or runtime_files part)."""
    out = dict(reference)
    if part.kind == "model":
        out["model"] = candidate["model"]
    elif part.kind == "serving":
        out["serving"] = candidate["serving"]
    elif part.kind == "runtime":
        out["runtime"], out["server"] = candidate["runtime"], candidate.get("server")
    else:
        if folder is None:
            raise ValueError(f"part {part.name!r}: a hybrid runtime folder is needed")
        out["runtime"] = {**(reference.get("runtime") or {}), "folder": str(folder)}
    return out


# --- reading the parts' duets ------------------------------------------------------------------------------------

def _mean_se(pairs: list[dict], metric: str, floor: float) -> tuple[float, float, int] | None:
    ratios = log_ratios(pairs, metric)
    if len(ratios) < 2:
        return None
    return statistics.fmean(ratios), max(statistics.stdev(ratios), floor) / math.sqrt(len(ratios)), len(ratios)


def part_effect(judged: dict, threshold: float, direction: float) -> str:
    """`effect`, `no_effect` or `undecided` of one part at one metric, from its duet's judgement (`judge_metric`):
    an effect is the duet's own finding; no effect, that its interval rules out a move of the threshold or more in
    the whole change's direction (`direction` +1 worse, -1 better, on the metric's worse-is-positive scale): the
    part cannot have caused the change."""
    if judged.get("verdict") in ("regression", "improvement"):
        return "effect"
    ci = judged.get("ratio_ci")
    if ci and direction and max(direction * bad_sign(judged["metric"]) * math.log(v) for v in ci) < threshold:
        return "no_effect"
    return "undecided"


def attribution_tests(night_tests: int, parts: int) -> int:
    """The number of tests a night with `parts` parts taken apart is corrected for: the night's duet tests and one
    per part and metric. The parts' duets stop adding pairs on this count too, so that a duet never stops on a
    laxer alpha than its part is judged at."""
    return max(1, night_tests) + parts * len(DUET_METRICS)


def attribute(whole_pairs: list[dict], part_pairs: dict[str, list[dict] | str], thresholds: DuetThresholds,
              tests: int) -> dict:
    """Per metric: each part's effect (or why it could not be measured) and the cause of the whole change.
    `part_pairs`: part name -> its hybrid duet's trusted pairs, or the reason it has none; `tests`: the night's."""
    from scipy import stats  # lazy: scipy (about 0.3 s) only when parts are judged

    measured = {name: pairs for name, pairs in part_pairs.items() if not isinstance(pairs, str)}
    tests = attribution_tests(tests, len(part_pairs))
    judged = {name: {j["metric"]: j for j in judge_pairs(pairs, thresholds, tests)} for name, pairs in
              measured.items()}
    whole = {j["metric"]: j for j in judge_pairs(whole_pairs, thresholds, tests)}
    out: dict = {"tests": tests, "metrics": {}}
    for metric in DUET_METRICS:
        threshold = thresholds.threshold[metric]
        direction = bad_sign(metric) * math.copysign(1.0, math.log(whole[metric]["ratio"])) \
            if whole[metric].get("ratio") else 0.0
        parts = {}
        for name, pairs in part_pairs.items():
            if isinstance(pairs, str):
                parts[name] = {"effect": "unconfirmed", "reason": pairs}
                continue
            j = judged[name][metric]
            parts[name] = {"effect": part_effect(j, threshold, direction), "duet_ratio": j.get("ratio"),
                           "duet_ratio_ci": j.get("ratio_ci"), "pairs": j.get("pairs"), "p_value": j.get("p_value")}
        causes = [n for n, p in parts.items() if p["effect"] == "effect" and p["duet_ratio"]
                  and bad_sign(metric) * math.log(p["duet_ratio"]) * direction > 0]
        floor = thresholds.noise_floor[metric]
        estimates = {n: _mean_se(measured[n], metric, floor) for n in measured}
        whole_estimate = _mean_se(whole_pairs, metric, floor)
        additive = None
        if whole_estimate and estimates and all(estimates.values()) and len(measured) == len(part_pairs):
            gap = whole_estimate[0] - sum(e[0] for e in estimates.values())
            se = math.sqrt(whole_estimate[1] ** 2 + sum(e[1] ** 2 for e in estimates.values()))
            crit = float(stats.norm.ppf(1 - thresholds.alpha / (2 * tests)))
            additive = {"gap_pct": 100 * math.expm1(gap), "holds": not (abs(gap) > threshold and abs(gap) > crit * se)}
        unmeasured = [n for n, p in parts.items() if p["effect"] == "unconfirmed"]
        if len(causes) == 1:
            cause = causes[0]
        elif causes:
            cause = "several: " + ", ".join(causes)
        elif unmeasured:
            cause = "unconfirmed: " + "; ".join(f"{n} ({parts[n]['reason'][:200]})" for n in unmeasured)
        else:
            cause = "interaction"
        if additive and not additive["holds"] and cause != "interaction":
            cause += f"; interaction (the parts' effects miss the whole by {additive['gap_pct']:+.1f} %)"
        out["metrics"][metric] = {"parts": parts, "cause": cause, "additive": additive}
    return out


# --- measuring the parts ---------------------------------------------------------------------------------------

def _part_duet(group: dict, sub: dict, i: int, part: Part, folders: tuple[Path | None, Path | None], root: Path,
               night: Night) -> dict:
    """One hybrid (the reference with `part` of tonight's) beside the reference, at the sub-group's points."""
    reference_inputs, candidate_inputs = group["reference"]["inputs"], group["candidate"]["inputs"]
    try:
        folder = None
        if part.kind in ("requirement", "runtime_files"):
            folder = make_hybrid_folder(part, folders[0], folders[1], root / f"part{i}")
        hybrid = hybrid_inputs(reference_inputs, candidate_inputs, part, folder)
    except Exception as exc:  # noqa: BLE001 - no hybrid of this part: said, with why
        return {"pairs": [], "error": f"no hybrid could be made: {type(exc).__name__}: {exc}"[:2000],
                "stop_reason": ""}
    return measure_group(sub, night, pairs=(night.config.duet_min_pairs, night.config.duet_max_pairs),
                         duet_id=f"{group['duet_id']}.part{i}", inputs=(reference_inputs, hybrid))


def attribute_group(records: list[dict], group: dict, night: Night) -> None:
    """Where tonight's inputs differ from the reference's in more than one part and the duet found a change: a
    hybrid duet per part at the load points that changed, each record's `cause` and `attribution` from them."""
    reference_inputs, candidate_inputs = group["reference"]["inputs"], group["candidate"]["inputs"]
    detected = sorted({point_index(group, r) for r in records if r.get("duet_verdict") in UNCERTAIN})
    if not detected:
        return
    folders: list[Path | None] = []
    for inputs in (reference_inputs, candidate_inputs):
        try:
            folders.append(runtime_folder_of(inputs, night.store))
        except Exception:  # noqa: BLE001 - not at hand: the runtime stays one part (change_parts says so)
            folders.append(None)
    parts, notes = change_parts(reference_inputs, candidate_inputs, folders[0], folders[1])
    group["attribution"] = {"parts": [p.to_dict() for p in parts], "notes": notes, "duets": []}
    if len(parts) < 2:
        return
    if len(parts) > MAX_PARTS:
        notes.append(f"{len(parts)} parts changed, more than {MAX_PARTS}: the change is judged whole")
        return
    sub = {**group, "points": [group["points"][i] for i in detected]}
    root = Path(night.started["run"].get("run_dir") or ".") / "hybrids" / group["duet_id"]
    part_pairs: dict[str, list[dict] | str] = {}
    corrected = replace(night, tests=attribution_tests(night.tests, len(parts)))
    try:
        for i, part in enumerate(parts):
            measured = _part_duet(group, sub, i, part, (folders[0], folders[1]), root, corrected)
            group["attribution"]["duets"].append({"part": part.name, "measured": measured})
            part_pairs[part.name] = measured
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the hybrids' venvs stay cached by their requirements' hash
    whole = group.get("measured") or {}
    for position, index in enumerate(detected):
        by_part: dict[str, list[dict] | str] = {}
        for name, measured in part_pairs.items():
            trusted, flags = trusted_pairs([p for p in measured["pairs"] if p["load"] == position])
            by_part[name] = trusted if len(trusted) >= 2 else (
                measured.get("error") or f"{len(flags)} of its pairs set aside; fewer than 2 remain")
        whole_pairs = trusted_pairs([p for p in whole.get("pairs", []) if p["load"] == index])[0]
        judged = attribute(whole_pairs, by_part, night.thresholds, night.tests)
        for record in records:
            if point_index(group, record) != index:
                continue
            found = judged["metrics"][record["metric"]]
            record["attribution"] = {"parts": found["parts"], "additive": found["additive"], "notes": notes,
                                     "tests": judged["tests"]}
            if record.get("duet_verdict") in UNCERTAIN:
                record["cause"] = found["cause"]
                record["reason"] = f"{record.get('reason', '')}; cause: {found['cause']}"
