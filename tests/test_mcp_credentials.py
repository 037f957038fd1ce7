"""The credentials Betty issues to MCP clients: made, listed and revoked with ``betty mcp token``, kept only as a hash
in a file closed to everyone else; and ``betty mcp`` sends one only to the server it was made for, never over plain
http to another machine, and never takes the Jupyter server's own token. A small HTTP server of the test's own
stands for the Jupyter servers, and records every request that reaches it."""

from __future__ import annotations

import json
import os
import pwd
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import run_betty
from jupyter_server_proc import free_port
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from betty_jupyter.errors import ConfigError, UsageError
from betty_jupyter.mcp_credentials import McpCredentials, credentials_dir, server_url

HOSTILE_NAMES = ["", "Claude", "a b", "../x", "a/b", "a'; echo x", "a\n0", "x" * 41, "-x", ".x", "é"]
NOT_SENT_TO = ["http://10.0.0.1:8888/", "http://evil.example/", "http://127.0.0.1.evil.example/",
               "http://localhost.evil.example/", "ftp://127.0.0.1/", "file:///etc/passwd", "javascript:alert(1)",
               "https://user:pass@host.example/", "http://127.0.0.1:8888/?token=x", "//127.0.0.1/"]


class Listener:
    """An HTTP server on 127.0.0.1 that answers every request 403 with one line, and records each one."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []
        listener = self

        class Refuse(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                listener.requests.append(("POST", self.path, self.headers.get("Authorization", "")))
                body = json.dumps({"error": "the listener refused it"}).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_DELETE = do_POST  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    running = Listener()
    try:
        yield running
    finally:
        running.close()


def betty_mcp(*args: str, **variables: str) -> Client:
    """An MCP client that spawns ``betty mcp ARGS`` with only ``variables`` (and the test's Jupyter config) set."""
    env = {"JUPYTER_CONFIG_DIR": os.environ["JUPYTER_CONFIG_DIR"], "PATH": os.environ["PATH"], **variables}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "betty_jupyter.cli", "mcp", *args], env=env))


def test_a_credential_is_shown_once_and_kept_only_as_a_hash_in_a_file_closed_to_others() -> None:
    made = run_betty("mcp", "token", "add", "claude-code", "--url", "http://127.0.0.1:8888")
    assert made.returncode == 0, made.stderr
    token = next(word for word in made.stdout.split() if word.startswith("betty-mcp-"))
    assert "claude mcp add --transport http betty http://127.0.0.1:8888/betty/mcp --header " \
           f"'Authorization: Bearer {token}'" in made.stdout
    assert f"claude mcp add betty --env BETTY_MCP_TOKEN={token} -- betty mcp" in made.stdout
    store = credentials_dir()
    assert (store.stat().st_mode & 0o777, (store / "credentials.json").stat().st_mode & 0o777) == (0o700, 0o600)
    kept = (store / "credentials.json").read_text()
    assert token not in kept and token[10:30] not in kept
    listed = run_betty("mcp", "token", "list")
    assert listed.returncode == 0 and listed.stdout.startswith("claude-code\thttp://127.0.0.1:8888/\t")
    assert token not in listed.stdout and json.loads(kept)["credentials"][0]["sha256"] not in listed.stdout
    assert McpCredentials().holder(token).name == "claude-code"
    again = run_betty("mcp", "token", "add", "claude-code", "--url", "http://127.0.0.1:8888")
    assert again.returncode == 1 and "there is already a credential called 'claude-code'" in again.stderr
    revoked = run_betty("mcp", "token", "revoke", "claude-code")
    assert revoked.returncode == 0 and McpCredentials().holder(token) is None
    gone = run_betty("mcp", "token", "revoke", "claude-code")
    assert gone.returncode == 1 and gone.stderr == "betty: error: no MCP credential called 'claude-code'; there are: none\n"


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_credential_name_is_plain_words_only(name: str) -> None:
    with pytest.raises(UsageError, match="is not a credential name"):
        McpCredentials().add(name, "http://127.0.0.1:8888/")
    assert McpCredentials().listed() == []


@pytest.mark.parametrize("url", NOT_SENT_TO)
def test_a_credential_is_never_made_for_plain_http_to_another_machine_nor_an_odd_url(url: str) -> None:
    with pytest.raises(UsageError):
        server_url(url)
    made = run_betty("mcp", "token", "add", "ide", "--url", url)
    assert made.returncode == 1 and "betty-mcp-" not in made.stdout + made.stderr
    assert McpCredentials().listed() == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:8888", "http://localhost:8888/", "http://[::1]:8888/",
                                 "https://ondemand.example.edu/node/c1/4567"])
def test_loopback_over_http_and_any_host_over_https_are_fine(url: str) -> None:
    assert server_url(url).endswith("/")


