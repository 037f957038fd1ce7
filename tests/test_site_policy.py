"""The site's policy: read before the person's configuration, checked to be the site's own, failing closed, and
never loosened by the person, whatever face they try it from: their configuration, the approval policy (a mode,
their rules), the agent's gate (a job above the site's limits, the audit), the model server, the readable roots,
the ``betty`` command, the MCP face and an automation. The server's routes are in ``test_site_policy_server.py``.
No cluster: Betty's scripted transport and the scripted model on real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, say

from betty_jupyter import config as config_module
from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.agent.models import Tier
from betty_jupyter.agent.policy import ApprovalPolicy, SessionGrants
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.site import ENV, SitePolicy, find_policy, load_policy, read_trusted
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig, load_config
from betty_jupyter.errors import ConfigError, SiteRefusal
from betty_jupyter.experiments.workspace import Workspace

SITE = {
    "modes": ["off", "propose", "confirm"], "default_mode": "confirm",
    "tools": {"deny": ["cluster_cancel"], "ask": ["cluster_queue"]},
    "llm": {"endpoints": ["http://127.0.0.1:1/v1"], "default": {"base_url": "http://127.0.0.1:1/v1", "model": "site"}},
    "readable_roots": ["/scratch", "/project/lab"],
    "limits": {"gpu_hours": 16, "nodes": 2, "wall_time": "12:00:00", "above": "refuse"},
    "mcp": False,
}
SINFO = SEPARATOR.join(["gpu*", "up", "0/4/0/4", "0/256/0/256", "512000", "gpu:a100:8", "2-00:00:00", "4"]) + "\n"


def script(*directives: str) -> str:
    return "#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "srun python train.py\n"


def write_policy(folder: Path, data: Any, name: str = "policy.json") -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    path.chmod(0o644)
    return path


@pytest.fixture
def site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The site's policy, named by ``$BETTY_SITE_POLICY`` (this machine has no /etc/betty/policy.json)."""
    folder = tmp_path / "site"
    folder.mkdir()
    path = write_policy(folder, SITE)
    monkeypatch.setenv(ENV, str(path))
    monkeypatch.setattr(config_module, "site_config_dirs", lambda: [])
    return path


@pytest.fixture
def person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The person's own configuration file ($BETTY_CONFIG), empty until a test writes it."""
    path = tmp_path / "mine.json"
    path.write_text("{}")
    monkeypatch.setenv("BETTY_CONFIG", str(path))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter-config"))
    return path


def mine(path: Path, **section: Any) -> None:
    path.write_text(json.dumps({"BettyConfig": section}))


# ----- reading the file: the site's alone, whole, or an error ---------------------------------------------------

def test_no_file_is_no_policy_and_every_field_says_default(tmp_path: Path) -> None:
    assert find_policy(None, environ={}, default=tmp_path / "absent.json") is None
    policy = load_policy(None)
    assert policy == SitePolicy() and policy.mode_refusal("auto") is None
    assert {origin for _, _, origin in policy.explain()} == {"default"}


