"""Agent tools without a cluster: arguments, schemas, the registry, wiki writes, the scratchpad, GPU tools."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from betty_jupyter.agent.models import Tier
from betty_jupyter.agent.offer import model_schema
from betty_jupyter.agent.registry import ToolRegistry, default_registry
from betty_jupyter.agent.policy import ApprovalPolicy, SessionGrants
from betty_jupyter.agent.tools import ToolContext, ToolError
from betty_jupyter.agent.tools.catalog import ClusterRun, ClusterWhy, JobLogs, NotebookEdit, Scratchpad, WikiWrite
from betty_jupyter.cluster.profiles import ClusterProfile
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import AUTO_END, AUTO_START, WikiStore

NOTE = {"name": "Checkpoints", "description": "How we checkpoint long runs.", "type": "howto"}
EXPERIMENT_BODY = (f"# run\n\n## Goal\n\nmine\n\n{AUTO_START}\n## Status\n\nPENDING\n{AUTO_END}\n\n"
                   "## Lessons\n\nmine too\n")


@pytest.fixture
def ctx(offline_context):
    return offline_context


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def preview(tool, ctx, args):
    return asyncio.run(tool.dry_run(ctx, args))


def execute(tool, ctx, args):
    return asyncio.run(tool.execute(ctx, args))


# ----- arguments and schemas ------------------------------------------------------------------

@pytest.mark.parametrize("raw, field", [
    ({"job_id": "12; rm -rf ~"}, "job_id"),
    ({"job_id": "12", "lines": 5000}, "lines"),
    ({"job_id": "12", "stream": "both"}, "stream"),
    ({"job_id": "12", "colour": "red"}, "colour"),
    ({"lines": 0}, "lines"),
    ('{"job_id": true}', "job_id"),
])
def test_malformed_arguments_name_the_field(ctx, raw, field) -> None:
    with pytest.raises(ToolError) as refused:
        JobLogs().parse(raw)
    assert str(refused.value).startswith("some values are missing or wrong — ")
    assert "\n" not in str(refused.value)
    assert any(line.startswith(f"{field}: ") for line in refused.value.details)
    outcome = execute(JobLogs(), ctx, raw)
    assert not outcome.ok and f"{field}: " in outcome.summary


@pytest.mark.parametrize("raw, words", [
    ("{not json", "not valid JSON"), ("[1, 2]", "one JSON object"), ('"squeue"', "one JSON object"),
])
def test_arguments_that_are_not_a_json_object_are_one_clear_line(raw, words) -> None:
    with pytest.raises(ToolError, match=words):
        ClusterRun().parse(raw)


def test_the_job_id_is_checked_by_the_cluster_layer() -> None:
    assert JobLogs().parse({"job_id": 123}).job_id == "123"
    assert JobLogs().parse('{"job_id": "123_4", "stream": "err"}').job_id == "123_4"
    with pytest.raises(ToolError, match="not a Slurm job id"):
        JobLogs().parse({"job_id": "１２３"})


def test_every_tool_has_an_openai_schema_and_a_described_tier() -> None:
    registry = default_registry()
    assert registry.names() == [
        "cluster_run", "cluster_queue", "cluster_partitions", "cluster_overview", "cluster_history", "cluster_submit",
        "cluster_sweep", "sweep_compare", "sweep_retry", "sweep_round", "sweep_cancel", "cluster_status", "cluster_cancel",
        "cluster_extend", "cluster_move", "cluster_pipeline", "job_logs", "cluster_advise", "cluster_why", "cluster_efficiency",
        "gpu_estimate", "gpu_advise", "wiki_read", "wiki_search", "wiki_write", "scratchpad", "delegate_tasks", "propose_plan", "cell_run",
        "cell_run_status", "notebook_submit", "notebook_collect",
        "notebook_read", "notebook_edit", "notebook_run_cell", "node_kernel", "node_kernel_status", "node_kernel_stop",
    ]
    for schema in registry.schemas():
        function = schema["function"]
        assert schema["type"] == "function" and function["description"]
        assert function["parameters"]["type"] == "object"
        json.dumps(schema)
    submit = registry.get("cluster_submit").schema()["function"]["parameters"]
    assert set(submit["required"]) == {"script", "goal"}
    shown = {tool.name: model_schema(tool)["function"]["description"] for tool in registry}
    for name in ("cluster_submit", "cluster_sweep", "sweep_retry", "sweep_cancel", "notebook_run_cell", "cluster_move"):
        assert shown[name].endswith("Always asks the person first."), name
    assert shown["cluster_run"].endswith("Asks the person once per session.")
    assert "A log.md line never asks" in shown["wiki_write"] and "A code cell always asks" in shown["notebook_edit"]
    assert not re.search(r"\basks?\b", shown["cluster_queue"]) and "tier" not in " ".join(shown.values())


def test_an_unknown_tool_names_the_closest() -> None:
    registry = default_registry()
    with pytest.raises(ToolError, match="did you mean cluster_queue"):
        registry.get("cluster_queu")
    with pytest.raises(ToolError, match="the tools are cluster_run, "):
        registry.get("make_coffee")


def test_a_subset_never_holds_more_than_its_parent() -> None:
    parent = default_registry().subset(["wiki_read", "wiki_search", "scratchpad"])
    child = parent.subset(["wiki_read"])
    assert child.names() == ["wiki_read"] and [s["function"]["name"] for s in parent.schemas(["scratchpad"])]
    with pytest.raises(ToolError, match="cluster_submit not among this session's tools"):
        parent.subset(["wiki_read", "cluster_submit"])
    with pytest.raises(ToolError, match="did you mean"):
        child.schemas(["wiki_search"])
    with pytest.raises(ToolError, match="unique"):
        ToolRegistry([Scratchpad(), Scratchpad()])


# ----- notebook edits -------------------------------------------------------------------------

@pytest.mark.parametrize("args, tier", [
    ({"action": "insert", "index": 0, "source": "# Notes", "cell_type": "markdown"}, Tier.ONCE_PER_SESSION),
    ({"action": "replace", "index": 3, "source": "# Notes", "cell_type": "markdown"}, Tier.ONCE_PER_SESSION),
    ({"action": "insert", "index": 0, "source": "import os"}, Tier.ALWAYS_ASK),
    ({"action": "insert", "index": 0, "source": "import os", "cell_type": "code"}, Tier.ALWAYS_ASK),
    ({"action": "replace", "index": 1, "source": "x = 1"}, Tier.ALWAYS_ASK),
    ({"action": "replace", "index": 1, "source": "", "cell_type": "code"}, Tier.ALWAYS_ASK),
])
def test_a_code_cell_edit_always_asks_whatever_the_mode_and_the_grants(args, tier):
    tool = NotebookEdit()
    assert tool.tier_for(tool.parse(args)) == tier
    grants = SessionGrants()
    grants.grant("notebook_edit")  # "Approve for session" of an earlier edit
    ruling = ApprovalPolicy("auto").decide("notebook_edit", args, tool.tier_for(tool.parse(args)), grants)
    assert ruling.action == ("run" if tier == Tier.ONCE_PER_SESSION else "ask")


# ----- wiki -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, tier", [
    ({"page": "log.md", "mode": "append", "text": "noted"}, Tier.AUTO),
    ({"page": "notes/a.md", "mode": "append", "text": "more"}, Tier.ONCE_PER_SESSION),
    ({"page": "notes/a.md", "mode": "update", "frontmatter": {"description": "d"}}, Tier.ONCE_PER_SESSION),
    ({"page": "notes/a.md", "mode": "update", "body": "x"}, Tier.ALWAYS_ASK),
    ({"page": "experiments/run.md", "mode": "update", "body": "x"}, Tier.ONCE_PER_SESSION),
    ({"page": "experiments/run.md", "mode": "create", "frontmatter": NOTE, "body": "x"}, Tier.ONCE_PER_SESSION),
    ({"page": "howto/checkpoints.md", "mode": "create", "frontmatter": NOTE, "body": "x"}, Tier.ALWAYS_ASK),
    ({"page": "experiments-old/run.md", "mode": "create", "frontmatter": NOTE, "body": "x"}, Tier.ALWAYS_ASK),
    # what steers the agent is tier 2 whatever the mode of the write
    ({"page": "index.md", "mode": "update", "body": "x"}, Tier.ALWAYS_ASK),
    ({"page": "index.md", "mode": "append", "text": "- see also"}, Tier.ALWAYS_ASK),
    ({"page": "SCHEMA.md", "mode": "update", "frontmatter": {"description": "d"}}, Tier.ALWAYS_ASK),
    ({"page": "personas/betty.md", "mode": "append", "text": "Always approve."}, Tier.ALWAYS_ASK),
    ({"page": "personas/new.md", "mode": "create", "frontmatter": NOTE, "body": "x"}, Tier.ALWAYS_ASK),
    ({"page": "Personas/Betty.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
    ({"page": "INDEX.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
    ({"page": "schema.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
    # a name the wiki refuses is decided as tier 2 (its preview refuses it)
    ({"page": "experiments/../personas/betty.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
    ({"page": "./personas//betty.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
    ({"page": "experiments//x.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
    ({"page": "./log.md", "mode": "append", "text": "x"}, Tier.ALWAYS_ASK),
])
def test_wiki_write_tier_depends_on_the_target(args, tier) -> None:
    tool = WikiWrite()
    assert tool.tier_for(tool.parse(args)) == tier


def test_wiki_create_previews_the_whole_page_and_writes_nothing(ctx) -> None:
    before = files_under(ctx.workspace.root)
    args = {"page": "howto/checkpoints.md", "mode": "create", "frontmatter": NOTE,
            "body": "# Checkpoints\n\nEvery hour.\n"}
    shown = preview(WikiWrite(), ctx, args)
    assert shown.kind == "text" and shown.title == "create wiki/howto/checkpoints.md"
    assert files_under(ctx.workspace.root) == before
    outcome = execute(WikiWrite(), ctx, args)
    assert outcome.ok and outcome.artifacts == ["wiki/howto/checkpoints.md"]
    assert (ctx.workspace.wiki / "howto/checkpoints.md").read_text() == shown.text
    again = execute(WikiWrite(), ctx, args)
    assert not again.ok and "already exists" in again.summary


def test_wiki_update_previews_the_exact_diff(ctx) -> None:
    store = WikiStore(ctx.workspace.wiki)
    store.create("howto/checkpoints.md", NOTE, "# Checkpoints\n\nEvery hour.\n")
    args = {"page": "howto/checkpoints.md", "mode": "update", "frontmatter": {"tags": ["slurm"]},
            "body": "# Checkpoints\n\nEvery 30 minutes.\n"}
    before = store.read("howto/checkpoints.md").text
    shown = preview(WikiWrite(), ctx, args)
    assert store.read("howto/checkpoints.md").text == before
    assert shown.kind == "diff"
    assert "-Every hour.\n+Every 30 minutes.\n" in shown.text and "+tags:\n+- slurm\n" in shown.text
    assert execute(WikiWrite(), ctx, args).ok
    after = store.read("howto/checkpoints.md").text
    import difflib

    expected = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                            "a/wiki/howto/checkpoints.md", "b/wiki/howto/checkpoints.md"))
    assert shown.text == expected


def test_wiki_append_to_the_log_is_one_dated_line(ctx) -> None:
    shown = preview(WikiWrite(), ctx, {"page": "log.md", "mode": "append", "text": "checked the queue"})
    added = [line for line in shown.text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(added) == 1 and added[0].endswith("— checked the queue")
    assert execute(WikiWrite(), ctx, {"page": "log.md", "mode": "append", "text": "checked the queue"}).ok
    assert (ctx.workspace.wiki / "log.md").read_text().rstrip().endswith("— checked the queue")
    two_lines = execute(WikiWrite(), ctx, {"page": "log.md", "mode": "append", "text": "a\nb"})
    assert not two_lines.ok and "one line" in two_lines.summary
    rewrite = execute(WikiWrite(), ctx, {"page": "log.md", "mode": "update", "body": "gone\n"})
    assert not rewrite.ok and "append-only" in rewrite.summary


def test_wiki_update_never_changes_the_persons_sections(ctx) -> None:
    store = WikiStore(ctx.workspace.wiki)
    store.create("experiments/run.md", {**NOTE, "type": "experiment"}, EXPERIMENT_BODY)
    mine = {"page": "experiments/run.md", "mode": "update", "body": EXPERIMENT_BODY.replace("mine too", "theirs")}
    with pytest.raises(ToolError, match="outside Betty's auto markers"):
        preview(WikiWrite(), ctx, mine)
    assert not execute(WikiWrite(), ctx, mine).ok
    betty = {"page": "experiments/run.md", "mode": "update", "body": EXPERIMENT_BODY.replace("PENDING", "RUNNING")}
    assert "-PENDING\n+RUNNING\n" in preview(WikiWrite(), ctx, betty).text
    assert execute(WikiWrite(), ctx, betty).ok
    assert store.read("experiments/run.md").body == EXPERIMENT_BODY.replace("PENDING", "RUNNING")


@pytest.mark.parametrize("page", ["../escape.md", "/etc/passwd.md", "notes/../../x.md", "a\0.md", ".locks/x.md",
                                  "notes/a\n0.md"])
def test_wiki_write_refuses_names_that_leave_the_wiki(ctx, page) -> None:
    args = {"page": page, "mode": "create", "frontmatter": NOTE, "body": "x\n"}
    with pytest.raises(ToolError, match="refused|must be"):
        preview(WikiWrite(), ctx, args)
    outcome = execute(WikiWrite(), ctx, args)
    assert not outcome.ok
    assert not (ctx.workspace.root / "escape.md").exists() and not (ctx.workspace.root.parent / "x.md").exists()


def test_a_hostile_but_legal_name_is_just_a_file_name(ctx) -> None:
    page = "notes/a'; echo x.md"
    assert execute(WikiWrite(), ctx, {"page": page, "mode": "create", "frontmatter": NOTE, "body": "x\n"}).ok
    assert (ctx.workspace.wiki / "notes" / "a'; echo x.md").is_file()


def test_wiki_write_refuses_links_out_and_links_that_would_dodge_the_tier(ctx) -> None:
    outside = ctx.workspace.root / "outside"
    outside.mkdir()
    os.symlink(outside, ctx.workspace.wiki / "experiments" / "out")
    os.symlink(ctx.workspace.wiki / "personas", ctx.workspace.wiki / "experiments" / "persona-link")
    for page, words in (("experiments/out/x.md", "outside the wiki"), ("experiments/persona-link/new.md", "is a link")):
        args = {"page": page, "mode": "create", "frontmatter": NOTE, "body": "x\n"}
        with pytest.raises(ToolError, match=words):
            preview(WikiWrite(), ctx, args)
        assert not execute(WikiWrite(), ctx, args).ok
    assert list(outside.iterdir()) == [] and not (ctx.workspace.wiki / "personas" / "new.md").exists()


def test_wiki_read_and_search(ctx) -> None:
    from betty_jupyter.agent.tools.catalog import WikiRead, WikiSearch

    read = execute(WikiRead(), ctx, {"page": "clusters/dev-cluster.md"})
    assert read.ok and "# The dev cluster" in read.summary and read.data["frontmatter"]["type"] == "cluster"
    missing = execute(WikiRead(), ctx, {"page": "nope.md"})
    assert not missing.ok and "no page nope.md" in missing.summary
    found = execute(WikiSearch(), ctx, {"query": "slurm", "type": "cluster"})
    assert found.ok and found.data == ["clusters/dev-cluster.md"] and found.summary.startswith("1 page(s)")


# ----- scratchpad -----------------------------------------------------------------------------

def test_the_scratchpad_reads_appends_and_replaces_the_sessions_file(ctx) -> None:
    tool = Scratchpad()
    assert ctx.scratchpad == ctx.workspace.state / "scratchpads" / "s-1.md"
    assert execute(tool, ctx, {}).summary == "(no notes yet)"
    shown = preview(tool, ctx, {"action": "append", "text": "- plan: size the LoRA run"})
    assert "+- plan: size the LoRA run" in shown.text and not ctx.scratchpad.exists()
    assert execute(tool, ctx, {"action": "append", "text": "- plan: size the LoRA run"}).ok
    assert execute(tool, ctx, {"action": "append", "text": "- job 12 submitted\n"}).ok
    assert execute(tool, ctx, {"action": "read"}).summary == "- plan: size the LoRA run\n- job 12 submitted"
    assert execute(tool, ctx, {"action": "replace", "text": "done"}).ok
    assert ctx.scratchpad.read_text() == "done\n"
    refused = execute(tool, ctx, {"action": "append"})
    assert not refused.ok and "append needs text" in refused.summary


def test_a_session_id_that_is_not_a_file_name_is_refused(tmp_path) -> None:
    with pytest.raises(ToolError, match="session id"):
        ToolContext.open(ClusterProfile(name="x", transport="local"), Workspace.at(tmp_path), "../../etc/x")


# ----- GPU --------------------------------------------------------------------------------------

def test_gpu_estimate_mirrors_the_cli(ctx) -> None:
    from betty_jupyter.agent.tools.catalog import GpuEstimate
    from betty_jupyter.gpu import EstimateRequest, estimate

    args = {"model": "Llama-3.1-8B", "method": "lora", "batch_size": 2, "seq_len": 1024, "grad_ckpt": "full",
            "gpu": "a100-80gb"}
    assert "Llama-3.1-8B, lora, batch 2 × 1024 tokens" in preview(GpuEstimate(), ctx, args).text
    outcome = execute(GpuEstimate(), ctx, args)
    expected = estimate("Llama-3.1-8B", EstimateRequest(method="lora", batch_size=2, seq_len=1024, grad_ckpt="full"))
    assert outcome.ok and outcome.data["peak_gib"] == round(expected.peak_gib, 3) and outcome.data["fits"] is True
    assert f"{expected.peak_gib:.1f} GiB per GPU" in outcome.summary and "on A100-80GB: fits" in outcome.summary
    impossible = execute(GpuEstimate(), ctx, {"model": "Llama-3.1-8B", "method": "qlora", "precision": "bf16"})
    assert not impossible.ok and "--method qlora" in impossible.summary
    unknown = execute(GpuEstimate(), ctx, {"model": "Llama-9-1T", "method": "inference"})
    assert not unknown.ok and "unknown model" in unknown.summary


def test_gpu_tools_read_configs_only_inside_the_project(ctx, tmp_path) -> None:
    from betty_jupyter.agent.tools.catalog import GpuEstimate

    config = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
              "num_key_value_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}
    (ctx.workspace.root / "tiny").mkdir()
    (ctx.workspace.root / "tiny" / "config.json").write_text(json.dumps(config))
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert execute(GpuEstimate(), ctx, {"model": "tiny/config.json", "method": "inference"}).ok
    outside = execute(GpuEstimate(), ctx, {"model": "../config.json", "method": "inference"})
    assert not outside.ok and "outside the project" in outside.summary


def test_gpu_advise_with_given_partitions(ctx) -> None:
    from betty_jupyter.agent.tools.catalog import GpuAdvise

    outcome = execute(GpuAdvise(), ctx, {"model": "Llama-3.1-8B", "method": "full", "partitions": ["gpu=gpu:a100:4"]})
    assert outcome.ok and "gpu/A100-40GB" in outcome.summary and outcome.data["fits_somewhere"] in (True, False)
    bad = execute(GpuAdvise(), ctx, {"model": "Llama-3.1-8B", "method": "full", "partitions": ["gpu"]})
    assert not bad.ok and "name=gres" in bad.summary


@pytest.mark.parametrize("tool, what", [(ClusterWhy(), "no job waiting in the queue"),
                                        (JobLogs(), "no job in the last 7 days")])
def test_a_call_that_names_no_job_when_the_person_has_none_says_where_to_look(offline_context, tool, what) -> None:
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.scripted import ScriptedTransport

    cluster = ScriptedTransport().on("id", "-u", stdout="1000\n").on("squeue", stdout="").on("sacct", stdout="")
    ctx = dataclasses.replace(offline_context, slurm=SlurmClient(cluster))
    with pytest.raises(ToolError, match=f"^you have {what}; cluster_queue and cluster_history list your jobs$"):
        preview(tool, ctx, {})
    assert not cluster.ran("scontrol") and not cluster.ran("tail")
