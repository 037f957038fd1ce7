"""A private key is known by its content, whatever its name, and a secret streamed in pieces is blanked whole.

On the real dev cluster (every transport), a key under a readable root named ``deploy_key``,
``backup.old`` or ``notes.txt`` is refused by the one remote read step before any reader runs (and
``backup.PEM`` by its name, in any case);
a key further into a long log than that step looks is removed from what comes back. Through a
real session (scripted model over HTTP), a key in a tool's output never reaches the model, the
action log or ``betty log export``; a token the model streams in 2, 5 or 40 pieces is whole
nowhere in the timeline's bug bundle.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, say, say_in
from test_plans_fast import converse

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.timeline import bug_bundle
from betty_jupyter.cluster.commands import run_allowed
from betty_jupyter.cluster.file_reads import KEY_SCAN
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.cluster.scripted import Reply, ScriptedTransport
from betty_jupyter.errors import PolicyError
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.secret_names import KEY_REMOVED, blank_private_keys, blank_secret_text

BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"


def key(header: str = "OPENSSH PRIVATE KEY", newline: str = "\n", canary: str = "") -> str:
    """A private key block whose body holds ``canary`` (a unique text no output may keep)."""
    return f"-----BEGIN {header}-----{newline}{BODY}{canary}{newline}{BODY}{newline}-----END {header}-----{newline}"


def putty(canary: str) -> str:
    return (f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: me\nPublic-Lines: 2\nAAAAC3Nza\n"
            f"Private-Lines: 1\nAAAAI{canary}\nPrivate-MAC: 0123abcd\n")


def key_files(canary: str) -> dict[str, str]:
    """Files whose names say nothing (or say it in capitals), each holding a private key."""
    return {
        "deploy_key": key(canary=canary),
        "backup.old": key("RSA PRIVATE KEY", canary=canary),
        "notes.txt": key("RSA PRIVATE KEY", "\r\n", canary),
        "Key.TXT": key("EC PRIVATE KEY", canary=canary).lower(),
        "exported.crt": "Bag Attributes\n    localKeyID: 01\n" + key("ENCRYPTED PRIVATE KEY", canary=canary),
        "work.ppk": putty(canary),
        "gpg-backup.asc": key("PGP PRIVATE KEY BLOCK", canary=canary),
        "train.log": "epoch 1 loss 0.3\n" * 200 + key("PRIVATE KEY", canary=canary) + "epoch 2 loss 0.2\n",
        "BACKUP": "\n\n  " + key(canary=canary),
    }


@pytest.mark.cluster
def test_a_file_holding_a_private_key_is_refused_on_the_cluster_whatever_its_name(profile, tmp_path) -> None:
    canary = uuid.uuid4().hex
    files = key_files(canary)
    for name, text in files.items():
        (tmp_path / name).write_bytes(text.encode())
    (tmp_path / "link-to-key").symlink_to(tmp_path / "deploy_key")
    transport, policy = profile.open_transport(), profile.policy()
    try:
        for name in [*files, "link-to-key"]:
            for command in (["cat", str(tmp_path / name)], ["tail", "-n", "3", str(tmp_path / name)],
                            ["head", "-c", "10", str(tmp_path / name)], ["wc", "-l", str(tmp_path / name)]):
                with pytest.raises(PolicyError, match="which holds a private key; Betty never reads such files") \
                        as refused:
                    run_sync(run_allowed(transport, policy, command))
                assert canary not in str(refused.value) and "\n" not in str(refused.value)
        listed = run_sync(run_allowed(transport, policy, ["ls", str(tmp_path)]))  # the directory itself is fine
        assert listed.ok and "deploy_key" in listed.stdout
    finally:
        run_sync(transport.close())


@pytest.mark.cluster
@pytest.mark.parametrize("name", ["backup.PEM", "Server.Key", "ID_RSA", "keys/Id_Ed25519.old", ".SSH/config"])
def test_secret_names_are_matched_in_any_case_before_and_after_a_link(profile, tmp_path, name: str) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("no key inside, but the name says it may hold one\n")
    (tmp_path / "plain.txt").symlink_to(path)
    transport, policy = profile.open_transport(), profile.policy()
    try:
        with pytest.raises(PolicyError, match="may hold secrets"):
            run_sync(run_allowed(transport, policy, ["cat", str(path)]))
        with pytest.raises(PolicyError, match=r"plain.txt leads to .*, which may hold secrets"):
            run_sync(run_allowed(transport, policy, ["cat", str(tmp_path / "plain.txt")]))
    finally:
        run_sync(transport.close())


@pytest.mark.cluster
def test_a_key_deep_in_a_long_log_is_removed_from_what_comes_back(profile, tmp_path) -> None:
    canary = uuid.uuid4().hex
    log = tmp_path / "long.log"
    filler = "".join(f"step {n:07d} loss 0.{n % 97:02d}\n" for n in range(KEY_SCAN // 20 + 100))
    log.write_text(filler + "job printed:\n" + key("RSA PRIVATE KEY", "\r\n", canary) + "step done\n")
    prose = tmp_path / "howto.md"
    prose.write_text("Rotate the PRIVATE KEY monthly; a line of -----BEGIN----- dashes is no key.\n")
    transport, policy = profile.open_transport(), profile.policy()
    try:
        tail = run_sync(run_allowed(transport, policy, ["tail", "-n", "8", str(log)]))
        whole = run_sync(run_allowed(transport, policy, ["cat", str(log)]))
        plain = run_sync(run_allowed(transport, policy, ["cat", str(prose)]))
    finally:
        run_sync(transport.close())
    assert tail.ok and canary not in tail.stdout and BODY not in tail.stdout
    assert tail.stdout.endswith(f"job printed:\n{KEY_REMOVED}\r\nstep done\n"), tail.stdout[-200:]
    assert whole.ok and canary not in whole.stdout and KEY_REMOVED in whole.stdout
    assert plain.ok and plain.stdout == prose.read_text()


@pytest.mark.parametrize("text", [
    key(), key("RSA PRIVATE KEY", "\r\n"), key("ENCRYPTED PRIVATE KEY").lower(), putty(""), key("DSA PRIVATE KEY")[:60],
    "log line\n" + key("PGP PRIVATE KEY BLOCK") + "next line\n", "a " + key().replace("OPENSSH", "OpenSSH"),
])
def test_every_private_key_block_is_blanked_to_its_end(text: str) -> None:
    for blanked in (blank_private_keys(text), blank_secret_text(text)):
        assert BODY[:20] not in blanked and "AAAAI" not in blanked and KEY_REMOVED in blanked, blanked
    assert blank_private_keys("log line\n" + key() + "next line\n") == f"log line\n{KEY_REMOVED}\nnext line\n"


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    return Workspace.at(tmp_path / "project")


def test_a_key_in_a_read_reaches_neither_the_model_nor_the_log_nor_its_export(workspace) -> None:
    canary = uuid.uuid4().hex
    printed = "epoch 9\n" + key("OPENSSH PRIVATE KEY", "\r\n", canary) + "epoch 10\n"
    cluster = ScriptedTransport(answer=lambda argv: Reply(stdout=printed))

    async def answer(session: Any, broker: Any, request: Any) -> None:
        raise AssertionError(f"a card was shown for {request.tool}")

    with ScriptedLLM() as llm:
        llm.add(call("cluster_run", {"command": "tail -n 40 /data/run.log"}), say("Done."))
        reason, events, session_id = asyncio.run(converse(workspace, llm, cluster, answer, mode="auto"))
        told = json.dumps(llm.requests[-1]["messages"])
    assert reason == "finished" and "epoch 10" in told
    assert canary not in told and KEY_REMOVED in told
    assert canary not in json.dumps([e.model_dump(mode="json") for e in events])
    exported = run_betty("log", "export", "--dir", str(workspace.root))
    assert exported.returncode == 0 and "cluster_run" in exported.stdout and canary not in exported.stdout
    assert not any(canary in path.read_text() for path in workspace.root.rglob("*") if path.is_file()
                   and path.suffix in (".jsonl", ".txt", ".json", ".log", ".md"))


@pytest.mark.parametrize("pieces", [2, 5, 40])
def test_a_token_streamed_in_pieces_is_whole_nowhere_in_the_bug_bundle(workspace, pieces: int) -> None:
    token = "sk-proj-" + uuid.uuid4().hex + uuid.uuid4().hex[:12]
    block = key(canary=uuid.uuid4().hex)
    head, tail = "Your key is ", f" and your file holds:\n{block}done"
    reply = head + token + tail
    cut = [round(len(token) * n / pieces) for n in range(pieces + 1)]
    chunks = [token[cut[n]:cut[n + 1]] for n in range(pieces)]
    chunks[0], chunks[-1] = head + chunks[0], chunks[-1] + tail
    assert all(token[:12] not in chunk for chunk in chunks[1:]) and token not in chunks[0]

    async def answer(session: Any, broker: Any, request: Any) -> None:
        raise AssertionError(f"a card was shown for {request.tool}")

    with ScriptedLLM() as llm:
        llm.add(say_in(chunks))
        reason, events, session_id = asyncio.run(converse(workspace, llm, ScriptedTransport(), answer, mode="auto"))
    assert reason == "finished"
    streamed = [e.payload.text for e in events if e.type == "message_delta"]
    assert "".join(streamed) == reply and len(streamed) == pieces
    bundle = bug_bundle(ActionLog(workspace.root), session_id, [e.model_dump(mode="json") for e in events], {})
    text = zipfile.ZipFile(io.BytesIO(bundle)).read("events.jsonl").decode()
    for secret in (token, token[:20], token[-20:], block.splitlines()[1]):
        assert secret not in text
    assert text.count("[redacted]") >= 2 and KEY_REMOVED in text  # the joined pieces, and the whole message
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["type"] for line in lines].count("message_delta") == 1


def test_the_pieces_of_two_replies_are_joined_apart() -> None:
    def event(kind: str, seq: int, **payload: Any) -> dict[str, Any]:
        return {"type": kind, "session_id": "s", "seq": seq, "ts": 0.0, "payload": payload}

    events = [event("message_delta", 1, text="sk-proj-abcdef"), event("message_delta", 2, text="0123456789abcdef"),
              event("message", 3, role="assistant", text="sk-proj-abcdef0123456789abcdef"),
              event("message_delta", 4, text="second"), event("done", 5, reason="finished")]
    bundle = bug_bundle(ActionLog(Path("/nonexistent-betty-root")), "s", events, {})
    lines = [json.loads(line) for line in zipfile.ZipFile(io.BytesIO(bundle)).read("events.jsonl").decode()
             .splitlines()]
    assert [(line["type"], line["seq"]) for line in lines] == [("message_delta", 1), ("message", 3),
                                                                ("message_delta", 4), ("done", 5)]
    assert lines[0]["payload"]["text"] == "[redacted]" and lines[2]["payload"]["text"] == "second"
