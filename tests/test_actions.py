"""The action log: records per day, outputs beside them, redaction, concurrent writers, torn lines, ``betty log``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from betty_jupyter.agent.actions import (
    REDACTED, ActionLog, ActionLogError, ActionRecord, preview_diff, redact, replay,
)
from betty_jupyter.agent.models import Preview, Tier
from betty_jupyter.secret_names import is_secret_name

from conftest import BETTY, REPO, run_betty

DAY_ONE = datetime(2024, 5, 1, 9, 30, 0).timestamp()
DAY_TWO = datetime(2024, 5, 2, 14, 5, 7).timestamp()
PREVIEW = Preview(kind="command", title="Submit train.sh", text="sbatch --partition=debug train.sh\n#SBATCH -t 10")


def make(call_id: str = "call_1", ts: float = DAY_ONE, **fields: Any) -> ActionRecord:
    values: dict[str, Any] = {"ts": ts, "session_id": "s-1", "call_id": call_id, "tool": "submit_job",
                              "tier": Tier.ALWAYS_ASK, "args": {"script": "train.sh"}, "preview": PREVIEW,
                              "decision": "approved", "approver": "ada", "ok": True, "summary": "job 42 submitted",
                              "duration_ms": 12.5, "artifacts": ["wiki/experiments/x.md"]}
    return ActionRecord(**{**values, **fields})


def test_records_round_trip(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    written = [log.record(make("call_1")), log.record(make("call_2", decision="denied", ok=None, preview=None))]
    assert log.read() == written
    assert log.read(date(2024, 5, 1)) == written
    assert log.skipped == []
    line = json.loads((tmp_path / ".betty/actions/2024-05-01.jsonl").read_text().splitlines()[0])
    assert set(line) == {"ts", "session_id", "call_id", "tool", "tier", "task", "args", "preview", "digest", "decision",
                         "approver", "ok", "summary", "output_ref", "duration_ms", "artifacts"}
    assert line["tier"] == 2


def test_one_file_per_day_and_filters(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    log.record(make("a", DAY_ONE))
    log.record(make("b", DAY_TWO, session_id="s-2"))
    log.record(make("c", DAY_TWO))
    assert log.days() == [date(2024, 5, 1), date(2024, 5, 2)]
    assert sorted(p.name for p in (tmp_path / ".betty/actions").glob("*.jsonl")) == ["2024-05-01.jsonl",
                                                                                    "2024-05-02.jsonl"]
    assert [r.call_id for r in log.read()] == ["a", "b", "c"]
    assert [r.call_id for r in log.read(date(2024, 5, 2))] == ["b", "c"]
    assert [r.call_id for r in log.read(session_id="s-1")] == ["a", "c"]
    assert [r.call_id for r in log.read(date(2024, 5, 2), session_id="s-2")] == ["b"]
    assert log.read(date(2024, 6, 1)) == []


def test_an_empty_workspace_has_no_days(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    assert log.days() == [] and log.read() == []
    (tmp_path / ".betty/actions").mkdir(parents=True)
    (tmp_path / ".betty/actions/notes.jsonl").write_text("x")
    (tmp_path / ".betty/actions/2024-13-45.jsonl").write_text("x")
    assert log.days() == []


def test_earlier_lines_are_never_rewritten(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    log.record(make("a"))
    before = (tmp_path / ".betty/actions/2024-05-01.jsonl").read_bytes()
    log.record(make("b"))
    assert (tmp_path / ".betty/actions/2024-05-01.jsonl").read_bytes().startswith(before)


def test_the_full_output_is_stored_beside_and_referenced(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    big = "JOBID PARTITION\n" + "\n".join(f"{n} debug" for n in range(10_000))
    record = log.record(make("call_1"), full_output=big)
    assert record.output_ref == ".betty/actions/outputs/call_1.txt"
    assert (tmp_path / record.output_ref).read_text() == big
    assert log.output(log.read()[0]) == big
    assert (tmp_path / ".betty/actions/2024-05-01.jsonl").stat().st_size < 2000
    assert log.output(make("x")) is None


def test_a_repeated_call_id_never_overwrites_an_earlier_output(tmp_path: Path) -> None:
    log = ActionLog(tmp_path)
    first = log.record(make("call_0", session_id="one"), full_output="first")
    second = log.record(make("call_0", session_id="two"), full_output="second")
    assert first.output_ref != second.output_ref
    assert [log.output(r) for r in log.read()] == ["first", "second"]


@pytest.mark.parametrize("call_id", ["../../escape", "a'; echo x", "a\n0", ".hidden", "", "x" * 300, "/abs"])
def test_hostile_call_ids_stay_inside_the_outputs_folder(tmp_path: Path, call_id: str) -> None:
    log = ActionLog(tmp_path)
    record = log.record(make(call_id), full_output="out")
    assert record.output_ref is not None
    path = (tmp_path / record.output_ref).resolve()
    assert path.parent == (tmp_path / ".betty/actions/outputs").resolve()
    assert log.read()[0].call_id == call_id
    assert log.output(log.read()[0]) == "out"


def test_an_output_ref_pointing_outside_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("do not show")
    assert ActionLog(tmp_path).output(make(output_ref="secret.txt")) is None
    assert ActionLog(tmp_path).output(make(output_ref=".betty/actions/outputs/../../../secret.txt")) is None


@pytest.mark.parametrize("key", ["api_key", "API_KEY", "apiKey", "password", "DB_PASSWORD", "token", "hf_token",
                                 "accessToken", "secret", "client_secret", "Authorization", "private_key",
                                 "OPENAI_API_KEY", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTER_TOKEN",
                                 "PGPASSWORD", "GHTOKEN", "SLURM_JWT", "AWS_SECRET_ACCESS_KEY", "pwd"])
def test_secret_keys_are_recognised(key: str) -> None:
    assert is_secret_name(key)


@pytest.mark.parametrize("key", ["max_tokens", "script", "partition", "tokenizer", "keys", "secretary_name",
                                 "TOKENIZERS_PARALLELISM", "PWD", "OLDPWD", "HOME", "PATH", "MODULEPATH"])
def test_ordinary_keys_are_kept(key: str) -> None:
    assert not is_secret_name(key)


SCRIPT_KEY = "sk-proj-canaryScriptKey0123456789"
ARG_KEY = "argument-canary-4f9a"
URL_PASSWORD = "url-canary-hunter2"
BEARER = "bearer-canary-abcdef123"
HOSTILE_TEXTS = {
    "a script body": f"#!/bin/bash\nexport OPENAI_API_KEY={SCRIPT_KEY}\npython train.py",
    "a quoted assignment": f"HF_TOKEN='{ARG_KEY}' python x.py",
    "a command argument": f"vllm serve m --api-key {ARG_KEY} --port 8000",
    "an option with =": f"mysql --password={ARG_KEY} -u ada",
    "a URL": f"git clone https://ada:{URL_PASSWORD}@git.example.edu/lab/x.git",
    "a header": f"curl -H 'Authorization: Bearer {BEARER}' https://api.example.edu",
    "JSON": json.dumps({"client_secret": ARG_KEY, "note": "fine"}),
    "a key by its shape alone": f"the key is {SCRIPT_KEY} ok",
}


@pytest.mark.parametrize("where", sorted(HOSTILE_TEXTS))
def test_secrets_no_argument_name_points_at_are_blanked_from_every_text(tmp_path: Path, where: str) -> None:
    text = HOSTILE_TEXTS[where]
    preview = Preview(kind="script", title=text, text=text, details={"command": text, "list": [text]})
    log = ActionLog(tmp_path)
    log.record(make(args={"script": text, "command": [text]}, preview=preview, summary=text), full_output=text)
    written = "".join(p.read_text() for p in (tmp_path / ".betty/actions").rglob("*") if p.is_file())
    for secret in (SCRIPT_KEY, ARG_KEY, URL_PASSWORD, BEARER):
        assert secret not in written
    assert REDACTED in log.read()[0].args["script"]


def test_blanking_keeps_what_is_not_a_secret(tmp_path: Path) -> None:
    text = ("export TOKENIZERS_PARALLELISM=false MAX_TOKENS=512\ncd $PWD && srun --ntasks=4 python x.py "
            "--max-tokens 100 https://git.example.edu:8443/lab/x.git Basic configuration")
    record = ActionLog(tmp_path).record(make(args={"script": text}, summary=text))
    assert record.args["script"] == text and record.summary == text


def test_secrets_are_redacted_everywhere_they_would_be_written(tmp_path: Path) -> None:
    key = "sk-live-0123456789abcdef"
    args = {"script": "train.sh", "api_key": key, "env": {"HF_TOKEN": "hf_abcdefgh", "PATH": "/bin"},
            "headers": [{"Password": "hunter22"}], "max_tokens": 100, "TOKEN": {"nested": "whole dict"}}
    preview = Preview(kind="command", title=f"call with {key}", text=f"curl -H 'Bearer {key}' hf_abcdefgh",
                      details={"key": key, "secret": "x", "list": [f"a {key}"]})
    log = ActionLog(tmp_path)
    record = log.record(make(args=args, preview=preview, summary=f"used {key}"), full_output=f"echo {key}\nhunter22")
    assert record.args == {"script": "train.sh", "api_key": REDACTED, "env": {"HF_TOKEN": REDACTED, "PATH": "/bin"},
                           "headers": [{"Password": REDACTED}], "max_tokens": 100, "TOKEN": REDACTED}
    written = "".join(p.read_text() for p in (tmp_path / ".betty/actions").rglob("*") if p.is_file())
    for secret in (key, "hf_abcdefgh", "hunter22", "whole dict"):
        assert secret not in written
    assert log.read()[0].preview == Preview(kind="command", title=f"call with {REDACTED}",
                                            text=f"curl -H 'Bearer {REDACTED}' {REDACTED}",
                                            details={"key": REDACTED, "secret": REDACTED, "list": [f"a {REDACTED}"]})
    assert log.read()[0].summary == f"used {REDACTED}"
    assert args["api_key"] == key, "the caller's arguments are left as they were"


def test_a_short_secret_is_redacted_in_args_but_not_blanked_from_text(tmp_path: Path) -> None:
    record = ActionLog(tmp_path).record(make(args={"token": "a"}, summary="a cat sat"))
    assert record.args == {"token": REDACTED} and record.summary == "a cat sat"
    assert redact([{"password": 1}, ("x", {"ok": True})]) == [{"password": REDACTED}, ["x", {"ok": True}]]


def test_a_garbled_line_is_skipped_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = ActionLog(tmp_path)
    log.record(make("a"))
    day_file = tmp_path / ".betty/actions/2024-05-01.jsonl"
    with day_file.open("ab") as file:
        file.write(b'{"ts": 1714550000, "tool": "sub')  # torn: a writer died mid-line
    log.record(make("b"))
    with day_file.open("ab") as file:
        file.write(b'[1, 2]\n\xff\xfe not utf-8\n\n{"call_id": "no other fields"}\n')
    log.record(make("c"))
    assert [r.call_id for r in log.read()] == ["a", "b", "c"]
    assert log.skipped == ["2024-05-01.jsonl:2: not JSON", "2024-05-01.jsonl:4: not an action record",
                           "2024-05-01.jsonl:5: not JSON", "2024-05-01.jsonl:7: not an action record"]
    assert "skipped 4 unreadable line(s)" in caplog.text
    assert log.read(session_id="nobody") == [] and len(log.skipped) == 4


def test_records_refuse_what_is_not_a_record() -> None:
    with pytest.raises(ValidationError):
        make(decision="maybe")
    with pytest.raises(ValidationError):
        make(tier=3)
    with pytest.raises(ValidationError):
        make(duration_ms=-1)


def test_an_unwritable_log_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".betty").write_text("a file where the folder should be")
    with pytest.raises(ActionLogError, match="cannot create the action log folder"):
        ActionLog(tmp_path).record(make())


WRITER = textwrap.dedent("""
    import sys
    from betty_jupyter.agent.actions import ActionLog, ActionRecord
    log = ActionLog(sys.argv[1])
    for n in range(int(sys.argv[3])):
        log.record(ActionRecord(ts={ts}, session_id=sys.argv[2], call_id=f"call_{{n}}", tool="t", tier=0,
                                args={{"n": n, "pad": "x" * 5000}}, decision="auto", ok=True, summary=str(n)),
                   full_output=f"{{sys.argv[2]}} {{n}}")
