"""The night's message sent through Airflow's own notifier classes: one small sender per kind of connection, chosen by
the connection's type (Param `notify` names the connections; docs/notifications.md#connections).

    smtp          SmtpNotifier (apache-airflow-providers-smtp): e-mail, the message's HTML; the recipients in
                  the connection's extra `to` (a list or comma-separated), the sender in `from_email`
    slackwebhook  SlackWebhookNotifier (apache-airflow-providers-slack): the text to an incoming webhook
    apprise       AppriseNotifier (apache-airflow-providers-apprise): the title and text to Apprise's services

The DAGs import this module inside their tasks (Airflow puts the plugins folder on the path); it holds no plugin, and
the providers are imported only when a message is sent. The nightly DAG's deadline alert names
`alert_night_running_long` here (an AsyncCallback: Airflow's triggerer imports and awaits it when a run passes its
deadline, docs/notifications.md#the-nights-clock). Each notifier's `notify` is called with the message as
given, never rendered as a template. What `tasks.report.notify.deliver` masks in an error: the connection's password,
every extra value whose key names a secret, a Slack webhook's address (its token is in it) and Apprise's service
URLs (theirs too).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from tasks.core.errors import ConfigError
from tasks.report.message import Message

log = logging.getLogger(__name__)

DEFAULT_FROM = "serving-eval@localhost"
SECRET_WORDS = ("password", "passwd", "secret", "token", "key", "passphrase", "credential", "auth", "webhook")


def _conn(conn_id: str):
    from airflow.sdk import Connection

    return Connection.get(conn_id)


def connection_secrets(conn, kind: str) -> tuple[str, ...]:
    """The values of a connection that must never be shown: its password, its extra fields named like secrets, a
    webhook's address, Apprise's service URLs."""
    extra = conn.extra_dejson or {}
    found = [conn.password or ""] + [str(v) for k, v in extra.items()
                                     if v and any(word in k.lower() for word in SECRET_WORDS)]
    if kind == "slackwebhook":
        found.append(conn.host or "")
    if kind == "apprise":
        config = extra.get("config") or []
        config = json.loads(config) if isinstance(config, str) and config.lstrip().startswith(("[", "{")) else config
        for item in config if isinstance(config, list) else [config]:
            found.append(str(item.get("path") or "") if isinstance(item, dict) else str(item))
    return tuple(s for s in found if s)


@dataclass(frozen=True)
class SmtpSender:
    conn_id: str
    to: tuple[str, ...]
    from_email: str
    secrets: tuple[str, ...] = ()
    kind: str = "smtp"

    def send(self, message: Message) -> None:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        notifier = SmtpNotifier(to=list(self.to), from_email=self.from_email, subject=message.subject,
                                html_content=message.html, smtp_conn_id=self.conn_id, mime_subtype="alternative")
        notifier.notify({})


@dataclass(frozen=True)
class SlackWebhookSender:
    conn_id: str
    secrets: tuple[str, ...] = ()
    kind: str = "slackwebhook"

    def send(self, message: Message) -> None:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        SlackWebhookNotifier(slack_webhook_conn_id=self.conn_id, text=message.text).notify({})


@dataclass(frozen=True)
class AppriseSender:
    conn_id: str
    secrets: tuple[str, ...] = ()
    kind: str = "apprise"

    def send(self, message: Message) -> None:
        from airflow.providers.apprise.notifications.apprise import AppriseNotifier

        AppriseNotifier(apprise_conn_id=self.conn_id, title=message.subject, body=message.text).notify({})


@dataclass(frozen=True)
class UnusableSender:
    """A connection that was good at the plan step and is not now (deleted, its type changed): each message to it
    fails with the reason, recorded like any notifier's failure."""

    conn_id: str
    error: str
    secrets: tuple[str, ...] = ()
    kind: str = "unknown"

    def send(self, message: Message) -> None:
        raise ConfigError("notify", self.conn_id, self.error)


KINDS = ("smtp", "slackwebhook", "apprise")


def _recipients(value) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value or "").split(",")
    return tuple(str(i).strip() for i in items if str(i).strip())


def sender_for(conn_id: str):
    """The sender of one connection, or a ConfigError naming Param notify, the id and what is wrong."""
    try:
        conn = _conn(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow's not-found error differs by version: one message here
        raise ConfigError("notify", conn_id, f"must be the id of an Airflow connection ({type(exc).__name__}: "
                                             "no such connection)") from exc
    kind = (conn.conn_type or "").lower().replace("_", "")
    secrets = connection_secrets(conn, kind)
    if kind == "smtp":
        extra = conn.extra_dejson or {}
        to = _recipients(extra.get("to"))
        if not to:
            raise ConfigError("notify", conn_id, "an smtp connection must list its recipients in its extra's `to` "
                                                 "(e.g. {\"to\": \"team@example.com\"})")
        return SmtpSender(conn_id, to, str(extra.get("from_email") or DEFAULT_FROM), secrets)
    if kind == "slackwebhook":
        return SlackWebhookSender(conn_id, secrets)
    if kind == "apprise":
        return AppriseSender(conn_id, secrets)
    raise ConfigError("notify", conn_id, f"must be a connection of type {', '.join(KINDS)} (this one is "
                                         f"{conn.conn_type!r})")


def notifier_senders(conn_ids, strict: bool = True) -> list:
    """A sender per connection id of Param notify, in its order; the first bad one refused by name (not `strict`:
    an UnusableSender in its place, so the others still send)."""
    senders = []
    for conn_id in conn_ids or ():
        try:
            senders.append(sender_for(conn_id))
        except ConfigError as exc:
            if strict:
                raise
            senders.append(UnusableSender(conn_id, exc.rule))
    return senders


def send_night_running_long(context: dict, deadline_s: float) -> list[dict]:
    """The deadline alert's work: the run's message to its own Param notify's notifiers; what each did (a notifier
    that fails is logged, never raised; a run whose Params no longer resolve is logged and sends nothing)."""
    from tasks.report.late_night import late_night
    from tasks.report.notify import deliver

    dag_run = context["dag_run"]
    try:
        late = late_night(dag_run, deadline_s, datetime.now(UTC))
    except ConfigError as exc:
        log.error("deadline alert of run %s: its Params do not resolve, nothing sent: %s", dag_run["dag_run_id"], exc)
        return []
    if late is None:
        return []
    if not late.config.notify:
        log.warning("deadline alert of run %s: Param notify is empty, nothing sent", dag_run["dag_run_id"])
    return deliver(late.message, notifier_senders(late.config.notify, strict=False), log=log.info)


async def alert_night_running_long(context: dict, deadline_s: float) -> str:
    """The nightly DAG's deadline callback, run by Airflow's triggerer with the run (`context["dag_run"]`) and the
    DAG's deadline (seconds after the run was queued); returns the deliveries as JSON, which Airflow keeps as the
    callback's output (a text column: anything but a string there fails the triggerer). Sending blocks (SMTP,
    HTTP), so it runs in a thread: the triggerer's other triggers keep their event loop, and Airflow's connections
    are read from there as usual."""
    return json.dumps(await asyncio.to_thread(send_night_running_long, context, deadline_s))
