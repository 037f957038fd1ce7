"""When a schedule fires: five-field cron expressions (minute hour day-of-month month day-of-week), by croniter.

Times are the server's local time, so ``0 8 * * *`` is 08:00 where the server runs,
daylight-saving changes included. Nicknames (``@daily``, ``@hourly``…) are accepted too.
"""

from __future__ import annotations

from datetime import datetime

from croniter import croniter

FIELDS = 5
_NICKNAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def check(expression: str) -> str:
    """``expression`` when it is a valid five-field cron expression; ValueError with one line saying why not."""
    text = " ".join(expression.split())
    if text.lower() in _NICKNAMES:
        return text.lower()
    if len(text.split(" ")) != FIELDS:
        raise ValueError(f"cron {expression!r} needs five fields: minute hour day month weekday, "
                         "e.g. '0 8 * * *' (every day at 08:00)")
    if not croniter.is_valid(text):
        raise ValueError(f"cron {expression!r} is not valid: each field is a number in its range, *, a list "
                         "(1,15), a range (1-5) or a step (*/10)")
    return text


def next_time(expression: str, after: datetime | None = None) -> datetime:
    """The first time strictly after ``after`` at which ``expression`` fires, in ``after``'s time zone.

    A naive ``after`` (and the default, now) is the server's local time.
    """
    start = after or datetime.now()
    start = start if start.tzinfo is not None else start.astimezone()
    following: datetime = croniter(check(expression), start).get_next(datetime)
    return following


def next_unix(expression: str, after: float) -> float:
    """:func:`next_time` in unix seconds."""
    return next_time(expression, datetime.fromtimestamp(after).astimezone()).timestamp()