""").format(ts=DAY_ONE)


def test_eight_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    per_process = 40
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"p{i}", str(per_process)], cwd=REPO)
               for i in range(8)]
    assert [w.wait(timeout=300) for w in writers] == [0] * 8
    log = ActionLog(tmp_path)
    records = log.read()
    assert log.skipped == []
    assert len(records) == 8 * per_process
    assert {(r.session_id, r.call_id) for r in records} == {(f"p{i}", f"call_{n}") for i in range(8)
                                                            for n in range(per_process)}
    for i in range(8):
        assert [r.args["n"] for r in records if r.session_id == f"p{i}"] == list(range(per_process))
    assert {log.output(r) for r in records} == {f"p{i} {n}" for i in range(8) for n in range(per_process)}


class Args(BaseModel):
    """The arguments of the test's tool."""

    script: str
    partition: str = "debug"


class SubmitTool:
    """A tool shaped like Betty's (``dry_run`` and ``execute`` are async and take a context); never run here."""

    name = "submit_job"

    def __init__(self, walltime: str = "10") -> None:
        self.walltime = walltime
        self.runs = 0

    def preview(self, args: dict[str, Any]) -> Preview:
        parsed = Args.model_validate(args)
        return Preview(kind="command", title=f"Submit {parsed.script}",
                       text=f"sbatch --partition={parsed.partition} {parsed.script}\n#SBATCH -t {self.walltime}")

    async def dry_run(self, ctx: Any, args: dict[str, Any]) -> Preview:
        from betty_jupyter.agent.tools.base import ToolContext

        assert isinstance(ctx, ToolContext) and ctx.session_id == "replay"
        return self.preview(args)

    async def run(self, ctx: Any, args: dict[str, Any]) -> None:
        self.runs += 1
        raise AssertionError("replay must never run a tool")

    async def execute(self, ctx: Any, args: dict[str, Any]) -> None:
        await self.run(ctx, args)


