"""A second approver: a job above the site's limits runs only once the person and one of the site's approvers say yes.

With ``limits.above: "second"`` (:mod:`.site`), the gate shows such a job's card as any other, and also
writes a request into the site's approval spool (``limits.approval_spool``), a folder every person and
approver can add files to but nobody can replace another's (root's, sticky, not writable by everyone).
The approver answers from their own login, ``betty approve <spool>/<id>.request.json``: their Betty reads
the request, checks that its file is owned by the person it names, recomputes the card's digest from what
would run (:func:`~betty_jupyter.agent.models.card_digest`) and writes ``<id>.answer.json``, owned by them.

The person's server believes an answer only when its file is a regular file owned by one of the
approvers' own accounts, never the person's, names that same approver, and names the request's id and
the digest of the card the person answered. So the person cannot approve as the approver (they cannot
create a file owned by someone else), and an answer binds the exact job that runs. Anything else about
an answer file (a link, another owner, another digest, not JSON, too large) is refused in one line.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from ..errors import ApprovalError, SiteRefusal
from ..json_text import parse_json
from .models import Preview, card_digest

MAX_FILE = 256 * 1024
"""The largest request or answer file read."""
REQUEST_ID = re.compile(r"^sec_[0-9a-f]{12,32}$")
ANSWERS = ("approved", "denied")
SecondState = Literal["waiting", "approved", "denied", "refused"]
"""Where a job waiting for a second approver stands: waiting, approved, denied, or refused (an answer that did not
count, or none in time)."""
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class SecondRequest:
    """A job waiting for a second approver: who asks, why it needs one, and exactly what would run."""

    request_id: str
    requester: str
    requester_uid: int
    why: str
    title: str
    tool: str
    args: dict[str, Any]
    kind: str
    text: str
    inputs: dict[str, str]
    digest: str
    created: float

    def bound_digest(self) -> str:
        """The card digest of what the request says would run (the same function the gate binds cards with)."""
        preview = Preview(kind=self.kind, title=self.title, text=self.text, inputs=self.inputs)  # type: ignore[arg-type]
        return card_digest(self.tool, self.args, preview)


@dataclass(frozen=True)
class SecondAnswer:
    """An approver's answer to one request."""

    request_id: str
    digest: str
    decision: str
    approver: str
    answered: float


def check_spool(spool: Path | None, uid: int | None = None) -> Path:
    """The spool folder, when it is fit to hold requests and answers; SiteRefusal saying why not: missing, not a
    folder, owned by the person, or one where files can be replaced (writable by everyone, or by a group without
    the sticky bit)."""
    if spool is None:
        raise SiteRefusal("your site needs a second approver for this job but names no approval_spool")
    uid = os.geteuid() if uid is None else uid
    try:
        found = os.lstat(spool)
    except OSError as error:
        raise SiteRefusal(f"the approval spool {spool} cannot be used: {error.strerror or error}; ask your "
                          "site's administrators") from None
    if not stat.S_ISDIR(found.st_mode):
        raise SiteRefusal(f"the approval spool {spool} is not a folder; ask your site's administrators")
    sticky = found.st_mode & stat.S_ISVTX
    if found.st_uid == uid and uid != 0:
        raise SiteRefusal(f"the approval spool {spool} is owned by you, so it cannot keep approvers' answers apart")
    if found.st_mode & stat.S_IWOTH:
        raise SiteRefusal(f"the approval spool {spool} is writable by everyone; it must be writable only by the "
                          "group of people and approvers, with the sticky bit (chmod 1770)")
    if found.st_mode & stat.S_IWGRP and not sticky:
        raise SiteRefusal(f"the approval spool {spool} lets its group replace others' files; set its sticky bit "
                          "(chmod 1770)")
    return spool


def request_path(spool: Path, request_id: str) -> Path:
    """Where a request waits."""
    return spool / f"{request_id}.request.json"


def answer_path(spool: Path, request_id: str) -> Path:
    """Where its answer is written."""
    return spool / f"{request_id}.answer.json"


def write_request(spool: Path, request: SecondRequest) -> Path:
    """Write ``request`` as a fresh file of this account's (never over an existing one); its path."""
    path = request_path(spool, request.request_id)
    _write_new(path, asdict(request))
    return path


