"""A night's findings: what the team is told (docs/notifications.md#the-message), one per regression or improvement
(per cell and metric), change not settled (`undecided` or `disputed`: judged again the next night), failed,
contended or missing cell, cell removed from the plan, and failed validation.

    findings = night_findings(rows, regressions, validation)       # from the run's published objects
    findings = mark_announced(findings, earlier_notifications)     # new, or open since the night first announced

A regression stays a finding every night until someone accepts the new level (`tasks.cli accept`) or it recovers: its
reference stays the last accepted night, so every later night judges it again. A regression already announced (a
message carrying it reached a notifier on an earlier night, with the same reference) is `open` since that night,
not new. The regression record's fields are read in both shapes a store may hold: the change's size measured alone
(`change_pct`, `change_ci`) with the duet's figures apart (`duet_ratio`, `duet_ratio_ci`), or, in records written
before sizes were measured alone, the duet's (`ratio`, `ratio_ci`, `change_pct`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from tasks.core.metrics import METRICS, number
from tasks.core.verdicts import duet_figures, is_improvement, is_not_settled, is_regression
from tasks.report.formatting import load_text

STACK_KINDS = ("duet", "parity")  # records that judge a stack (environment records judge the host)
REASON_IN_LINE_CHARS = 240


@dataclass(frozen=True)
class Finding:
    """One line of the message: what, where, how large (with its interval), why; `since` the night it began."""

    kind: str  # regression | improvement | not_settled | failed | contended | missing | removed | overdue |
    # validation
    key: str  # its identity from night to night (what "already announced" matches)
    where: str
    metric: str | None = None
    size: str | None = None
    cause: str | None = None
    reason: str | None = None
    since: str | None = None  # logical date of the night it began (open regressions, missing cells)
    new: bool = True

    def line(self) -> str:
        """"NEW regression: mlp/onnx/custom concurrency 1 (kserve_v2_rest): throughput -23.4 % [-30.1, -16.0] ..."."""
        head = "NEW" if self.new else f"OPEN since {str(self.since)[:10]}"
        return f"{head} {self.text()}"

    def text(self) -> str:
        """The line without whether it is new: "regression: mlp/onnx/custom ...: throughput -23.4 % ..."."""
        text = f"{self.kind.replace('_', ' ')}: {self.where}"
        if self.metric:
            text += f": {self.metric}"
        if self.size:
            text += f" {self.size}"
        if self.cause:
            text += f"; cause: {self.cause}"
        if self.reason:
            text += f"; {self.reason[:REASON_IN_LINE_CHARS]}"
        return text

    def to_dict(self) -> dict:
        return asdict(self)


def record_where(record: dict) -> str:
    """"mlp/onnx/custom concurrency 1 (kserve_v2_rest)": a record's cell, for people."""
    where = "/".join(str(record[k]) for k in ("model", "format", "server") if record.get(k) is not None)
    if record.get("load") is not None:
        where += f" {load_text(record.get('mode'), record.get('load'))}"
    if record.get("protocol"):
        where += f" ({record['protocol']})"
    return where


def _pct(value: float) -> str:
    return f"{value:+.1f} %"


def _interval(low: float | None, high: float | None) -> str:
    return f" [{low:+.1f}, {high:+.1f}] %" if low is not None and high is not None else ""


def size_of(record: dict) -> str | None:
    """How large a change is, with its interval: measured alone where the record has it, else the duet's."""
    ci = record.get("change_ci") or [None, None]
    if "duet_ratio" in record:  # sizes measured alone; the duet only detected the change
        if number(record.get("change_pct")) is not None:
            confidence = number((record.get("size") or {}).get("verdict_confidence_pct"))
            shown = _interval(number(ci[0]), number(ci[1]))
            return _pct(record["change_pct"]) + shown + (f" at {confidence:.4g} %" if shown and confidence else "")
        ratio, duet_ci = duet_figures(record)
        ratio, duet_ci = number(ratio), duet_ci or [None, None]
        if ratio is None:
            return "size uncertain"
        low, high = number(duet_ci[0]), number(duet_ci[1])
        return (f"size uncertain (duet ×{ratio:.3f}"
                + (f" [×{low:.3f}, ×{high:.3f}]" if low is not None and high is not None else "") + ")")
    change = number(record.get("change_pct"))
    if change is None:
        return None
    ratio_ci = record.get("ratio_ci") or [None, None]
    low, high = number(ratio_ci[0]), number(ratio_ci[1])
    interval = _interval(100 * (low - 1), 100 * (high - 1)) if low is not None and high is not None else ""
    return _pct(change) + interval + (" in duet units" if record.get("kind") == "duet" else "")