class Registry:
    """A registry of one tool."""

    def __init__(self, tool: SubmitTool) -> None:
        self.tools = {tool.name: tool}

    def get(self, name: str) -> SubmitTool:
        if name not in self.tools:
            raise KeyError(f"no tool named {name!r}")
        return self.tools[name]


def test_replay_says_same_changed_not_recorded_and_failed() -> None:
    tool = SubmitTool()
    registry = Registry(tool)
    records = [make("a"), make("b", args={"script": "train.sh", "partition": "gpu"}),
               make("c", preview=None), make("d", tool="gone"), make("e", args={"nope": 1})]
    lines = replay(records, lambda name, args: registry.get(name).preview(args))  # the protocol replay needs
    assert [line.status for line in lines] == ["same", "changed", "not recorded", "failed", "failed"]
    assert lines[1].diff.splitlines() == ["--- recorded", "+++ now", "@@ -1,2 +1,2 @@",
                                          "-sbatch --partition=debug train.sh",
                                          "+sbatch --partition=gpu train.sh", " #SBATCH -t 10"]
    assert lines[2].current is not None and lines[2].current.title == "Submit train.sh"
    assert lines[3].diff == "KeyError: \"no tool named 'gone'\""
    assert lines[4].diff.startswith("ValidationError:") and "\n" not in lines[4].diff
    assert tool.runs == 0