def read_request(path: Path, approver_uid: int | None = None) -> SecondRequest:
    """A request as an approver's Betty reads it; ApprovalError when its file is not the named person's own, it is
    their own (nobody approves their own job), or what it says would run is not what its digest binds."""
    approver_uid = os.geteuid() if approver_uid is None else approver_uid
    data, owner = _read_owned(path)
    if not REQUEST_ID.match(path.name.removesuffix(".request.json")):
        raise ApprovalError(f"{path.name[:80]!r} is not an approval request's file name")
    try:
        request = SecondRequest(**{name: data[name] for name in SecondRequest.__dataclass_fields__})
    except (KeyError, TypeError):
        raise ApprovalError(f"{path} is not an approval request Betty wrote") from None
    if not isinstance(request.requester_uid, int) or owner != request.requester_uid \
            or not isinstance(request.requester, str) or _uid(request.requester) != owner \
            or f"{request.request_id}.request.json" != path.name:
        raise ApprovalError(f"{path} is not the request it claims to be: its file is not owned by "
                            f"{str(request.requester)[:40]}")
    if owner == approver_uid:
        raise ApprovalError("this is your own job's request; a second approver must be someone else")
    if not isinstance(request.args, dict) or not isinstance(request.inputs, dict) \
            or request.bound_digest() != request.digest:
        raise ApprovalError(f"{path}: what it would run does not match its digest; it was changed, do not approve it")
    return request


def write_answer(spool: Path, request: SecondRequest, decision: str, approvers: Sequence[str],
                 approver: str | None = None, approver_uid: int | None = None) -> Path:
    """The approver's answer to ``request``, as a fresh file of their own; ApprovalError when they are not one of
    ``approvers``, it is their own job, or it was answered already."""
    approver_uid = os.geteuid() if approver_uid is None else approver_uid
    approver = approver or pwd.getpwuid(approver_uid).pw_name
    if decision not in ANSWERS:
        raise ApprovalError(f"answer {decision!r} is not one of {', '.join(ANSWERS)}")
    if approver not in approvers:
        raise ApprovalError(f"{approver} is not one of your site's approvers ({', '.join(approvers)})")
    if approver_uid == request.requester_uid:
        raise ApprovalError("this is your own job's request; a second approver must be someone else")
    path = answer_path(spool, request.request_id)
    try:
        _write_new(path, asdict(SecondAnswer(request.request_id, request.digest, decision, approver, time.time())))
    except FileExistsError:
        raise ApprovalError(f"request {request.request_id} was answered already") from None
    return path


def read_answer(spool: Path, request: SecondRequest, approvers: Sequence[str],
                uid_of: Callable[[str], int | None] | None = None) -> SecondAnswer | None:
    """The approver's answer to ``request``, None while there is none; ApprovalError for an answer file that is
    not one approver's own answer to this very card (owned by the person, by someone else, another digest)."""
    path = answer_path(spool, request.request_id)
    if not os.path.lexists(path):
        return None
    data, owner = _read_owned(path)
    uid_of = uid_of or _uid
    if owner == request.requester_uid:
        raise ApprovalError(f"the answer {path} is your own file; only an approver's own answer counts")
    named = data.get("approver")
    if not isinstance(named, str) or named not in approvers or uid_of(named) != owner:
        raise ApprovalError(f"the answer {path} is not owned by the approver it names; it does not count")
    if data.get("request_id") != request.request_id or data.get("digest") != request.digest:
        raise ApprovalError(f"the answer {path} answers another card than this job's; it does not count")
    if data.get("decision") not in ANSWERS:
        raise ApprovalError(f"the answer {path} is neither approved nor denied")
    answered = data.get("answered")
    return SecondAnswer(request.request_id, request.digest, str(data["decision"]), named,
                        float(answered) if isinstance(answered, (int, float)) else 0.0)


async def wait_for_answer(spool: Path, request: SecondRequest, approvers: Sequence[str], timeout: float,
                          uid_of: Callable[[str], int | None] | None = None) -> SecondAnswer | None:
    """The approver's answer once it is written, or None after ``timeout`` seconds; ApprovalError for a bad one."""
    deadline = time.monotonic() + timeout
    while True:
        answer = read_answer(spool, request, approvers, uid_of)
        if answer is not None or time.monotonic() >= deadline:
            return answer
        await asyncio.sleep(POLL_SECONDS)


def withdraw(spool: Path, request_id: str) -> None:
    """Remove the person's own request (it was denied or ended); nothing happens when it is gone."""
    try:
        os.unlink(request_path(spool, request_id))
    except OSError:
        pass


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _write_new(path: Path, data: Mapping[str, Any]) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    handle = os.open(path, flags, 0o644)
    try:
        os.fchmod(handle, 0o644)
        os.write(handle, json.dumps(data, sort_keys=True).encode())
    finally:
        os.close(handle)


def _read_owned(path: Path) -> tuple[dict[str, Any], int]:
    """A spool file's JSON and its owner's uid; ApprovalError for a link, a non-file, a large or non-JSON one."""
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise ApprovalError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        found = os.fstat(handle)
        if not stat.S_ISREG(found.st_mode):
            raise ApprovalError(f"{path} is not a regular file")
        if found.st_size > MAX_FILE:
            raise ApprovalError(f"{path} is larger than {MAX_FILE // 1024} KiB")
        raw = os.read(handle, MAX_FILE + 1)
    finally:
        os.close(handle)
    try:
        data = parse_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ApprovalError(f"{path} is not JSON") from None
    if not isinstance(data, dict):
        raise ApprovalError(f"{path} is not a JSON object")
    return data, found.st_uid
