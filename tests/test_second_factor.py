"""Logging in where the cluster asks for a second factor, on both SSH transports.

A real sshd requires ``publickey,keyboard-interactive``; PAM asks for a TOTP code through
Debian's pam_google_authenticator (:mod:`second_factor`). The person's answer comes from a
recording answerer that computes the code, as a phone would.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from betty_jupyter.transport.login import LoginQuestion, answer_login_questions_with
from betty_jupyter.transport.openssh import OpenSSHTransport
from betty_jupyter.transport.ssh import SSHTarget, SSHTransport
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.errors import TransportError
from second_factor import ALIAS, SecondFactorSshd, control_dir, end_masters, login_node, totp  # noqa: F401 (fixtures)


class Phone:
    """Answers each login question with the current TOTP code (or a wrong one) and remembers it."""

    def __init__(self, wrong: bool = False) -> None:
        self.questions: list[LoginQuestion] = []
        self.answers: list[str] = []
        self.wrong = wrong

    def __call__(self, question: LoginQuestion) -> str:
        self.questions.append(question)
        code = totp()
        answer = f"{(int(code) + 1) % 1_000_000:06d}" if self.wrong else code
        self.answers.append(answer)
        return answer


@pytest.fixture
def phone():
    """A phone answering every login question in this process, for one test."""
    answering = Phone()
    previous = answer_login_questions_with(answering)
    yield answering
    answer_login_questions_with(previous)


def _openssh(login_node: SecondFactorSshd, control_dir: Path, **options) -> OpenSSHTransport:
    config = login_node.ssh_config(control_path=f"{control_dir}/%C")
    return OpenSSHTransport(ALIAS, str(config), **options)


def test_paramiko_asks_the_person_once_and_keeps_the_connection(login_node, phone, caplog):
    caplog.set_level(logging.DEBUG)
    transport = SSHTransport(SSHTarget.from_ssh_config(ALIAS, str(login_node.ssh_config())), pool_size=2)
    try:
        first = run_sync(transport.run(["hostname"]))
        assert first.ok, first.stderr
        for _ in range(3):  # more shells on the same connection: no new login, no new question
            assert run_sync(transport.run(["squeue", "--noheader", "--format=%i"])).ok
    finally:
        run_sync(transport.close())
    assert len(phone.questions) == 1, phone.questions
    assert "Verification code" in phone.questions[0].prompt  # the server's own words
    assert phone.questions[0].cluster == ALIAS and phone.questions[0].echo is False
    assert transport.connections_opened == 1
    assert phone.answers[0] not in caplog.text  # the answer is never logged


def test_a_paramiko_link_opened_early_asks_nobody_and_the_command_asks_once(login_node, phone):
    transport = SSHTransport(SSHTarget.from_ssh_config(ALIAS, str(login_node.ssh_config())), pool_size=2)
    try:
        transport.open_early()
        opening = transport._opening
        assert opening is not None
        opening.join(60)
        assert not opening.is_alive() and phone.questions == [] and transport.connections_opened == 0
        assert run_sync(transport.run(["hostname"])).ok
        assert len(phone.questions) == 1 and transport.connections_opened == 1
    finally:
        run_sync(transport.close())


def test_openssh_asks_the_person_once_and_keeps_a_master(login_node, phone, control_dir, caplog):
    caplog.set_level(logging.DEBUG)
    transport = _openssh(login_node, control_dir, pool_size=2)
    try:
        first = run_sync(transport.run(["hostname"]))
        assert first.ok, first.stderr
        for _ in range(3):
            assert run_sync(transport.run(["squeue", "--noheader", "--format=%i"])).ok
        written = run_sync(transport.put(b"data\n", f"{control_dir}/nested/file.txt"))
        assert Path(written).read_bytes() == b"data\n"
    finally:
        run_sync(transport.close())
    assert len(phone.questions) == 1, phone.questions
    assert "Verification code" in phone.questions[0].prompt
    assert transport.masters_opened == 1
    # The master outlives the transport (ControlPersist): a new transport logs in with no question.
    again = _openssh(login_node, control_dir)
    try:
        assert run_sync(again.run(["true"])).ok
    finally:
        run_sync(again.close())
    assert len(phone.questions) == 1 and again.masters_opened == 0 and again.reused_master
    assert phone.answers[0] not in caplog.text


def test_openssh_reuses_the_persons_own_master_without_any_login(login_node, control_dir, tmp_path):
    """The person keeps a ControlMaster open in a terminal; Betty rides on it and never asks."""
    config = login_node.ssh_config(control_path=f"{control_dir}/%C")
    askpass = tmp_path / "phone.sh"
    askpass.write_text(f"#!/bin/sh\necho {totp()}\n")
    askpass.chmod(0o700)
    env = {**os.environ, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"}
    opened = subprocess.run(["ssh", "-F", str(config), "-o", "ControlMaster=yes", "-o", "ControlPersist=300",
                             "-f", "-N", ALIAS], env=env, capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    assert opened.returncode == 0, opened.stderr

    def nobody(question: LoginQuestion) -> str:
        raise AssertionError(f"Betty asked {question.prompt!r} although a master was open")

    previous = answer_login_questions_with(nobody)
    transport = OpenSSHTransport(ALIAS, str(config))
    try:
        result = run_sync(transport.run(["squeue", "--noheader", "--format=%i"]))
        assert result.ok, result.stderr
    finally:
        run_sync(transport.close())
        answer_login_questions_with(previous)
    assert transport.reused_master and transport.masters_opened == 0


def test_openssh_without_a_control_path_keeps_its_own_master_in_a_private_directory(login_node, phone,
                                                                                  monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="bh-"))
    monkeypatch.setenv("HOME", str(home))
    transport = OpenSSHTransport(ALIAS, str(login_node.ssh_config()))
    try:
        assert run_sync(transport.run(["true"])).ok
        sockets = home / ".betty" / "ssh"
        assert transport.target.control_path.startswith(f"{sockets}/cm-")
        assert Path(transport.target.control_path).is_socket()
        assert stat.S_IMODE(sockets.stat().st_mode) == 0o700
    finally:
        run_sync(transport.close())
        end_masters(home / ".betty" / "ssh")
        shutil.rmtree(home, ignore_errors=True)
    assert len(phone.questions) == 1


def _refused_login(login_node: SecondFactorSshd, control_dir: Path, kind: str, answerer) -> str:
    """Log in over ``kind`` with ``answerer`` answering (None: nobody); the one-line refusal."""
    previous = answer_login_questions_with(answerer)
    if kind == "ssh":
        transport = SSHTransport(SSHTarget.from_ssh_config(ALIAS, str(login_node.ssh_config())), connect_timeout=30)
    else:
        transport = _openssh(login_node, control_dir, connect_timeout=30)
    try:
        with pytest.raises(TransportError) as refused:
            run_sync(transport.run(["true"]))
    finally:
        run_sync(transport.close())
        answer_login_questions_with(previous)
    return str(refused.value)


@pytest.mark.parametrize("kind", ["ssh", "openssh"])
def test_a_wrong_code_is_one_clear_line_without_the_code(login_node, control_dir, kind):
    wrong = Phone(wrong=True)
    message = _refused_login(login_node, control_dir, kind, wrong)
    assert "\n" not in message and (ALIAS in message or "127.0.0.1" in message)
    assert wrong.questions and all(answer not in message for answer in wrong.answers)


@pytest.mark.parametrize("kind", ["ssh", "openssh"])
def test_without_anyone_to_ask_the_error_names_the_question(login_node, control_dir, kind):
    assert "Verification code" in _refused_login(login_node, control_dir, kind, None)


@pytest.mark.parametrize("kind", ["ssh", "openssh"])
def test_betty_in_a_terminal_asks_on_the_terminal_without_echo(login_node, control_dir, tmp_path, kind):
    """``betty cluster test`` in a terminal: the server's question on the terminal, the code typed unseen."""
    import pty
    import select
    import sys
    import time

    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [{
        "name": "mfa", "transport": kind, "host": ALIAS,
        "ssh_config": str(login_node.ssh_config(control_path=f"{control_dir}/%C"))}]}}))
    leader, follower = pty.openpty()
    betty = subprocess.Popen([sys.executable, "-m", "betty_jupyter.cli", "cluster", "test", "--cluster", "mfa"],
                             stdin=follower, stdout=follower, stderr=follower, start_new_session=True,
                             env={**os.environ, "BETTY_CONFIG": str(config)})
    os.close(follower)
    shown, typed = bytearray(), ""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the terminal closed: betty exited
                    break
                shown.extend(chunk)
            if not typed and b"Verification code" in shown:
                typed = totp()
                os.write(leader, typed.encode() + b"\n")
            if betty.poll() is not None and not ready:
                break
    finally:
        if betty.poll() is None:
            betty.kill()
        betty.wait()
        os.close(leader)
    text = shown.decode(errors="replace")
    assert typed, f"betty never asked: {text!r}"
    assert betty.returncode == 0 and "mfa: OK" in text, text
    assert f"{ALIAS}: " in text and typed not in text  # the question is named, the code is never echoed


def test_a_hostile_prompt_cannot_drive_the_terminal(monkeypatch, capsys):
    """A login node's prompt and instructions reach the terminal with escapes written out."""
    import getpass

    from betty_jupyter.transport.login import ask_on_terminal

    shown: list[str] = []
    monkeypatch.setattr(getpass, "getpass", lambda prompt: shown.append(prompt) or "123456")
    question = LoginQuestion("hpc", "\x1b]0;owned\x07Code:\x1b[2J ", instructions="Duo\x1b[31m push\nor code")
    assert ask_on_terminal(question) == "123456"
    told = capsys.readouterr().err
    assert "\x1b" not in shown[0] + told and "\x07" not in shown[0]
    assert shown[0] == "hpc: \\x1b]0;owned\\x07Code:\\x1b[2J " and "Duo\\x1b[31m push\\nor code" in told