def test_replay_says_plainly_what_cannot_be_previewed_now_and_keeps_a_new_state_as_same() -> None:
    from betty_jupyter.errors import ToolError

    def preview(name: str, args: dict[str, Any]) -> Preview:
        if args.get("job") == "forgotten":
            raise ToolError("Slurm no longer knows job 42 (its record is gone); there is no log to read")
        return PREVIEW.model_copy(update={"title": "job 43, RUNNING now", "details": {"state": "RUNNING"}})

    lines = replay([make("a", args={"job": "forgotten"}), make("b")], preview)
    assert [line.status for line in lines] == ["gone", "same"]
    assert lines[0].diff == "Slurm no longer knows job 42 (its record is gone); there is no log to read"
    assert "details.state: None → 'RUNNING'" in lines[1].diff, "what the title and details say now is shown"


def test_replay_sees_a_tool_whose_preview_changed_since() -> None:
    records = [make("a")]
    lines = replay(records, lambda name, args: SubmitTool(walltime="20").preview(args))
    assert lines[0].status == "changed"
    assert "-#SBATCH -t 10" in lines[0].diff and "+#SBATCH -t 20" in lines[0].diff


def test_replay_refuses_what_is_not_a_preview() -> None:
    lines = replay([make("a")], lambda name, args: {"kind": "nonsense"})  # type: ignore[arg-type,return-value]
    assert lines[0].status == "failed"


