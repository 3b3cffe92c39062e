"""Sending the message (tasks/report/notify.py): a notifier that fails is recorded with its connection's secrets
masked and the others still get the message; notifications.json says what was decided and sent."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.report.findings import Finding
from tasks.report.message import Message
from tasks.report.notify import deliver, notifications_record, redact

SECRET = "hunter2-planted"
MESSAGE = Message("subject", "text", "<p>text</p>")


@dataclass
class RecordingSender:
    """A notifier in process: it keeps what it was sent, or fails as a refused connection does (naming its
    secret, as a careless library's error might)."""

    conn_id: str
    fail: bool = False
    kind: str = "smtp"
    secrets: tuple[str, ...] = (SECRET,)
    sent: list = field(default_factory=list)

    def send(self, message: Message) -> None:
        if self.fail:
            raise ConnectionRefusedError(f"[Errno 111] refused: smtp://user:{SECRET}@127.0.0.1:1")
        self.sent.append(message)


def test_a_failing_notifier_is_recorded_masked_and_the_others_still_send():
    bad, good = RecordingSender("closed", fail=True), RecordingSender("team")
    logged = []
    deliveries = deliver(MESSAGE, [bad, good], log=logged.append)
    assert [d["delivered"] for d in deliveries] == [False, True] and good.sent == [MESSAGE]
    assert "ConnectionRefusedError" in deliveries[0]["error"] and SECRET not in deliveries[0]["error"]
    assert "***" in deliveries[0]["error"] and not any(SECRET in line for line in logged)
    record = notifications_record({"run_id": "r", "logical_date": "2026-02-02", "status": "complete"},
                                  [Finding("failed", "k", "cell")], MESSAGE, deliveries, "sent: new findings")
    assert record["delivered"] is True and record["findings"][0]["key"] == "k" and record["subject"] == "subject"


def test_redact_masks_the_longest_secret_first():
    assert redact("token abc-long and abc", ["abc", "abc-long"]) == "token *** and ***"