@pytest.mark.parametrize("spoil", ["file mode", "folder mode", "link", "file owner", "folder owner"])
def test_a_credentials_file_others_could_touch_is_not_trusted(spoil: str, tmp_path: Path) -> None:
    credentials = McpCredentials()
    _, token = credentials.add("ide", "http://127.0.0.1:8888/")
    if spoil == "file mode":
        credentials.path.chmod(0o644)
    elif spoil == "folder mode":
        credentials.directory.chmod(0o770)
    elif spoil.endswith("owner"):  # another user's, mode 0600 all the same (the suite runs as root, as sbatch --uid)
        os.chown(credentials.path if spoil == "file owner" else credentials.directory, pwd.getpwnam("nobody").pw_uid, -1)
    else:
        planted = tmp_path / "planted.json"
        planted.write_text(credentials.path.read_text())
        planted.chmod(0o600)
        credentials.path.unlink()
        credentials.path.symlink_to(planted)
    with pytest.raises(ConfigError, match="readable by you alone"):
        credentials.holder(token)
    listed = run_betty("mcp", "token", "list")
    assert listed.returncode == 1 and "Betty trusts no MCP credential in it" in listed.stderr


@pytest.mark.parametrize("variable", ["JUPYTER_TOKEN", "BETTY_SERVER_TOKEN"])
def test_betty_mcp_never_takes_the_jupyter_token(listener: Listener, variable: str) -> None:
    async def main() -> None:
        with pytest.raises(Exception):
            async with betty_mcp("--url", listener.url, **{variable: "the-jupyter-token"}) as client:
                await client.list_tools()

    anyio.run(main)
    assert listener.requests == []
    told = run_betty("mcp", "--url", listener.url, env={**os.environ, variable: "the-jupyter-token"})
    assert told.returncode == 1 and told.stderr == (
        "betty: error: set BETTY_MCP_TOKEN to a credential Betty issued for this client (betty mcp token add NAME "
        "prints one); betty mcp never takes the Jupyter server's own token\n")


def test_betty_mcp_sends_a_credential_only_to_the_server_it_was_made_for(listener: Listener) -> None:
    elsewhere = Listener()
    try:
        _, token = McpCredentials().add("ide", listener.url)
        told = run_betty("mcp", "--url", elsewhere.url, env={**os.environ, "BETTY_MCP_TOKEN": token})
        assert told.returncode == 1 and told.stderr == (
            f"betty: error: this credential (mcp:ide) was issued for {listener.url}; betty mcp sends it nowhere else "
            f"(not to {elsewhere.url})\n")
        assert elsewhere.requests == []

        async def main() -> None:
            async with betty_mcp("--mode", "auto", BETTY_MCP_TOKEN=token,
                                 BETTY_SERVER_URL=listener.url) as client:
                with pytest.raises(MCPError) as refused:
                    await client.list_tools()
                assert refused.value.message == "the listener refused it"

        anyio.run(main)
        assert elsewhere.requests == []
        assert listener.requests and {request[:2] for request in listener.requests} == {
            ("POST", "/betty/mcp?mode=auto")}
        assert {request[2] for request in listener.requests} == {f"Bearer {token}"}
    finally:
        elsewhere.close()


@pytest.mark.parametrize("url", ["http://10.0.0.1:8888/", "http://evil.example/"])
def test_a_credential_made_elsewhere_goes_over_https_or_to_this_machine_only(url: str) -> None:
    told = run_betty("mcp", "--url", url, env={**os.environ, "BETTY_MCP_TOKEN": "betty-mcp-" + "x" * 43})
    assert told.returncode == 1 and "only over https, never plain http" in told.stderr


def test_credentials_made_at_once_from_many_places_are_all_kept() -> None:
    names = [f"client-{i}" for i in range(12)]
    with ThreadPoolExecutor(6) as pool:
        made = list(pool.map(lambda name: run_betty("mcp", "token", "add", name, "--url", "http://127.0.0.1:8888"),
                             names))
    assert [run.returncode for run in made] == [0] * len(names), [run.stderr for run in made if run.returncode]
    assert sorted(credential.name for credential in McpCredentials().listed()) == sorted(names)


def test_betty_mcp_says_in_one_line_when_its_server_does_not_answer() -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    _, token = McpCredentials().add("ide", url)

    async def main() -> None:
        async with betty_mcp(BETTY_MCP_TOKEN=token) as client:
            with pytest.raises(MCPError) as silent:
                await client.list_tools()
            assert silent.value.message.startswith(f"Betty's server at {url}betty/mcp does not answer (")
            assert silent.value.message.endswith("is Jupyter running with Betty's extension?")
            assert "\n" not in silent.value.message
            call = await client.call_tool("cluster_queue", {})
            assert call.is_error and "does not answer" in call.content[0].text

    anyio.run(main)
