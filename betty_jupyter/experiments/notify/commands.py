"""What ``betty notify`` and ``%betty notify`` do, in one place: add, list, test, remove a target.

Only a person runs these (a terminal, a notebook cell); no tool of the agent reaches them. A webhook's
URL is asked for (a prompt, or a line on stdin), never taken from the command line, where ``ps`` and the
shell's history would keep it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from ...errors import UsageError
from .message import Notice
from .outbox import Outbox
from .send import send
from .targets import Target, TargetBook, relay_from, target

SAMPLE = Notice("12345", "test", "COMPLETED", 62.0)
"""What ``test`` sends: a made-up job, so a person sees the message's shape."""


def add(name: str, kind: str, ask: Callable[[str], str], address: str = "", room: str = "",
        token_file: str = "", book: TargetBook | None = None) -> Target:
    """Add a target; a webhook's URL comes from ``ask`` (a prompt that does not echo), a Matrix token from a file."""
    where = address if kind == "email" else ""
    if kind != "email":
        if address:
            raise UsageError("give a webhook's URL when asked, not on the command line (it is a secret)")
        where = ask(f"URL of the {kind} webhook for {name} (kept in Betty's notification file, shown nowhere): ")
    token = ""
    if token_file:
        try:
            token = Path(os.path.expanduser(token_file)).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise UsageError(f"cannot read the token file ({error.strerror})") from None
    made = target(name, kind, where.strip(), room=room, token=token)
    (book or TargetBook()).add(made)
    return made


def listed(ledger: Path | None, book: TargetBook | None = None) -> list[dict[str, Any]]:
    """Every target without its secrets, with how its deliveries fared in ``ledger``'s workspace (when given)."""
    outbox = Outbox(ledger) if ledger is not None and ledger.exists() else None
    return [{**found.record(), **(outbox.standing(found.name) if outbox else {})}
            for found in (book or TargetBook()).listed()]


def line(record: Mapping[str, Any]) -> str:
    """One target as a line: ``phone  ntfy at ntfy.sh  3 sent, 1 waiting (last: HTTP 503)``."""
    fared = ""
    if "sent" in record:
        fared = f"  {record['sent']} sent" + (f", {record['waiting']} waiting" if record["waiting"] else "") + \
                (f", {record['gave_up']} given up" if record["gave_up"] else "") + \
                (f" (last failure: {record['last_error']})" if record["last_error"] else "")
    return f"{record['name']}  {record['where']}{fared}"


def test(name: str, settings: Mapping[str, Any], book: TargetBook | None = None) -> str:
    """Send the sample notice to ``name`` now; its line, or DeliveryError's."""
    found = (book or TargetBook()).get(name)
    send(found, SAMPLE, relay_from(settings))
    return f"sent a test notification to {found.name} ({found.where()})"


async def test_async(name: str, settings: Mapping[str, Any], book: TargetBook | None = None) -> str:
    """:func:`test` off the event loop."""
    return await asyncio.to_thread(test, name, settings, book)


def remove(name: str, ledger: Path | None, book: TargetBook | None = None) -> Target:
    """Forget the target (and what it was told, in ``ledger``'s workspace)."""
    gone = (book or TargetBook()).remove(name)
    if ledger is not None and ledger.exists():
        Outbox(ledger).forget(name)
    return gone
