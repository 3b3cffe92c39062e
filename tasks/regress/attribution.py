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
from tasks.core.verdicts import is_improvement, is_regression
from tasks.measure.inputs import input_changes
from tasks.regress.duet_verdict import DUET_METRICS, DuetThresholds, judge_pairs, log_ratios, pairs_to_rule_out
from tasks.regress.looks import Schedule, duet_schedule
from tasks.regress.sides import Night, Steps, measure_pairs, runtime_folder_of, trusted_pairs
from tasks.regress.size_verdict import UNCERTAIN
from tasks.runtimes.venvs import canonical_name, folder_files

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
            out[canonical_name(match.group(1))] = line
    return out


def _package_of(change: str, runtime: str) -> str | None:
    """The canonical package a change line names ("custom: onnxruntime 1.20.1 → 1.21.0"), or None."""
    head = f"{runtime}: "
    if not change.startswith(head) or "files of docker/" in change or ": image " in change:
        return None
    return canonical_name(change[len(head):].split(" ", 1)[0])


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
    moved = {canonical_name(p) for p in set(ref_pk) | set(cur_pk) if ref_pk.get(p) != cur_pk.get(p)}
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
        if match and canonical_name(match.group(1)) == part.package:
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


def _needed(part: dict, budget_pairs: int | None) -> int | None:
    """The pairs that would rule an undecided part out, where that is more than its duet measures."""
    needed = part.get("pairs_needed")
    return needed if needed and (budget_pairs is None or needed > budget_pairs) else None


def _undecided_text(name: str, part: dict, budget_pairs: int | None) -> str:
    needed = _needed(part, budget_pairs)
    return f"{name} ({part.get('pairs')} pairs" + (f"; ruling it out needs about {needed}" if needed else "") + ")"


def _beside_text(name: str, part: dict, budget_pairs: int | None) -> str:
    needed = _needed(part, budget_pairs)
    return f"{name} undecided" + (f": ruling it out needs about {needed} pairs" if needed else "")


def cause_of(parts: dict[str, dict], causes: list[str], additive: dict | None, budget_pairs: int | None = None) -> str:
    """The cause of a metric's change from its parts' effects (`causes`: the parts with an effect in the whole
    change's direction): one part, "several: a, b", each with the parts left undecided or unconfirmed beside it
    ("model (custom: se-inert undecided)"); "undecided: ..." naming the undecided parts and their pairs where none has
    an effect; "interaction" only when every part is shown to have no effect alone or the parts' effects, added on
    the log scale, miss the whole change's (the additivity test rejects)."""
    undecided = [n for n, p in parts.items() if p["effect"] == "undecided"]
    unmeasured = [n for n, p in parts.items() if p["effect"] == "unconfirmed"]
    interacts = additive is not None and not additive["holds"]
    gap = f"the parts' effects miss the whole by {additive['gap_pct']:+.1f} %" if interacts else ""
    if causes:
        cause = causes[0] if len(causes) == 1 else "several: " + ", ".join(causes)
        beside = [", ".join(_beside_text(n, parts[n], budget_pairs) for n in undecided)] if undecided else []
        beside += [f"{', '.join(unmeasured)} unconfirmed"] if unmeasured else []
        cause += f" ({'; '.join(beside)})" if beside else ""
        return f"{cause}; interaction ({gap})" if interacts else cause
    if interacts:
        return f"interaction ({gap})"
    if undecided:
        cause = "undecided: " + ", ".join(_undecided_text(n, parts[n], budget_pairs) for n in undecided)
        return cause + ("; unconfirmed: " + ", ".join(unmeasured) if unmeasured else "")
    if unmeasured:
        return "unconfirmed: " + "; ".join(f"{n} ({parts[n]['reason'][:200]})" for n in unmeasured)
    return "interaction"


def _pairs_needed(judged: dict, threshold: float, direction: float) -> int | None:
    """The pairs at which an undecided part's interval would rule it out, at its observed mean and spread."""
    if judged.get("log_mean") is None or not direction:
        return None
    mean = direction * bad_sign(judged["metric"]) * judged["log_mean"]
    return pairs_to_rule_out(mean, judged["log_spread"], threshold, judged["alpha"])