def _metric_name(metric: str | None) -> str | None:
    return METRICS[metric].label if metric in METRICS else metric


def _kind(verdict: object) -> str | None:
    if is_regression(verdict):
        return "regression"
    if is_improvement(verdict):
        return "improvement"
    return "not_settled" if is_not_settled(verdict) else None


NOT_SETTLED_TEXT = {"undecided": "undecided: neither the duet nor the size alone decided it",
                    "disputed": "disputed: the duet decided no change, the size alone lies beyond the minimum effect"}


def regression_findings(regressions: dict) -> list[Finding]:
    """Every regression, improvement and change not settled of a stack (duets and parity) in regressions.json."""
    found = []
    for record in regressions.get("records", []):
        verdict = record.get("verdict")
        kind = _kind(verdict)
        if record.get("kind") not in STACK_KINDS or kind is None:
            continue
        where = record_where(record)
        key = f"{kind}|{where}|{record.get('metric')}|{record.get('reference_run_id')}"
        reason = "; ".join(record.get("changes") or []) or None
        if verdict.endswith("_uncertain"):
            reason = "size uncertain" + (f"; {reason}" if reason else "")
        if kind == "not_settled":
            reason = NOT_SETTLED_TEXT[verdict] + (f"; {reason}" if reason else "")
        if record.get("left"):
            reason = f"{reason}; {record['left']}" if reason else record["left"]
        found.append(Finding(kind, key, where, _metric_name(record.get("metric")), size_of(record),
                             record.get("cause"), reason))
    return found


def missing_findings(regressions: dict) -> list[Finding]:
    """Missing cells, cells removed from the plan, and cells the night's budget deferred past their coverage K
(tasks/regress/missing.py)."""
    found = []
    for record in regressions.get("records", []):
        if record.get("kind") != "missing":
            continue
        kind = record.get("verdict") if record.get("verdict") in ("removed", "overdue") else "missing"
        found.append(Finding(kind, f"{kind}|{record['cell_id']}", record["cell_id"], reason=record.get("reason"),
                             since=record.get("since")))
    return found


def cell_findings(rows: list[dict]) -> list[Finding]:
    """Failed cells (not a sweep's probe beyond capacity) and contended ones, one per row."""
    found = []
    for row in rows:
        status = row.get("status")
        if status == "contended" or (status == "failed" and not row.get("beyond_capacity")):
            where = record_where({**row, "protocol": row.get("protocol")})
            found.append(Finding(status, f"{status}|{where}", where, reason=str(row.get("reason") or "")))
    return found


def night_findings(rows: list[dict], regressions: dict, validation: dict) -> list[Finding]:
    """Every finding of a night, from its published rows, regressions.json and validation.json, in message order."""
    found = regression_findings(regressions) + missing_findings(regressions) + cell_findings(rows)
    if validation and not validation.get("success", True):
        failed = ", ".join(str(e) for e in validation.get("failed_expectations") or []) or "see validation.json"
        found.append(Finding("validation", "validation", "the results table", reason=f"failed: {failed}"))
    return found


# findings that stay until fixed (or settled): announced once, then open
ONGOING_KINDS = ("regression", "not_settled", "missing", "overdue")


def mark_announced(findings: list[Finding], announced: dict[str, str]) -> list[Finding]:
    """Each regression or missing cell already announced (`announced`: key -> the night it was first announced) as
    open since then (a missing cell: since the night it went missing)."""
    marked = []
    for finding in findings:
        if finding.kind in ONGOING_KINDS and finding.key in announced:
            marked.append(replace(finding, new=False, since=finding.since or announced[finding.key]))
        else:
            marked.append(finding)
    return marked


def is_news(findings: list[Finding]) -> bool:
    """Whether the night has anything new to say (open regressions alone are not news)."""
    return any(f.new for f in findings)
