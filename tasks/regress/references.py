"""Each cell's reference: the inputs of its last accepted night, and what changed since.

A cell's reference is its newest earlier ok row on the same comparison key (cell key, protocol, host fingerprint)
that was not excluded, not judged a regression on its own night (a regression is not accepted as a baseline) and
not left unsettled there (`undecided`, `disputed`, or work the night's clock left for the next night: the next
night judges the same change again, tasks/regress/carry.py), unless someone accepted that night's level (an
acceptance, `tasks.regress.annotations`: `tasks.cli accept`).
Tonight's cell then is, against it:

    no_history   the cell has no earlier accepted night (its first night)
    no_inputs    the reference was published before inputs were fingerprinted (schema 1.5): nothing to compare
    no_change    every input the stack depends on is the same: the stack cannot have regressed (a changed load
                 generator alone is reported, not judged)
    changed      an input differs: a duet measures the reference's inputs beside tonight's
(tasks/regress/night_duets.py)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tasks.core.paths import runtime_home
from tasks.core.results import CELL_KEY, KEY_DEFAULTED, cell_key, is_overload
from tasks.core.verdicts import NOT_SETTLED, REGRESSED
from tasks.core.workloads import is_fixed_workload
from tasks.measure.inputs import input_changes, stack_changed
from tasks.regress.annotations import is_excluded
from tasks.regress.history_check import comparison_key, verdict_pairs
from tasks.runtimes.venvs import files_sha256
from tasks.store.runtimes import publish_runtime
from tasks.store.s3 import S3Store


@dataclass(frozen=True)
class Reference:
    """Tonight's row of a cell and the row it is compared with (None: nothing to compare with)."""

    row: dict
    reference: dict | None
    state: str  # no_history | no_inputs | no_change | changed
    changes: list[str] = field(default_factory=list)

    @property
    def reference_inputs(self) -> dict | None:
        return row_inputs(self.reference) if self.reference else None

    def summary(self) -> dict:
        ref = self.reference or {}
        return {"state": self.state, "changes": self.changes, "reference_run_id": ref.get("run_id"),
                "reference_logical_date": ref.get("logical_date"), "reference_inputs_sha": ref.get("inputs_sha"),
                "inputs_sha": self.row.get("inputs_sha")}


def row_inputs(row: dict) -> dict | None:
    text = row.get("inputs")
    if not text:
        return None
    return json.loads(text) if isinstance(text, str) else text


def unaccepted(earlier_records: dict[str, list[dict]]) -> set[tuple[str, tuple]]:
    """(run_id, comparison key) of every cell a night judged a regression, left not settled, or left work of for the
    next night: nobody's reference."""
    left = {(run_id, (*cell_key(r), r.get("host", ""))) for run_id, records in earlier_records.items()
            for r in records if r.get("left") and all(k in r for k in CELL_KEY if k not in KEY_DEFAULTED)}
    return verdict_pairs(earlier_records, REGRESSED + NOT_SETTLED) | left


def accepted_history(history_rows: list[dict], earlier_records: dict[str, list[dict]],
                     acceptances: list[dict] = ()) -> dict[tuple, list[dict]]:
    """comparison key -> the earlier ok rows that may be a reference, newest first (a night that judged that cell
    a regression, left it not settled or left work of it is left out, unless an acceptance covers it)."""
    regressed = unaccepted(earlier_records)
    by_key: dict[tuple, list[dict]] = {}
    for row in history_rows:
        if row.get("status") != "ok":
            continue
        key = comparison_key(row)
        if (row.get("run_id"), key) in regressed and is_excluded(row, list(acceptances)) is None:
            continue
        by_key.setdefault(key, []).append(row)
    for rows in by_key.values():
        rows.sort(key=lambda r: (str(r.get("logical_date") or ""), str(r.get("finished_at") or "")), reverse=True)
    return by_key


def find_references(rows: list[dict], history_rows: list[dict], earlier_records: dict[str, list[dict]],
                    acceptances: list[dict] = ()) -> list[Reference]:
    """Tonight's ok rows, each with its reference and what changed (rows not ok have no stack verdict)."""
    history = accepted_history(history_rows, earlier_records, acceptances)
    found = []
    for row in rows:
        if row.get("status") != "ok" or is_overload(row):  # a burst is never re-run beside its reference
            continue
        if not is_fixed_workload(row):  # nor, yet, a trace's replay (docs/regressions.md): its nights compare alone
            continue
        earlier = history.get(comparison_key(row)) or []
        if not earlier:
            found.append(Reference(row, None, "no_history"))
            continue
        reference = earlier[0]
        ref_inputs, now_inputs = row_inputs(reference), row_inputs(row)
        if ref_inputs is None or now_inputs is None:
            found.append(Reference(row, reference, "no_inputs"))
            continue
        changes = input_changes(ref_inputs, now_inputs)
        state = "changed" if stack_changed(ref_inputs, now_inputs) else "no_change"
        found.append(Reference(row, reference, state, changes))
    return found


def keep_runtimes(store: S3Store, rows: list[dict]) -> None:
    """Keep in the store every runtime folder tonight's rows served with (once per content), so a later night can
    serve this night's inputs again as its reference (tasks/store/runtimes.py)."""
    seen = set()
    for row in rows:
        runtime = (row_inputs(row) or {}).get("runtime") or {}
        name, sha = runtime.get("name"), runtime.get("files_sha256")
        if not name or not sha or (name, sha) in seen:
            continue
        seen.add((name, sha))
        folder = runtime_home(name)
        if folder.is_dir() and files_sha256(folder) == sha:  # only what this checkout still has
            publish_runtime(store, name, folder, sha)