def attribute(whole_pairs: list[dict], part_pairs: dict[str, list[dict] | str], thresholds: DuetThresholds,
              tests: int, looks: int = 1, metrics: tuple[str, ...] = DUET_METRICS,
              budget_pairs: int | None = None) -> dict:
    """Per metric of `metrics` (those whose whole change was decided): each part's effect (or why it could not be
    measured), for an undecided part the pairs that would rule it out, and the cause of the whole change.
    `part_pairs`: part name -> its hybrid duet's trusted pairs at its look, or the reason it has none; `tests`: the
    night's; `looks`: the parts' duets' (L); `budget_pairs`: the most pairs a part's duet measures."""
    from scipy import stats  # lazy: scipy (about 0.3 s) only when parts are judged

    measured = {name: pairs for name, pairs in part_pairs.items() if not isinstance(pairs, str)}
    tests = attribution_tests(tests, len(part_pairs))
    judged = {name: {j["metric"]: j for j in judge_pairs(pairs, thresholds, tests, looks=looks)}
              for name, pairs in measured.items()}
    whole = {j["metric"]: j for j in judge_pairs(whole_pairs, thresholds, tests)}
    out: dict = {"tests": tests, "looks": looks, "metrics": {}}
    for metric in metrics:
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
            if parts[name]["effect"] == "undecided":
                parts[name]["pairs_needed"] = _pairs_needed(j, threshold, direction)
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
        out["metrics"][metric] = {"parts": parts, "cause": cause_of(parts, causes, additive, budget_pairs),
                                  "additive": additive}
    return out


# --- measuring the parts ---------------------------------------------------------------------------------------

def _hybrid(group: dict, i: int, part: Part, folders: tuple[Path | None, Path | None], root: Path) -> dict:
    """The reference's inputs with `part` of tonight's (its hybrid runtime folder made under `root`)."""
    folder = None
    if part.kind in ("requirement", "runtime_files"):
        folder = make_hybrid_folder(part, folders[0], folders[1], root / f"part{i}")
    return hybrid_inputs(group["reference"]["inputs"], group["candidate"]["inputs"], part, folder)


def group_parts(group: dict, night: Night) -> tuple[list[Part], tuple[Path | None, Path | None]]:
    """The parts in which the group's candidate differs from its reference (recorded once in the group's
    `attribution`), and both sides' runtime folders."""
    folders: list[Path | None] = []
    for inputs in (group["reference"]["inputs"], group["candidate"]["inputs"]):
        try:
            folders.append(runtime_folder_of(inputs, night.store))
        except Exception:  # noqa: BLE001 - not at hand: the runtime stays one part (change_parts says so)
            folders.append(None)
    parts, notes = change_parts(group["reference"]["inputs"], group["candidate"]["inputs"], folders[0], folders[1])
    if "attribution" not in group:
        if len(parts) > MAX_PARTS:
            notes.append(f"{len(parts)} parts changed, more than {MAX_PARTS}: the change is judged whole")
        group["attribution"] = {"parts": [p.to_dict() for p in parts], "notes": notes, "duets": []}
    return parts, (folders[0], folders[1])


def attributed_metrics(records: list[dict]) -> tuple[str, ...]:
    """The metrics whose whole change was decided: the duet found it and the size alone did not rule it smaller
    than the minimum effect (a regression or an improvement, its size certain or not)."""
    return tuple(r["metric"] for r in records
                 if r.get("duet_verdict") in UNCERTAIN and (is_regression(r.get("verdict"))
                                                            or is_improvement(r.get("verdict"))))


def _direction(record: dict) -> float:
    ratio = record.get("duet_ratio")
    return bad_sign(record["metric"]) * math.copysign(1.0, math.log(ratio)) if ratio else 0.0