def test_a_preview_diff_names_title_and_details_and_stays_short() -> None:
    before = Preview(kind="text", title="a", text="\n".join(map(str, range(100))), details={"x": 1})
    after = Preview(kind="diff", title="b", text="\n".join(map(str, range(1, 101))), details={"x": 2, "y": 3})
    diff = preview_diff(before, after, max_lines=8).splitlines()
    assert diff[:4] == ["kind: 'text' → 'diff'", "title: 'a' → 'b'", "details.x: 1 → 2", "details.y: None → 3"]
    assert len(diff) == 9 and diff[-1].startswith("… (") and diff[-1].endswith("more lines)")


# ----- betty log, through the real command line ------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    log = ActionLog(tmp_path)
    log.record(make("call_1", DAY_ONE), full_output="full")
    log.record(make("call_2", DAY_ONE + 60, tool="read_page", tier=0, decision="auto", preview=None,
                    summary="read wiki/index.md\n\x1b[31mred\x1b[0m " + "long " * 40))
    log.record(make("call_3", DAY_TWO, session_id="s-2", decision="denied", ok=None, summary=""))
    return tmp_path


def test_log_show_prints_a_table(workspace: Path) -> None:
    result = run_betty("log", "show", "--dir", str(workspace), "--day", "2024-05-01")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["time", "tool", "decision", "ok", "summary"]
    assert lines[1].split()[:6] == ["09:30:00", "submit_job", "approved", "yes", "job", "42"]
    assert lines[2].split()[:5] == ["09:31:00", "read_page", "auto", "yes", "read"]
    assert "\x1b" not in result.stdout and len(lines) == 3
    assert "read wiki/index.md \\x1b[31mred\\x1b[0m long" in lines[2]  # written out, as in every terminal table
    assert lines[2].endswith("…") and len(lines[2]) < 160


def test_log_show_every_day_and_one_session(workspace: Path) -> None:
    every = run_betty("log", "show", "--dir", str(workspace))
    assert [line.split()[:2] for line in every.stdout.splitlines()[1:]] == [
        ["2024-05-01", "09:30:00"], ["2024-05-01", "09:31:00"], ["2024-05-02", "14:05:07"]]
    assert every.stdout.splitlines()[3].split()[2:5] == ["submit_job", "denied", "-"]
    session = run_betty("log", "show", "--dir", str(workspace), "--session", "s-2", "--json")
    assert [r["call_id"] for r in json.loads(session.stdout)] == ["call_3"]