@pytest.mark.parametrize(("text", "says"), [
    ("{", "is not JSON"),
    ("[]", "must be a JSON object"),
    ('{"mode": ["confirm"]}', "unknown field(s) 'mode'"),
    ('{"modes": ["confirm", "yolo"]}', "modes is a non-empty list"),
    ('{"modes": []}', "modes is a non-empty list"),
    ('{"modes": ["confirm"], "default_mode": "auto"}', "default_mode is one of the modes"),
    ('{"tools": {"allow": ["cluster_cancel"]}}', "a site's rules never allow more"),
    ('{"tools": {"deny": ["cluster_run(command"]}}', "has a bad rule"),
    ('{"llm": {"endpoints": ["ftp://x"]}}', "llm.endpoints is a list of http(s) URLs"),
    ('{"llm": {"endpoints": ["https://a.edu"], "default": {"base_url": "https://b.edu", "model": "m"}}}',
     "llm.default names a server llm.endpoints does not list"),
    ('{"readable_roots": ["scratch"]}', "readable_roots is a list of absolute directories"),
    ('{"limits": {"gpu_hours": -1}}', "limits.gpu_hours"),
    ('{"limits": {"nodes": true}}', "limits.nodes"),
    ('{"limits": {"wall_time": "a day"}}', "limits.wall_time is a Slurm time"),
    ('{"limits": {"above": "second_approver"}}', "limits.above is refuse or second"),
    ('{"audit": {"directory": "/no/such/folder"}}', "audit.directory is an existing folder"),
    ('{"audit": {"syslog": "dev/log"}}', "audit.syslog"),
    ('{"mcp": "off"}', "mcp is true or false"),
])
def test_a_bad_policy_is_one_line_naming_the_file_and_the_field(tmp_path: Path, text: str, says: str) -> None:
    path = write_policy(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        load_policy(path)
    assert says in str(refused.value) and str(path) in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_named_file_that_is_missing_or_not_a_file_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the site policy"):
        load_policy(tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_policy(tmp_path)


@pytest.mark.parametrize(("owner", "mode", "folder_mode", "says"), [
    (4242, 0o644, 0o755, "its file is owned by you"),
    (0, 0o666, 0o755, "its file is writable by everyone"),
    (0, 0o664, 0o755, "its file is writable by your group"),
    (0, 0o644, 0o777, "its folder is writable by everyone"),
])
def test_a_file_the_person_could_write_is_refused(tmp_path: Path, owner: int, mode: int, folder_mode: int,
                                                  says: str) -> None:
    """Checked as the person ``4242`` (group 4242): the file's owner, its mode and its folder's mode."""
    folder = tmp_path / "site"
    folder.mkdir()
    path = write_policy(folder, SITE)
    os.chown(path, owner, 4242 if "group" in says else 0)
    path.chmod(mode)
    folder.chmod(folder_mode)
    with pytest.raises(ConfigError) as refused:
        read_trusted(path, uid=4242, groups=[4242])
    assert says in str(refused.value) and "must be owned by root" in str(refused.value)


def test_the_sites_own_file_is_read_for_another_person(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir(mode=0o755)
    path = write_policy(folder, SITE)
    folder.chmod(0o755)
    assert json.loads(read_trusted(path, uid=4242, groups=[4242])) == SITE
    sticky = tmp_path / "tmp-like"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert json.loads(read_trusted(write_policy(sticky, SITE), uid=4242, groups=[4242])) == SITE


def test_the_variable_may_not_replace_the_sites_own_file(tmp_path: Path) -> None:
    site = write_policy(tmp_path, SITE)
    looser = write_policy(tmp_path, {}, "looser.json")
    assert find_policy(None, environ={ENV: str(looser)}, default=tmp_path / "absent.json") == looser
    assert find_policy(None, environ={}, default=site) == site
    assert find_policy(None, environ={ENV: str(site)}, default=site) == site
    for named, default in ((None, site), (str(site), tmp_path / "absent.json")):
        with pytest.raises(ConfigError, match=f"this site's policy is {site}; unset {ENV}"):
            find_policy(named, environ={ENV: str(looser)}, default=default)


def test_a_system_jupyter_configuration_names_the_file_and_the_persons_own_cannot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, person: Path) -> None:
    site = write_policy(tmp_path, SITE)
    system = tmp_path / "etc-jupyter"
    (system / "jupyter_server_config.d").mkdir(parents=True)
    (system / "jupyter_server_config.d" / "betty-site.json").write_text(
        json.dumps({"Betty": {"site_policy": str(site)}}))
    monkeypatch.setattr(config_module, "site_config_dirs", lambda: [system])
    monkeypatch.delenv(ENV, raising=False)
    # the person's own configuration names a looser file: not read for that
    mine(person, clusters=[{"name": "c", "transport": "local"}])
    person.write_text(json.dumps({"Betty": {"site_policy": str(write_policy(tmp_path, {}, "looser.json"))},
                                  **json.loads(person.read_text())}))
    assert load_config().site.source == site and load_config().site.mode_refusal("auto")
    monkeypatch.setenv(ENV, str(tmp_path / "looser.json"))
    with pytest.raises(ConfigError, match="unset BETTY_SITE_POLICY"):
        load_config()


def test_every_face_fails_closed_on_a_broken_policy(site_file: Path, person: Path) -> None:
    site_file.write_text('{"modes": ["auto", "sometimes"]}')
    with pytest.raises(ConfigError, match="modes is a non-empty list"):
        load_config()
    env = {**os.environ, ENV: str(site_file)}
    for argv in (("policy",), ("ask", "hello"), ("mcp", "token", "add", "claude-code", "--url", "http://127.0.0.1:9/")):
        done = run_betty(*argv, env=env)
        assert done.returncode != 0, argv
        assert f"the site policy {site_file}: modes is a non-empty list" in done.stderr, (argv, done.stderr)


# ----- the person's configuration cannot loosen it -------------------------------------------------------------

def test_the_persons_configuration_is_narrowed_and_the_sites_model_lies_under_it(site_file: Path,
                                                                                 person: Path) -> None:
    mine(person, clusters=[{"name": "wide", "transport": "local", "readable_roots": ["/", "/home/ada"]},
                           {"name": "inside", "transport": "local", "readable_roots": ["/scratch/ada"]},
                           {"name": "none", "transport": "local"}],
         llm={"model": "my-choice"}, rules={"allow": ["cluster_queue", "cluster_cancel"]})
    config = load_config()
    assert config.profile("wide").readable_roots == ("/scratch", "/project/lab")
    assert config.profile("inside").readable_roots == ("/scratch/ada",)
    assert config.profile("none").readable_roots == ("/scratch", "/project/lab")
    assert config.profile("wide").policy().readable_roots == ("/scratch", "/project/lab")
    assert config.llm == {"base_url": "http://127.0.0.1:1/v1", "model": "my-choice"}


@pytest.mark.parametrize(("base_url", "allowed"), [
    ("http://127.0.0.1:1/v1", True), ("http://127.0.0.1:1/v1/", True), ("http://127.0.0.1:1/v1/deployments/x", True),
    ("http://127.0.0.1:1/v10", False), ("http://127.0.0.1:2/v1", False), ("https://127.0.0.1:1/v1", False),
    ("http://user@127.0.0.1:1/v1", False), ("http://127.0.0.1:1.evil.example/v1", False), (None, False),
])
def test_only_the_sites_model_servers_are_allowed(base_url: str | None, allowed: bool) -> None:
    site = SitePolicy(source=Path("/etc/betty/policy.json"), llm_endpoints=("http://127.0.0.1:1/v1",))
    llm = {"model": "m", **({"base_url": base_url} if base_url else {})}
    refusal = site.endpoint_refusal(llm)
    assert (refusal is None) == allowed
    if not allowed:
        assert refusal.startswith("your site does not allow the model server")
    assert site.endpoint_refusal({"model": "m", "base_url": "http://127.0.0.1:1/v1",
                                  "planner": {"base_url": "https://api.openai.com/v1", "model": "p"}})
    assert site.endpoint_refusal({"model": "betty-demo"}, offline=True) is None


def test_a_session_with_a_model_server_the_site_refuses_has_no_model_and_says_why(
        site_file: Path, person: Path, tmp_path: Path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    mine(person, clusters=[{"name": "c", "transport": "local"}],
         llm={"base_url": "https://api.openai.com/v1", "model": "gpt"})
    config = load_config()

    async def opened() -> Any:
        return await open_session(Workspace.at(tmp_path / "project"), config, SessionSpec(
            transport=ScriptedTransport(), require_model=False, reads_cluster_facts=False))

    session = asyncio.run(opened())
    assert session.model is None and "your site does not allow the model server https://api.openai.com/v1" in \
        session._parts.no_model_reason
    with pytest.raises(SiteRefusal, match="llm.endpoints in"):
        asyncio.run(open_session(Workspace.at(tmp_path / "project"), config, SessionSpec(
            transport=ScriptedTransport(), reads_cluster_facts=False)))


# ----- the one gate: modes, tools, limits, audit -----------------------------------------------------------------

def test_a_mode_the_site_does_not_allow_is_refused_and_a_start_up_mode_falls_back(site_file: Path) -> None:
    site = load_policy(site_file)
    with pytest.raises(SiteRefusal) as refused:
        ApprovalPolicy("auto", {}, site)
    assert str(refused.value) == (f"your site does not allow auto mode; it allows off, propose, confirm "
                                  f"(modes in {site_file})")
    assert ApprovalPolicy("confirm", {}, site).mode == "confirm"
    assert site.starting_mode("auto") == "confirm" and site.starting_mode("off") == "off"
    with pytest.raises(ConfigError, match="not one of"):
        ApprovalPolicy(site.starting_mode("sometimes"), {}, site)


@pytest.mark.parametrize("mode", ["propose", "confirm"])
def test_the_sites_tool_rules_come_before_the_persons_in_every_mode_and_for_a_persons_own_call(
        site_file: Path, mode: str) -> None:
    site = load_policy(site_file)
    loose = {"allow": ["cluster_queue", "cluster_cancel", "*"]}
    policy = ApprovalPolicy(mode, loose, site)
    cancel = policy.decide("cluster_cancel", {"job_id": "1"}, Tier.ALWAYS_ASK, SessionGrants())
    assert cancel.action == "deny" and cancel.reason.startswith("your site does not allow it (its rule deny "
                                                               "cluster_cancel")
    assert policy.decide_for_person("cluster_cancel", {"job_id": "1"}, Tier.ALWAYS_ASK).action == "deny"
    granted = SessionGrants({"cluster_queue"})
    queue = policy.decide("cluster_queue", {}, Tier.ONCE_PER_SESSION, granted)
    assert queue.action == ("propose" if mode == "propose" else "ask")
    if mode == "confirm":
        assert queue.reason == "your site's rule ask cluster_queue asks every time"
    person = policy.decide_for_person("cluster_queue", {}, Tier.ONCE_PER_SESSION)
    assert (person.action, person.reason) == ("ask", "your site's rule ask cluster_queue asks every time")
    # what the site leaves alone is the person's to decide
    assert policy.decide_for_person("cluster_partitions", {}, Tier.ONCE_PER_SESSION).action == "run"


@pytest.mark.parametrize(("directives", "says"), [
    (("--nodes=3", "--time=01:00:00"), "at most 2 node(s) per job (limits.nodes); this job asks for 3"),
    (("--nodes=1-4", "--time=01:00:00"), "this job asks for 4"),
    (("--time=1-00:00:00",), "at most 12:00:00 of wall time per job (limits.wall_time); this job asks for 1-00:00:00"),
    (("--time=UNLIMITED",), "give the script an #SBATCH --time"),
    (("--gres=gpu:a100:1",), "give the script an #SBATCH --time"),
    (("--gres=gpu:a100:8", "--time=03:00:00"), "at most 16 GPU-hours per job (limits.gpu_hours); this job asks for 24"),
    (("--gpus-per-node=4", "--nodes=2", "--time=02:30:00"), "asks for 20"),
    (("--gres=gpu:2", "--array=0-9", "--time=01:00:00"), "asks for 20 (2 GPU(s) × 1 node(s) × 10 task(s)"),
    (("-N 1", "--gpus-per-task=8", "--ntasks=4", "--time=01:00:00"), "instead of --gpus-per-task"),
    (("-N 3", "-t 30"), "this job asks for 3"),
])
def test_a_job_above_the_sites_limits_is_refused_with_the_limit_named(site_file: Path, directives: tuple[str, ...],
                                                                    says: str) -> None:
    refusal = load_policy(site_file).job_refusal(script(*directives))
    assert refusal is not None and says in refusal and "your site" in refusal


def test_a_job_within_the_limits_and_text_that_is_no_script_pass(site_file: Path) -> None:
    site = load_policy(site_file)
    assert site.job_refusal(script("--nodes=2", "--gres=gpu:a100:4", "--time=02:00:00")) is None
    assert site.job_refusal("print('a cell in the kernel')") is None
    assert SitePolicy().job_refusal(script("--nodes=400", "--time=UNLIMITED")) is None


def turn_config(llm: ScriptedLLM, site: SitePolicy, **section: Any) -> BettyConfig:
    return BettyConfig(clusters=[{"name": "scripted", "transport": "local"}], site=site,
                       llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 3},
                       **section)


def test_the_gate_refuses_a_job_above_the_limits_before_any_card_and_audits_every_call(
        tmp_path: Path) -> None:
    """The model submits 3 nodes: refused before a card, nothing reaches sbatch; the site's audit folder gets
    the same record as the action log, blanked the same way; the model is told the limit."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    audit = tmp_path / "audit"
    audit.mkdir()
    site_path = write_policy(tmp_path, {**SITE, "llm": {}, "audit": {"directory": str(audit)}})
    site = load_policy(site_path)
    workspace = Workspace.at(tmp_path / "project")
    cluster = ScriptedTransport().on("sinfo", stdout=SINFO).on("id", "-un", stdout="ada\n")
    big = script("--nodes=3", "--time=01:00:00", "--export=NONE") + "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwx\n"
    events: list[Any] = []
    with ScriptedLLM() as llm:
        llm.add(call("cluster_submit", {"script": big, "goal": "a big run", "record": False}), say("Refused."))

        async def turn() -> str:
            session = await open_session(workspace, turn_config(llm, site), SessionSpec(
                broker=ApprovalBroker(timeout=5), listeners=(events.append,), transport=cluster))
            return await session.ask("submit it")

        assert asyncio.run(turn()) == "finished"
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert not [e for e in events if e.type == "approval_request"], "no card for a job the site refuses"
    assert not cluster.ran("sbatch") and not cluster.files
    assert "at most 2 node(s) per job (limits.nodes)" in told[0]
    (record,) = ActionLog(workspace.root).read()
    assert record.decision == "refused" and "limits.nodes" in record.summary
    (audited,) = list(audit.iterdir())
    lines = audited.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["call_id"] == record.call_id
    assert "hf_abcdefghijklmnopqrstuvwx" not in audited.read_text()
    assert audited.stat().st_mode & 0o777 == 0o600


def test_the_audit_goes_to_syslog(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "log"))
    listener.settimeout(10)
    site = load_policy(write_policy(tmp_path, {"audit": {"syslog": str(tmp_path / "log")}}))
    site.audit.write('{"tool": "cluster_queue"}\n', "ada")
    message = listener.recv(65536).decode()
    listener.close()
    assert message.startswith("<14>") and message.endswith('betty[' + str(os.getpid()) + ']: {"tool": "cluster_queue"}')


def test_a_mode_switch_and_an_automation_in_a_mode_the_site_refuses_are_refused(site_file: Path,
                                                                               tmp_path: Path) -> None:
    """The Assistant every face shares: its start-up mode falls back to the site's, a switch to auto is refused,
    and a session asked for in auto (an MCP client's ?mode=auto, an automation's mode) is not opened."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    site = load_policy(site_file)
    config = BettyConfig(clusters=[{"name": "c", "transport": "local"}], site=site)

    async def faces() -> None:
        assistant = Assistant(Workspace.at(tmp_path / "project"), config, mode="auto")
        assert assistant.mode == "confirm"
        spec = SessionSpec(cluster="c", transport=ScriptedTransport(), require_model=False, reads_cluster_facts=False)
        session = await open_session(assistant.workspace, config, spec)
        assistant._sessions[session.session_id] = session
        with pytest.raises(SiteRefusal, match="your site does not allow auto mode"):
            assistant.set_mode(session.session_id, "auto")
        assert session.policy.mode == "confirm"
        assistant.set_mode(session.session_id, "propose")
        assert session.policy.mode == "propose"
        with pytest.raises(SiteRefusal, match="your site does not allow auto mode"):
            await assistant.session("mcp-client", cluster="c", mode="auto", task="claude-code (mcp:laptop)")
        with pytest.raises(SiteRefusal, match="your site does not allow auto mode"):
            await open_session(assistant.workspace, config, SessionSpec(
                cluster="c", mode="auto", task="automation: nightly", transport=ScriptedTransport(),
                require_model=False, reads_cluster_facts=False))
        await assistant.close()

    asyncio.run(faces())


# ----- the command line -----------------------------------------------------------------------------------------

def test_betty_policy_shows_each_value_and_where_it_came_from(site_file: Path, person: Path) -> None:
    mine(person, clusters=[{"name": "wide", "transport": "local", "readable_roots": ["/"]}],
         llm={"base_url": "https://api.openai.com/v1", "model": "gpt"}, rules={"deny": ["cluster_run"]})
    done = run_betty("policy", "--json", env={**os.environ})
    assert done.returncode == 0, done.stderr
    shown = {row["field"]: (row["value"], row["origin"]) for row in json.loads(done.stdout)["fields"]}
    where = f"site file {site_file}"
    assert shown["modes"] == ("off, propose, confirm", where)
    assert shown["tools.deny"] == ("cluster_cancel", where)
    assert shown["limits.wall_time"] == ("12:00:00", where)
    assert shown["audit"] == ("the workspace's action log only", "default")
    assert shown["mcp"] == ("off", where)
    assert shown["rules.deny"] == ("cluster_run", "your configuration (under the site's tools)")
    value, origin = shown["llm.base_url"]
    assert origin == "your configuration" and "refused: your site does not allow the model server" in value
    assert shown["clusters.wide.readable_roots"] == (
        "/scratch, /project/lab", f"your configuration, narrowed by site file {site_file}")
    text = run_betty("policy", env={**os.environ})
    assert text.returncode == 0 and f"site policy: {site_file}" in text.stdout


def test_the_mcp_face_is_off_on_the_command_line_too(site_file: Path, person: Path) -> None:
    for argv in (("mcp", "token", "add", "claude-code", "--url", "http://127.0.0.1:9/"), ("mcp",)):
        done = run_betty(*argv, env={**os.environ, "BETTY_MCP_TOKEN": "betty-mcp-x"})
        assert done.returncode != 0
        assert f"your site does not allow Betty's MCP face (mcp is false in {site_file})" in done.stderr


def test_betty_ask_in_a_mode_the_site_refuses_is_one_line(site_file: Path, person: Path, tmp_path: Path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    mine(person, clusters=[{"name": "c", "transport": "local"}])
    done = run_betty("ask", "what runs?", "--mode", "auto", "--dir", str(tmp_path / "project"), env={**os.environ})
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"betty: error: your site does not allow auto mode; it allows off, propose, confirm (modes in {site_file})")


def test_the_sites_model_key_stays_with_the_sites_server(tmp_path: Path, person: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    site = write_policy(tmp_path, {"llm": {"default": {"base_url": "https://llm.site.edu/v1", "model": "big",
                                                       "api_key_env": "SITE_LLM_KEY"}}})
    monkeypatch.setenv(ENV, str(site))
    monkeypatch.setattr(config_module, "site_config_dirs", lambda: [])
    mine(person, llm={"model": "small"})
    assert load_config().llm == {"base_url": "https://llm.site.edu/v1", "model": "small", "api_key_env": "SITE_LLM_KEY"}
    mine(person, llm={"base_url": "https://elsewhere.example/v1"})
    assert load_config().llm == {"base_url": "https://elsewhere.example/v1", "model": "big"}


def test_a_persons_own_command_runs_where_the_site_does_not_allow_confirm(tmp_path: Path) -> None:
    """A session asked for in no mode starts in the site's default: a person's own call still runs."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    site = load_policy(write_policy(tmp_path, {"modes": ["off", "propose"], "default_mode": "propose"}))
    config = BettyConfig(clusters=[{"name": "c", "transport": "local"}], site=site)
    cluster = ScriptedTransport().on("sinfo", stdout=SINFO)

    async def partitions() -> Any:
        session = await open_session(Workspace.at(tmp_path / "project"), config, SessionSpec(
            transport=cluster, require_model=False, reads_cluster_facts=False, tools=("cluster_partitions",)))
        assert session.policy.mode == "propose"
        return await session.run_tool("cluster_partitions", {}, "ada (terminal)")

    outcome = asyncio.run(partitions())
    assert outcome.ok, outcome.summary
    assert cluster.ran("sinfo")


def test_betty_llm_serve_and_check_keep_to_the_sites_model_servers(site_file: Path, person: Path) -> None:
    mine(person, clusters=[{"name": "c", "transport": "local"}])
    served = run_betty("llm", "serve", "--model", "/models/x", "--partition", "gpu", "--yes", env={**os.environ})
    assert served.returncode != 0
    assert "your site allows only the model servers http://127.0.0.1:1/v1" in served.stderr
    checked = run_betty("llm", "check", "--base-url", "http://127.0.0.1:9/v1", "--model", "x", env={**os.environ})
    assert checked.returncode != 0
    assert "your site does not allow the model server http://127.0.0.1:9/v1" in checked.stderr


def test_a_persons_own_submission_above_the_limits_is_refused_too(tmp_path: Path) -> None:
    """A person's own call (a panel button, a magic, ``betty submit``): refused before its card, nothing submitted."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    site = load_policy(write_policy(tmp_path, {"limits": {"wall_time": "04:00:00"}}))
    config = BettyConfig(clusters=[{"name": "c", "transport": "local"}], site=site)
    cluster = ScriptedTransport().on("sinfo", stdout=SINFO)
    events: list[Any] = []

    async def submit() -> Any:
        session = await open_session(Workspace.at(tmp_path / "project"), config, SessionSpec(
            transport=cluster, require_model=False, reads_cluster_facts=False, listeners=(events.append,),
            broker=ApprovalBroker(timeout=5)))
        return await session.run_tool("cluster_submit", {"script": script("--time=2-00:00:00"), "goal": "long",
                                                         "record": False}, "ada (side panel)")

    outcome = asyncio.run(submit())
    assert not outcome.ok
    assert outcome.summary == ("your site allows at most 04:00:00 of wall time per job (limits.wall_time); "
                               "this job asks for 2-00:00:00")
    assert not [e for e in events if e.type == "approval_request"] and not cluster.ran("sbatch")


def test_a_plan_with_a_step_above_the_limits_is_refused_before_its_card(tmp_path: Path) -> None:
    """A plan whose second step submits 3 nodes: refused in code, the limit named for that step, no card, nothing
    run; the same step within the limits is shown on the plan's card."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    site = load_policy(write_policy(tmp_path, {**SITE, "llm": {}}))
    workspace = Workspace.at(tmp_path / "project")
    note = {"page": "notes/a.md", "mode": "create", "body": "x\n",
            "frontmatter": {"name": "a", "description": "a note the plan writes", "type": "note"}}

    def plan(nodes: int) -> Any:
        job = {"script": script(f"--nodes={nodes}", "--time=01:00:00"), "goal": "a run", "record": False}
        return call("propose_plan", {"goal": "notes then a run", "steps": [
            {"tool": "wiki_write", "args": note}, {"tool": "cluster_submit", "args": job, "depends_on": [1]}]})

    def turn(nodes: int) -> list[Any]:
        events: list[Any] = []
        cluster = ScriptedTransport().on("sinfo", stdout=SINFO).on("id", "-un", stdout="ada\n")
        with ScriptedLLM() as llm:
            llm.add(plan(nodes), say("Done."))

            async def ask() -> str:
                broker = ApprovalBroker(timeout=60)

                def person(event: Any) -> None:
                    events.append(event)
                    if event.type == "approval_request":  # the plan's card: denied, so nothing of it runs
                        asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "denied",
                                                             "ada")

                session = await open_session(workspace, turn_config(llm, site), SessionSpec(
                    broker=broker, listeners=(person,), transport=cluster))
                return await session.ask("write the notes, then run it")

            assert asyncio.run(ask()) in ("finished", "denied")
        assert not cluster.ran("sbatch")
        return events

    refused = turn(3)
    assert not [e for e in refused if e.type == "approval_request"], "no card for a plan the site refuses"
    (shown,) = [e.payload for e in refused if e.type == "plan"]
    assert [s.status for s in shown.calls] == ["proposed", "refused"]
    assert "at most 2 node(s) per job (limits.nodes); this job asks for 3" in shown.calls[1].reason
    assert not (workspace.wiki / "notes" / "a.md").exists()
    within = turn(2)
    (card,) = [e.payload for e in within if e.type == "approval_request"]
    assert card.tool == "propose_plan" and "--nodes=2" in card.preview.text


def test_a_change_the_sites_audit_cannot_take_does_not_run(tmp_path: Path) -> None:
    """The audit's syslog socket is gone: an approved submission is refused before sbatch, saying why; a read, which
    changes nothing, still answers; once the socket listens again the same submission runs and is audited."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    where = tmp_path / "log"
    site = load_policy(write_policy(tmp_path, {"audit": {"syslog": str(where)}}))
    config = BettyConfig(clusters=[{"name": "c", "transport": "local"}], site=site)
    cluster = (ScriptedTransport().on("sinfo", stdout=SINFO).on("id", "-un", stdout="ada\n")
               .on("squeue", stdout="").on("sbatch", stdout="4242;c\n"))
    job = {"script": script("--time=01:00:00"), "goal": "a run", "record": False}

    async def submit_and_read() -> tuple[Any, Any]:
        broker = ApprovalBroker(timeout=60)

        def person(event: Any) -> None:
            if event.type == "approval_request":
                asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "ada")

        session = await open_session(Workspace.at(tmp_path / "project"), config, SessionSpec(
            transport=cluster, require_model=False, reads_cluster_facts=False, listeners=(person,), broker=broker))
        submitted = await session.run_tool("cluster_submit", job, "ada (side panel)")
        return submitted, await session.run_tool("cluster_queue", {}, "ada (side panel)")

    submitted, read = asyncio.run(submit_and_read())
    assert not submitted.ok and submitted.summary.startswith(f"the site's audit (syslog at {where}) cannot be written")
    assert submitted.summary.endswith("; nothing ran") and not cluster.ran("sbatch")
    assert read.ok, read.summary
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(where))
        listener.settimeout(10)
        submitted, _ = asyncio.run(submit_and_read())
        assert submitted.ok, submitted.summary
        heard = [listener.recv(65536).decode() for _ in range(2)]
    assert len(cluster.ran("sbatch")) == 1 and any('"cluster_submit"' in line for line in heard)
