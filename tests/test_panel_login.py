"""A cluster's second factor answered in the side panel, in a real browser: a real login node asks a TOTP code.

JupyterLab serves a project whose config adds two clusters behind :mod:`second_factor`'s login node (the dev
cluster's key, then ``Verification code:`` through PAM): one over the system ``ssh``, one over paramiko. A
cluster test started from outside the browser, as anything in the server might start a login, waits on the
question; the panel shows it by itself, the person types the code a phone would show and presses **Log in**
(or **Cancel**), and the login goes on (or fails with one line). The code appears nowhere afterwards: not in
the page, not in any field, not in the server's log, which records Betty's and paramiko's debug messages.
Screenshots: ``test-artifacts/screenshots/login-*.png`` (the card, and a failure's).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from notebook_support import llm, new_project  # noqa: F401 (llm is a fixture)
from panel_support import WAIT_MS, lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401
from playwright.sync_api import Locator, Page, expect
from second_factor import ALIAS, SecondFactorSshd, end_masters, login_node, totp  # noqa: F401 (fixtures)

from betty_jupyter.safe_text import visible

# Betty's (its modules' and its requests') and paramiko's loggers at debug level into the server's log.
DEBUG_LOGGING = {"ServerApp": {"log_level": "DEBUG", "logging_config": {"loggers": {
    name: {"level": "DEBUG", "handlers": ["console"]} for name in ("betty_jupyter", "BettyApp", "paramiko")}}}}


@pytest.fixture(scope="module")
def masters() -> Iterator[Path]:
    """A short private directory for the openssh cluster's control sockets."""
    directory = Path(tempfile.mkdtemp(prefix="bcm-"))
    yield directory
    end_masters(directory)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def fresh_login(masters: Path) -> Iterator[None]:
    """Every test logs in afresh: no openssh master outlives it."""
    yield
    end_masters(masters)


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM,  # noqa: F811
            login_node: SecondFactorSshd, masters: Path) -> dict[str, Any]:  # noqa: F811
    """The panel's project with ``mfa-openssh`` and ``mfa-paramiko`` behind the login node, logging at debug."""
    ssh_config = str(login_node.ssh_config(control_path=f"{masters}/%C"))
    clusters = ({"name": "mfa-openssh", "transport": "openssh", "host": ALIAS, "ssh_config": ssh_config},
                {"name": "mfa-paramiko", "transport": "ssh", "host": ALIAS, "ssh_config": ssh_config})
    made = new_project(tmp_path_factory.mktemp("login-project"), dev_cluster, llm, clusters)
    logging = tmp_path_factory.mktemp("login-logging")
    (logging / "jupyter_server_config.json").write_text(json.dumps(DEBUG_LOGGING))
    made["env"]["JUPYTER_CONFIG_PATH"] = str(logging)
    return made


def test_the_panel_shows_the_login_question_and_the_typed_code_logs_in(
        lab: JupyterServer, page: Page) -> None:  # noqa: F811
    with screenshot_on_failure(page, "failure", "login"), ThreadPoolExecutor(1) as outside:
        panel = open_the_panel(page, lab)
        checking = start_cluster_test(outside, lab, "mfa-openssh")
        card, question = the_card(panel, lab)
        field = card.get_by_test_id("betty-login-answer")
        expect(field).to_have_attribute("type", "password")
        expect(field).to_have_attribute("autocomplete", "one-time-code")
        screenshot(page, "question", "login")

        code = totp()
        field.press_sequentially(code)
        card.get_by_role("button", name="Log in").click()
        expect(panel.get_by_test_id("betty-login-question")).to_have_count(0, timeout=WAIT_MS)
        checked = checking.result(WAIT_MS / 1000)
        assert checked["ok"], checked
        assert lab.request("GET", "login-questions") == {"questions": []}
        expect(panel.get_by_test_id("betty-login-problem")).to_have_count(0)

        assert code not in page.content(), "the typed code is still in the page"
        fields = page.evaluate("() => Array.from(document.querySelectorAll('input, textarea'), e => e.value)")
        assert code not in "\n".join(fields), "the typed code is still in a field of the page"
        log = Path(lab.log.name).read_text(errors="replace")
        assert question["id"] in log, "the server's log did not record the answer's request: the check proves nothing"
        assert code not in log, "the typed code is in the server's log"


def test_cancel_in_the_panel_fails_the_login_with_one_line(lab: JupyterServer, page: Page) -> None:  # noqa: F811
    with screenshot_on_failure(page, "failure", "login-cancel"), ThreadPoolExecutor(1) as outside:
        panel = open_the_panel(page, lab)
        checking = start_cluster_test(outside, lab, "mfa-paramiko")
        card, _ = the_card(panel, lab)
        card.get_by_role("button", name="Cancel").click()
        expect(panel.get_by_test_id("betty-login-question")).to_have_count(0, timeout=WAIT_MS)
        checked = checking.result(WAIT_MS / 1000)
        assert not checked["ok"] and "cancelled in Betty's panel" in checked["message"], checked
        assert "\n" not in checked["message"] and "Verification code" in checked["message"], checked


def start_cluster_test(outside: ThreadPoolExecutor, lab: JupyterServer, cluster: str) -> Future[dict[str, Any]]:
    """``POST clusters/<cluster>/test`` from outside the browser; it answers once the login is over."""
    return outside.submit(lab.request, "POST", f"clusters/{cluster}/test", {}, WAIT_MS / 1000)


def the_card(panel: Locator, lab: JupyterServer) -> tuple[Locator, dict[str, Any]]:
    """The card the panel shows by itself for the one waiting question: the login node's prompt, verbatim."""
    card = panel.get_by_test_id("betty-login-question")
    expect(card).to_be_visible(timeout=WAIT_MS)
    questions = lab.request("GET", "login-questions")["questions"]
    assert len(questions) == 1, questions
    question = questions[0]
    assert "Verification code" in question["prompt"] and question["echo"] is False, question
    expect(card).to_have_attribute("data-question-id", question["id"])
    assert card.locator(".betty-LoginQuestion-head").text_content() == f"{visible(question['cluster'])} asks to log in"
    assert card.get_by_test_id("betty-login-prompt").text_content() == visible(question["prompt"])
    return card, question
