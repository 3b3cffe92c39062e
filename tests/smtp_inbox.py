"""A real SMTP server on loopback for the notification tests (aiosmtpd): every message it accepts, kept as bytes."""

from __future__ import annotations

import json
from contextlib import contextmanager
from email import message_from_bytes

from tasks.runtimes.ports import free_port


class Inbox:
    """aiosmtpd's handler: every message it accepts, as bytes."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd calls it by this name
        self.messages.append(envelope.content)
        return "250 OK"


def _accept_login(*_call):
    """aiosmtpd's authenticator (server, session, envelope, mechanism, auth data): every login is accepted."""
    from aiosmtpd.smtp import AuthResult

    return AuthResult(success=True)  # a password sent in AUTH: accepted, never kept


@contextmanager
def smtp_inbox():
    """A real SMTP server on 127.0.0.1 (AUTH without TLS: loopback only): (port, inbox), stopped after."""
    from aiosmtpd.controller import Controller

    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), auth_require_tls=False,
                            authenticator=_accept_login)
    controller.start()
    try:
        yield controller.port, inbox
    finally:
        controller.stop()


def smtp_conn(port: int, password: str) -> str:
    """An Airflow smtp connection (AIRFLOW_CONN_<ID>'s JSON) to the server at `port`, recipients in its extra."""
    return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": port, "login": "nightly",
                       "password": password, "extra": {"disable_tls": True, "disable_ssl": True, "timeout": 5,
                                                       "retry_limit": 0, "to": "team@example.com",
                                                       "from_email": "serving-eval@example.com"}})


def html_of(mail: bytes) -> str:
    """The e-mail's HTML part, decoded (the SMTP hook sends it base64 in UTF-8)."""
    part = next(p for p in message_from_bytes(mail).walk() if p.get_content_type() == "text/html")
    return part.get_payload(decode=True).decode()