def attribute_point(records: list[dict], group: dict, index: int, night: Night, carried: dict,
                    whole_pairs: list[dict]) -> dict | None:
    """Where tonight's inputs differ from the reference's in more than one part and some metric's whole change was
    decided: a hybrid duet per part at the group's load point `index`, look by look, going on with `carried` work;
    each such record's `cause` and `attribution`. The point's attribution state (None: nothing to take apart)."""
    earlier = (carried.get("work") or {}).get("attribution") or {}
    metrics = attributed_metrics(records)
    if not metrics:
        return None
    parts, folders = group_parts(group, night)
    if not 2 <= len(parts) <= MAX_PARTS:
        return None
    tests = attribution_tests(night.tests, len(parts))
    corrected = replace(night, tests=tests)
    root = Path(night.started["run"].get("run_dir") or ".") / "hybrids" / f"{group['duet_id']}.{index}"
    directions = {r["metric"]: _direction(r) for r in records}
    part_pairs: dict[str, list[dict] | str] = {}
    states: dict[str, dict] = {}
    try:
        for i, part in enumerate(parts):
            state = (earlier.get("parts") or {}).get(part.name) or {}
            schedule = Schedule.from_dict(state["schedule"]) if state else \
                duet_schedule(night.config.duet_min_pairs, night.config.duet_max_pairs)

            def settled(kept: list[dict], schedule: Schedule = schedule) -> bool:
                judged = {j["metric"]: j for j in judge_pairs(kept, night.thresholds, tests, looks=schedule.count)}
                return all(part_effect(judged[m], night.thresholds.threshold[m], directions[m]) != "undecided"
                           for m in metrics)

            earlier_pairs = (carried.get("parts") or {}).get(part.name) or []
            if state.get("done"):
                steps = Steps(list(earlier_pairs), state.get("stop_reason", ""), True)
            else:
                try:
                    hybrid = _hybrid(group, i, part, folders, root)
                except Exception as exc:  # noqa: BLE001 - no hybrid of this part: said, with why
                    hybrid, steps = None, Steps([], "", True, f"no hybrid could be made: {type(exc).__name__}: "
                                                              f"{exc}"[:2000])
                if hybrid is not None:
                    steps = measure_pairs(group, index, corrected, schedule, settled, earlier_pairs,
                                          duet_id=f"{group['duet_id']}.part{i}.{index}",
                                          inputs=(group["reference"]["inputs"], hybrid))
            group["attribution"]["duets"].append({"part": part.name, "point": index, "measured": {
                "pairs": steps.items, "error": steps.error, "stop_reason": steps.stop_reason}})
            kept, flags = trusted_pairs(steps.items)
            look = schedule.latest(len(kept))
            part_pairs[part.name] = kept[:look or len(kept)] if not steps.error or len(kept) >= 2 else steps.error
            if steps.error is None and len(kept) < 2 and flags and steps.done:
                part_pairs[part.name] = f"{len(flags)} of its pairs set aside; fewer than 2 remain"
            states[part.name] = {"schedule": schedule.to_dict(), "pairs": len(kept), "set_aside": len(flags),
                                 "looks_taken": schedule.taken(len(kept)), "done": steps.done,
                                 "stop_reason": steps.stop_reason}
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the hybrids' venvs stay cached by their requirements' hash
    looks = max((Schedule.from_dict(s["schedule"]).count for s in states.values()), default=1)
    judged = attribute(whole_pairs, part_pairs, night.thresholds, night.tests, looks=looks, metrics=metrics,
                       budget_pairs=max((Schedule.from_dict(s["schedule"]).last for s in states.values()),
                                        default=None))
    for record in records:
        found = judged["metrics"].get(record["metric"])
        if found is None:
            record["attribution"] = {"notes": ["not attributed: the whole change of this metric was not decided"]}
            continue
        record["attribution"] = {"parts": found["parts"], "additive": found["additive"],
                                 "notes": group["attribution"]["notes"], "tests": judged["tests"], "looks": looks}
        record["cause"] = found["cause"]
    return {"parts": states, "done": all(s["done"] for s in states.values())}