def test_log_show_json_and_an_empty_log(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    records = json.loads(run_betty("log", "show", "--json", "--dir", str(workspace)).stdout)
    assert [ActionRecord.model_validate(r) for r in records] == ActionLog(workspace).read()
    empty = tmp_path_factory.mktemp("empty")
    result = run_betty("log", "show", "--dir", str(empty))
    assert result.returncode == 0 and result.stdout.startswith("no actions are recorded in")
    assert json.loads(run_betty("log", "show", "--json", "--dir", str(empty)).stdout) == []
    on_day = run_betty("log", "show", "--dir", str(workspace), "--day", "2020-01-01")
    assert "no actions are recorded on 2020-01-01" in on_day.stdout


def test_log_export_to_stdout_and_to_a_file(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    result = run_betty("log", "export", "--dir", str(workspace), "--day", "2024-05-01")
    assert result.returncode == 0, result.stderr
    assert [ActionRecord.model_validate_json(line) for line in result.stdout.splitlines()] == \
        ActionLog(workspace).read(date(2024, 5, 1))
    target = tmp_path_factory.mktemp("out") / "export.jsonl"
    written = run_betty("log", "export", "--dir", str(workspace), "-o", str(target))
    assert written.returncode == 0 and "wrote 3 record(s)" in written.stderr
    assert len(target.read_text().splitlines()) == 3
    missing = run_betty("log", "export", "--dir", str(workspace), "-o", str(target.parent / "no/such/file"))
    assert missing.returncode == 1 and missing.stderr.startswith("betty: error: cannot write")


def test_log_warns_once_about_unreadable_lines(workspace: Path) -> None:
    with (workspace / ".betty/actions/2024-05-01.jsonl").open("a") as file:
        file.write("garbage\n")
    result = run_betty("log", "show", "--dir", str(workspace))
    assert result.returncode == 0
    assert result.stderr.strip().splitlines() == [
        "betty: warning: skipped 1 unreadable line(s) of the action log (2024-05-01.jsonl:3: not JSON)"]


@pytest.mark.parametrize("argv, message", [
    (["log", "show", "--day", "yesterday"], "'yesterday' is not a date; write it as YYYY-MM-DD"),
    (["log", "show", "--day", "2024-02-30"], "'2024-02-30' is not a date"),
    (["log", "show", "--dir", "/no/such/dir"], "is not a directory"),
    (["log", "frobnicate"], "invalid choice"),
    (["log"], "required"),
])
def test_bad_input_is_one_line(argv: list[str], message: str) -> None:
    result = run_betty(*argv)
    assert result.returncode in (1, 2)
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr and "Traceback" not in result.stderr


FAKE_REGISTRY = textwrap.dedent("""
    import sys, types
    sys.path.insert(0, {tests!r})
    import test_actions
    module = types.ModuleType("betty_jupyter.agent.registry")
    module.default_registry = lambda: test_actions.Registry(test_actions.SubmitTool(walltime=sys.argv[1]))
    sys.modules["betty_jupyter.agent.registry"] = module
    from betty_jupyter.cli import main
    sys.exit(main(sys.argv[2:]))
""").format(tests=str(Path(__file__).parent))

NO_REGISTRY = textwrap.dedent("""
    import sys
    sys.modules["betty_jupyter.agent.registry"] = None  # as if the module were not there
    from betty_jupyter.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture
def local_cluster(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured cluster reached by local commands (replay opens no link: previews here need none)."""
    config = tmp_path_factory.mktemp("config") / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [{"name": "here", "transport": "local"}]}}))
    monkeypatch.setenv("BETTY_CONFIG", str(config))


def test_log_replay_compares_previews_through_the_cli(workspace: Path, local_cluster: None) -> None:
    same = subprocess.run([sys.executable, "-c", FAKE_REGISTRY, "10", "log", "replay", "--dir", str(workspace)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert same.returncode == 0, same.stderr
    lines = same.stdout.splitlines()
    assert lines[0].split()[2:] == ["submit_job", "call_1", "same"]
    assert lines[1].split()[2:5] == ["read_page", "call_2", "failed:"]
    assert lines[2].split()[2:] == ["submit_job", "call_3", "same"]
    assert lines[-1] == "3 preview(s): 2 same, 1 failed"
    changed = subprocess.run([sys.executable, "-c", FAKE_REGISTRY, "30", "log", "replay", "--dir", str(workspace),
                              "--day", "2024-05-02"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.splitlines()[0].split() == ["14:05:07", "submit_job", "call_3", "changed"]
    assert "    -#SBATCH -t 10" in changed.stdout and "    +#SBATCH -t 30" in changed.stdout


def test_log_replay_without_a_registry_says_so_in_one_line(workspace: Path, local_cluster: None) -> None:
    result = subprocess.run([sys.executable, "-c", NO_REGISTRY, "log", "replay", "--dir", str(workspace)],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1
    assert result.stderr.startswith("betty: error: cannot replay: Betty's tool registry is not available")
    assert len(result.stderr.strip().splitlines()) == 1


def test_log_replay_without_a_cluster_says_so_in_one_line(workspace: Path) -> None:
    result = subprocess.run([sys.executable, "-c", FAKE_REGISTRY, "10", "log", "replay", "--dir", str(workspace)],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1
    assert result.stderr.startswith("betty: error: no cluster is configured")
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_cli_still_imports_only_the_standard_library() -> None:
    code = ("import sys; import betty_jupyter.cli; "
            "print(sorted(m for m in ('pydantic', 'filelock', 'openai') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"
    assert BETTY[1:] == ["-m", "betty_jupyter.cli"]
