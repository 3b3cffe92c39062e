"""Sending a night's message through its notifiers, and what each did, in the run's own `notifications.json`
(docs/notifications.md).

    deliveries = deliver(message, senders)          # never raises: a failing notifier is recorded, not fatal
    record = notifications_record(run, findings, message, deliveries, decision)
    write_notifications(store, run, record)         # notifications/dt=<date>/run=<id>/notifications.json
    announced = read_announced(store, before=...)   # key -> the night a finding was first announced

A sender is the small interface below; the ones that send through Airflow's providers (SMTP, Slack's webhook,
Apprise) are Airflow's side (`plugins/serving_eval_notifiers.py`), so nothing here imports Airflow. An error is
recorded with every secret of its connection (`Sender.secrets`) masked: no password, token or webhook address is
ever written to a log, a message or an object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from tasks.core.results import frame_records
from tasks.report.findings import Finding, is_news, mark_announced, night_findings
from tasks.report.message import Message, night_message, report_link
from tasks.report.trend import run_suite
from tasks.store.history import read_results
from tasks.store.layout import NOTIFICATIONS, NOTIFICATIONS_FILE, notifications_key, parse_folder
from tasks.store.s3 import S3Store

NOTIFICATIONS_SCHEMA_VERSION = "1"
MASK = "***"
ERROR_CHARS = 2000
ANNOUNCED_LOOKBACK = 60  # the newest earlier runs' notifications read for what was already announced


class Sender(Protocol):
    """One notifier: its connection's id and kind, the secrets its errors must never show, and how it sends."""

    conn_id: str
    kind: str
    secrets: tuple[str, ...]

    def send(self, message: Message) -> None:
        """Deliver the message or raise saying why."""


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (longest first, so one inside another goes whole) replaced by ***."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def deliver(message: Message, senders: Sequence[Sender], log: Callable[[str], object] = print) -> list[dict]:
    """Send to each notifier in turn; one that fails is logged and recorded (its error masked), the others still
    get the message."""
    deliveries = []
    for sender in senders:
        entry = {"conn_id": sender.conn_id, "kind": sender.kind, "at": now_iso()}
        try:
            sender.send(message)
            entry.update(delivered=True, error=None)
            log(f"notify: sent to {sender.conn_id} ({sender.kind})")
        except Exception as exc:  # noqa: BLE001 - a notifier that fails never fails the run: recorded, logged
            error = redact(f"{type(exc).__name__}: {exc}", sender.secrets)[:ERROR_CHARS]
            entry.update(delivered=False, error=error)
            log(f"notify: {sender.conn_id} ({sender.kind}) failed: {error}")
        deliveries.append(entry)
    return deliveries


def notifications_record(run: dict, findings: list[Finding], message: Message | None, deliveries: list[dict],
                         decision: str) -> dict:
    """notifications.json: the run, its findings (new or open since), what was decided, sent and to whom."""
    return {"schema_version": NOTIFICATIONS_SCHEMA_VERSION, "run_id": run["run_id"],
            "logical_date": run["logical_date"], "status": run.get("status"), "decision": decision,
            "findings": [f.to_dict() for f in findings], "subject": message.subject if message else None,
            "text": message.text if message else None, "deliveries": deliveries,
            "delivered": any(d["delivered"] for d in deliveries), "written_at": now_iso()}


def write_notifications(store: S3Store, key: str, record: dict) -> None:
    store.put_bytes(key, json.dumps(record, indent=2, sort_keys=True).encode(), "application/json")


def run_notifications_key(store: S3Store, run: dict) -> str:
    return notifications_key(store, run["logical_date"], run["run_id"])


def read_announced(store: S3Store, before: str, run_id: str) -> dict[str, str]:
    """key -> the logical date a finding was first announced (in a message some notifier accepted), from the
    notifications of the newest ANNOUNCED_LOOKBACK runs before `before` (logical date; `run_id` never itself)."""
    found = []
    for key in store.list_keys(store.key(NOTIFICATIONS) + "/"):
        folder = parse_folder(key.removesuffix("/" + NOTIFICATIONS_FILE)) if key.endswith(NOTIFICATIONS_FILE) else None
        if folder is not None and folder.dt <= before[:10]:
            found.append((folder.dt, key))
    announced: dict[str, str] = {}
    for _, key in sorted(found)[-ANNOUNCED_LOOKBACK:]:
        record = store.get_json(key)
        if record.get("run_id") == run_id or str(record.get("logical_date")) >= before or not record.get("delivered"):
            continue
        for finding in record.get("findings") or []:
            first = record["logical_date"] if finding.get("new", True) else finding.get("since") or \
                record["logical_date"]
            if finding["key"] not in announced or first < announced[finding["key"]]:
                announced[finding["key"]] = first
    return announced


def notify_night(store: S3Store, config, summary: dict, senders: list[Sender], log: Callable[[str], object]) -> dict:
    """The night's findings read back from its published objects (`summary`: the publish step's), sent to every
    notifier when one is new (or always, with Param notify_quiet, `config` the run's RunConfig), and recorded in the
    run's own notifications.json; what was decided and delivered."""
    manifest = store.get_json(f"{summary['prefix']}/manifest.json")
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    rows = frame_records(read_results(store, manifest))
    objects = {n: store.get_json(names[n]) if n in names else {} for n in ("regressions.json", "validation.json")}
    announced = read_announced(store, manifest["logical_date"], manifest["run_id"])
    findings = mark_announced(night_findings(rows, objects["regressions.json"], objects["validation.json"]), announced)
    run = {"run_id": manifest["run_id"], "logical_date": manifest["logical_date"], "status": manifest["status"],
           "suite": run_suite(manifest.get("provenance") or {}, rows)}
    message = night_message(run, findings, report_link(config.ui_base_url, config.s3_bucket, config.s3_prefix,
                                                       manifest["prefix"]))
    key = run_notifications_key(store, run)
    earlier = store.get_json(key) if store.exists(key) else {}  # a retry of the task: who already got it
    done = [d for d in earlier.get("deliveries") or [] if d.get("delivered")]
    pending = [s for s in senders if s.conn_id not in {d["conn_id"] for d in done}]
    if not senders:
        decision, deliveries = "not sent: Param notify names no notifier", []
    elif not is_news(findings) and not config.notify_quiet:
        decision, deliveries = "not sent: no new finding (Param notify_quiet sends one anyway)", []
    else:
        decision = "sent: new findings" if is_news(findings) else "sent: no new finding (notify_quiet)"
        deliveries = done + deliver(message, pending, log)
    log(f"notify: {decision}; {len(findings)} findings, {sum(f.new for f in findings)} new")
    write_notifications(store, key, notifications_record(run, findings, message, deliveries, decision))
    return {"decision": decision, "findings": len(findings), "new": sum(f.new for f in findings),
            "deliveries": deliveries, "notifications": f"s3://{config.s3_bucket}/{key}"}
