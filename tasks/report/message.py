"""The message a night sends where the team looks (docs/notifications.md#the-message): one per run, its status, one
line per finding, the report's link in the reports page; or the watchdog's, for a night that never published.

    message = night_message(run, findings, link)       # subject, plain text, HTML (autoescaped template)
    message = watchdog_message(stale)
    message = late_night_message(late, run_link(ui_base_url, dag_id, run_id))   # the deadline alert's

Every notifier gets the same words: e-mail the HTML (and the text), Slack and Apprise the text. Nothing of a
connection is ever put in a message: it is built from the run's published objects alone (the deadline alert's, from
the fields of the DAG run Airflow hands its callback).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from tasks.report.findings import Finding, is_news
from tasks.report.templating import render

PLUGIN_REPORTS_PATH = "serving-eval"  # where the reports page serves reports (plugins/serving_eval_reports.py)


@dataclass(frozen=True)
class Message:
    subject: str
    text: str
    html: str


def report_link(ui_base_url: str | None, bucket: str, store_prefix: str, run_prefix: str) -> str:
    """The run's report in the Airflow UI's reports page (`ui_base_url`), else its object in the store."""
    relative = run_prefix.removeprefix(f"{store_prefix.strip('/')}/") if store_prefix else run_prefix
    if ui_base_url:
        return f"{ui_base_url.rstrip('/')}/{PLUGIN_REPORTS_PATH}/{relative}/report.html"
    return f"s3://{bucket}/{run_prefix}/report.html"


def run_link(ui_base_url: str | None, dag_id: str, run_id: str) -> str | None:
    """The DAG run's page in the Airflow UI (as Airflow links it), or None without `ui_base_url`."""
    return f"{ui_base_url.rstrip('/')}/dags/{dag_id}/runs/{quote(run_id)}" if ui_base_url else None


def night_message(run: dict, findings: list[Finding], link: str) -> Message:
    """The night's message (`run`: run_id, logical_date, status, suite): new findings first, then the open ones."""
    ordered = [f for f in findings if f.new] + [f for f in findings if not f.new]
    new, open_ = sum(f.new for f in findings), sum(not f.new for f in findings)
    date = str(run["logical_date"])[:10]
    if not findings:
        headline = "all well, no finding"
    elif not is_news(findings):
        headline = f"nothing new, {open_} still open"
    else:
        headline = f"{new} new finding{'s' if new != 1 else ''}" + (f", {open_} still open" if open_ else "")
    subject = f"serving-eval {date} ({run.get('suite') or 'no suite'}): {run['status']}, {headline}"
    intro = (f"Run {run['run_id']} (logical date {run['logical_date']}, suite {run.get('suite') or '-'}): "
             f"status {run['status']}; {headline}.")
    lines = [f.line() for f in ordered]
    text = "\n".join([intro, "", *(f"- {line}" for line in lines), *([""] if lines else []), f"Report: {link}"])
    html = str(render("message.html", intro=intro, lines=lines, link=link))
    return Message(subject, text + "\n", html)


def watchdog_message(stale: dict) -> Message:
    """The watchdog's message: no run published since `stale["latest"]` (None: none ever), later than allowed."""
    latest = stale.get("latest") or {}
    since = (f"the newest published run is {latest.get('run_id')} of {latest.get('logical_date')}"
             if latest else "no run was ever published")
    intro = (f"No nightly run published for the night due {stale['night']}: {since}, {stale['age_h']:.1f} h ago, "
             f"more than the {stale['max_age_h']:g} h the schedule allows ({stale['where']}).")
    reason = ("A night that never publishes: the DAG paused or failing before its publish step, a worker or the "
              "scheduler down, or the run still going. The nightly DAG's runs and their logs say which.")
    subject = f"serving-eval: no run published for {stale['night'][:10]}"
    html = str(render("message.html", intro=intro, lines=[reason], link=stale.get("link") or ""))
    return Message(subject, f"{intro}\n\n{reason}\n", html)


def seconds_text(seconds: float) -> str:
    """A span as a person reads it: seconds, with the minutes beside from two minutes on."""
    return f"{seconds:,.0f} s" + (f" ({seconds / 60:,.0f} min)" if seconds >= 120 else "")


def late_night_message(late: dict, link: str | None) -> Message:
    """The deadline alert's message: the night `late["run_id"]` has run past its deadline. `late`: run_id, suite,
    state, queued_at, running_s (since queued), budget_s (None: no budget), deadline_s (after queued)."""
    running, deadline = seconds_text(late["running_s"]), seconds_text(late["deadline_s"])
    budget = f"its budget is {seconds_text(late['budget_s'])}" if late.get("budget_s") else "it has no budget"
    where = {"running": "is still running", "queued": "is still queued, not started"}.get(
        late["state"], f"ended {late['state']} after its deadline")
    intro = (f"Run {late['run_id']} (suite {late.get('suite') or '-'}) ran past its deadline: "
             f"queued at {late['queued_at']}, it {where}, {running} after it was queued; {budget}, and the night's "
             f"deadline is {deadline} after a run is queued.")
    reason = ("A night past its deadline holds the next one back (one run at a time) and may miss the morning: the "
              "run's timeline and its tasks' logs say which stage took long.")
    subject = f"serving-eval: night {late['run_id']} running long ({running} since queued)"
    html = str(render("message.html", intro=intro, lines=[reason], link=link or "", link_label="Run"))
    text = "\n".join([intro, "", reason, *(["", f"Run: {link}"] if link else [])])
    return Message(subject, text + "\n", html)
