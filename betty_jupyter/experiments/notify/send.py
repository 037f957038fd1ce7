"""One notification to one target: a blocking call with a timeout, run in a thread by the outbox.

Each webhook gets its own payload shape: ntfy a plain-text body with a ``Title`` header, Slack and
Mattermost ``{"text": …}``, Matrix an ``m.notice`` sent with a transaction id made from the job (so
a repeat is the same event), the generic webhook the notice as JSON. A failure raises
:class:`DeliveryError`, whose message is one short line that never holds a URL, token or password.
"""

from __future__ import annotations

import hashlib
import json
import smtplib
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from email.message import EmailMessage

from ...errors import BettyError
from .message import Notice
from .targets import Relay, Target

TIMEOUT = 10.0
"""Seconds one delivery may take before it counts as failed (and is tried again later)."""


class DeliveryError(BettyError):
    """A notification did not arrive; the message names why without a secret."""


def send(target: Target, notice: Notice, relay: Relay | None, timeout: float = TIMEOUT) -> None:
    """Deliver ``notice`` to ``target`` (DeliveryError when it does not arrive)."""
    try:
        if target.kind == "email":
            _mail(target, notice, relay, timeout)
        else:
            _post(target, notice, timeout)
    except DeliveryError:
        raise
    except urllib.error.HTTPError as error:
        raise DeliveryError(f"the {target.kind} server answered HTTP {error.code}") from None
    except smtplib.SMTPResponseException as error:
        raise DeliveryError(f"the mail relay answered {error.smtp_code}") from None
    except (urllib.error.URLError, smtplib.SMTPException, ssl.SSLError, OSError) as error:
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise DeliveryError(f"no answer within {timeout:g} s") from None
        if isinstance(reason, ConnectionRefusedError):
            raise DeliveryError("connection refused") from None
        raise DeliveryError(f"cannot reach it ({type(reason).__name__})") from None

def _mail(target: Target, notice: Notice, relay: Relay | None, timeout: float) -> None:
    if relay is None:
        raise DeliveryError("no mail relay is configured (BettyConfig.notify.smtp)")
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = relay.sender, target.address, f"Betty: {notice.title}"
    message.set_content(notice.text() + "\n")
    with smtplib.SMTP(relay.host, relay.port, timeout=timeout) as smtp:
        if relay.starttls:
            smtp.starttls(context=ssl.create_default_context())
        if relay.user:
            smtp.login(relay.user, relay.password())
        smtp.send_message(message)


def _post(target: Target, notice: Notice, timeout: float) -> None:
    headers = {"User-Agent": "Betty"}
    url, method = target.url, "POST"
    if target.kind == "ntfy":
        body = notice.text().encode()
        headers.update({"Title": f"Betty: {notice.title}", "Content-Type": "text/plain; charset=utf-8",
                        "Tags": "white_check_mark" if notice.state == "COMPLETED" else "warning"})
    else:
        if target.kind in ("slack", "mattermost"):
            payload: dict[str, object] = {"text": f"Betty: {notice.text()}"}
        elif target.kind == "matrix":
            payload = {"msgtype": "m.notice", "body": f"Betty: {notice.text()}"}
            made = hashlib.sha256(f"{notice.cluster}/{notice.job_id}/{notice.state}".encode()).hexdigest()[:32]
            url = (f"{target.url.rstrip('/')}/_matrix/client/v3/rooms/{urllib.parse.quote(target.room, safe='')}"
                   f"/send/m.room.message/betty-{made}")
            headers["Authorization"] = f"Bearer {target.token}"
            method = "PUT"
        else:
            payload = {"source": "betty", **notice.record()}
        body = json.dumps(payload).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    with _OPENER.open(request, timeout=timeout) as answer:
        answer.read(4096)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is refused: its secret URL would be followed wherever it points."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        raise DeliveryError("the server redirected the notification; give the final URL")


_OPENER = urllib.request.build_opener(_NoRedirects)
