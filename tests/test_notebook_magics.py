"""Every ``%betty`` command in a real kernel against the dev cluster, approval cards driven through their comms."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ssh
from kernel_driver import Kernel
from llm_server import ScriptedLLM, call, say
from notebook_support import SCRIPT, kernel, lists_job, llm, one_error_line, project, submit  # noqa: F401 (fixtures)


# ----- reading the cluster -----------------------------------------------------------------------
def test_clusters_and_use(kernel: Kernel) -> None:
    cell = kernel.run("%betty clusters")
    assert "betty-dev" in cell.text and "True" in cell.text
    frame = kernel.run("list(_['name']), list(_['in_use'])")
    assert frame.text == "(['betty-dev'], [True])"
    used = kernel.run("%betty use betty-dev")
    assert "Betty works on betty-dev now." in used.stdout
    assert one_error_line(kernel.run("%betty use nowhere")) == (
        "betty: no cluster called 'nowhere'; configured: betty-dev (add one with `betty cluster add`)")


def test_squeue_is_a_job_table_and_a_dataframe(kernel: Kernel) -> None:
    job = submit(kernel, "queued", seconds=120)
    cell = kernel.run("%betty squeue --me")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    table = cell.widgets[0]
    assert lists_job(kernel, table, job)
    rows = kernel.run("type(_).__mro__[1].__name__, sorted(_['job_id'].astype(str))")
    assert "DataFrame" in rows.text and f"'{job}'" in rows.text
    assert kernel.find(table, "betty-cancel"), "an own running job can be cancelled from the table"
    empty = kernel.run("%betty squeue --partition gpu --state RUNNING")
    assert not lists_job(kernel, empty.widgets[0], job)
    bad = one_error_line(kernel.run("%betty squeue --state SLEEPY"))
    assert "'SLEEPY' is not a Slurm job state" in bad


def test_job_table_refresh_sort_and_auto_refresh_through_the_comm(kernel: Kernel) -> None:
    first = submit(kernel, "first", seconds=120)
    table = kernel.run("%betty squeue --me").widgets[0]
    second = submit(kernel, "second", seconds=120)
    assert lists_job(kernel, table, first) and not lists_job(kernel, table, second)
    kernel.click(kernel.find(table, "betty-refresh")[0])
    kernel.wait_for(lambda: lists_job(kernel, table, second), what="the refreshed table")

    html = kernel.find(table, "betty-job-table")[0]
    sort = [m for m in kernel.descendants(table) if kernel.models[m].get("description") == "sort by"][0]
    kernel.set_value(sort, index=kernel.models[sort]["_options_labels"].index("job_id"))
    descending = [m for m in kernel.descendants(table) if kernel.models[m].get("description") == "descending"][0]

    def order() -> list[str]:
        return [i for i in re.findall(r">(\d+)<", kernel.models[html]["value"]) if i in (first, second)]

    kernel.wait_for(lambda: order() == [first, second], what="ascending job ids")
    kernel.set_value(descending, value=True)
    kernel.wait_for(lambda: order() == [second, first], what="descending job ids")

    auto = kernel.find(table, "betty-auto-refresh")[0]
    kernel.set_value(auto, index=kernel.models[auto]["_options_labels"].index("every 15 s"))
    third = submit(kernel, "third", seconds=120)
    kernel.wait_for(lambda: lists_job(kernel, table, third), timeout=90, what="the auto-refreshed table")
    assert kernel.run("1 + 1").text == "2"
    kernel.set_value(auto, index=0)


def test_sinfo_and_sacct(kernel: Kernel) -> None:
    partitions = kernel.run("%betty sinfo")
    assert "cpu" in partitions.plain and "gpu" in partitions.plain and "INFINITE" in partitions.plain
    job = submit(kernel, "short", seconds=1)
    # accounting records a job a moment after the controller has it
    kernel.wait_for(lambda: lists_job(kernel, kernel.run(f"%betty sacct {job}").widgets[0], job), timeout=60,
                    what="the job in accounting")
    assert "is not a Slurm job id" in one_error_line(kernel.run("%betty sacct 12x"))


def test_status_is_live_until_the_job_ends(kernel: Kernel) -> None:
    job = submit(kernel, "live", seconds=3)
    cell = kernel.run(f"%betty status {job}")
    view = cell.widgets[0]
    kernel.wait_for(lambda: "COMPLETED" in kernel.texts(view) and "finished" in kernel.texts(view), timeout=120,
                    what="the job to complete, with its log's tail")
    assert "betty-following" not in kernel.texts(view), "an ended job is no longer followed"
    assert kernel.run("_.job_id, _.state.value").text in (f"('{job}', 'RUNNING')", f"('{job}', 'PENDING')",
                                                            f"('{job}', 'COMPLETED')")
    assert "not known to the cluster" in one_error_line(kernel.run("%betty status 999999"))


def test_logs(kernel: Kernel) -> None:
    job = submit(kernel, "logged", seconds=1)
    kernel.wait_for(lambda: "finished" in kernel.run(f"%betty logs {job}").stdout, timeout=120, what="the log")
    err = kernel.run(f"%betty logs {job} --err --lines 5")
    assert err.status == "ok" and not err.stderr
    assert "lines: Input should be greater than or equal to 1" in one_error_line(kernel.run(f"%betty logs {job} --lines 0"))
    # Once the job has ended, the followed log is a record that stays in the saved notebook.
    [follow] = kernel.run(f"%betty logs {job} --follow").outputs
    kernel.wait_for(lambda: "finished" in follow["data"]["text/plain"]
                    and "application/vnd.jupyter.widget-view+json" not in follow["data"], timeout=60,
                    what="the followed log's record")


# ----- approvals -----------------------------------------------------------------------------------
def test_cancel_denied_then_approved_and_the_kernel_stays_free(kernel: Kernel) -> None:
    job = submit(kernel, "victim", seconds=300)
    card_cell = kernel.run(f"%betty cancel {job}")
    root = card_cell.widgets[0]
    kernel.wait_for(lambda: kernel.find(root, "betty-deny"), what="the card")
    assert f"scancel {job}" in kernel.texts(root)
    assert kernel.run("sum(range(10))").text == "45", "the kernel runs other cells while the card waits"
    assert kernel.run("repr(__)").text == "'<Betty call cluster_cancel: waiting for your approval>'"
    kernel.click(kernel.find(root, "betty-deny")[0])
    kernel.wait_for(lambda: "denied by" in kernel.texts(root), what="the denial record")
    assert not kernel.find(root, "betty-approve"), "a decided card keeps no buttons"
    assert lists_job(kernel, kernel.run("%betty squeue --me").widgets[0], job), "a denied cancel leaves the job queued"

    again = kernel.run(f"%betty cancel {job}")
    root = again.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0])
    kernel.wait_for(lambda: f"cancelled job {job}" in kernel.texts(root), what="the cancellation")
    # The session's log also holds the reads its live widgets make meanwhile: look at the cancels alone.
    decisions = kernel.run("_log = get_ipython().run_line_magic('betty', 'log --limit 1000')\n"
                           "print(_log[_log.tool == 'cluster_cancel'].decision.tolist())")
    assert decisions.stdout.strip() == "['denied', 'approved']", decisions.errors


def test_an_edited_submission_card_is_checked_again_and_runs_as_edited(kernel: Kernel, dev_cluster) -> None:
    hostile = "# <img src=x onerror=alert(1)> \x1b[31mred"
    script = SCRIPT.format(name="nb-edit", seconds=300).replace("echo started", f"{hostile}\necho started")
    cell = kernel.run(f"%%betty submit --slug nb-edit --goal 'test an edit in the notebook'\n{script}")
    root = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-edit"), what="the card")[0])
    text = kernel.wait_for(lambda: kernel.find(root, "betty-edit-arg-script"), what="the script field")[0]
    assert kernel.models[text]["value"] == script, "the script as its lines, not an escaped JSON string"
    assert "betty-edit-code" in kernel.models[text]["_dom_classes"], "the script in the editor's monospace font"
    height = kernel.models[str(kernel.models[text]["layout"]).removeprefix("IPY_MODEL_")]["height"]
    assert float(height.removesuffix("em")) >= 12 * 1.4, "room for a dozen lines of script at least"
    memory = kernel.find(root, "betty-edit-mem")[0]
    assert kernel.models[memory]["value"] == "100M"
    partition = kernel.find(root, "betty-edit-partition")[0]
    assert kernel.models[partition]["_model_name"] == "DropdownModel", "the cluster's partitions to choose from"
    assert kernel.models[partition]["_options_labels"] == ["(default)", "cpu", "gpu"]
    send = kernel.find(root, "betty-send-edit")[0]
    kernel.wait_for(lambda: kernel.models[send].get("disabled") is False, what="the first check")
    fields = [m for m in kernel.descendants(root) if kernel.models[m].get("_model_name") == "TextareaModel"]
    assert not any(kernel.models[m].get("description") for m in fields), "labels above the fields, never cut"
    folded = next(m for m in kernel.descendants(root) if kernel.models[m].get("_model_name") == "AccordionModel")
    assert kernel.find(folded, "betty-edit-arg-record"), "record is folded under Other arguments"
    assert "<b>script</b>" in kernel.texts(root) and "<b>goal</b>" in kernel.texts(root)

    def shown(model: str) -> bool:
        return kernel.models[str(kernel.models[model]["layout"]).removeprefix("IPY_MODEL_")].get("display") != "none"
    approve = kernel.find(root, "betty-approve")[0]
    buttons = next(m for m in kernel.descendants(root) if approve in kernel.models[m].get("children", [])
                   or f"IPY_MODEL_{approve}" in kernel.models[m].get("children", []))
    assert not shown(buttons), "the card's own buttons give way to the form"
    kernel.click(kernel.find(root, "betty-edit-cancel")[0])
    kernel.wait_for(lambda: shown(buttons), what="Cancel closing the form")
    kernel.click(kernel.find(root, "betty-edit")[0])
    kernel.wait_for(lambda: not shown(buttons), what="Edit opening the form again")

    kernel.set_value(memory, value="200M")
    kernel.wait_for(lambda: "#SBATCH --mem=200M" in kernel.models[text]["value"], what="the field rewriting its line")
    kernel.set_value(text, value=kernel.models[text]["value"].replace("#!/bin/bash", "#!/bin/bash\n#SBATCH -p nowhere"))
    kernel.wait_for(lambda: "nowhere" in kernel.texts(root) and kernel.models[send].get("disabled") is True,
                    what="the refused partition")
    status = kernel.models[kernel.find(root, "betty-edit-status")[0]]["value"]
    assert "line 2" in status and "nowhere" in status and "\n" not in status
    html = [kernel.models[m]["value"] for m in kernel.descendants(root)
            if kernel.models[m].get("_model_name") == "HTMLModel"]
    assert any("&lt;img src=x" in each for each in html) and not any("<img" in each for each in html), (
        "hostile text is escaped in every HTML the card shows")
    kernel.click(send)  # disabled: nothing is sent

    kernel.set_value(text, value=kernel.models[text]["value"].replace("#SBATCH -p nowhere\n", ""))
    kernel.wait_for(lambda: kernel.models[send].get("disabled") is False, what="the edit checked again")
    preview = kernel.find(root, "betty-edit-preview")[0]
    assert "--mem=200M" in kernel.models[preview]["value"]
    assert kernel.find(root, "betty-approve"), "the card still waits"
    kernel.click(send)
    found = kernel.wait_for(lambda: re.search(r"submitted job (\d+)", kernel.texts(root)), what="the job id")
    job = found.group(1)
    try:
        shown = ssh(dev_cluster, f"scontrol show job -o {job}").stdout
        assert "MinMemoryNode=200M" in shown, shown
    finally:
        ssh(dev_cluster, f"scancel {job}")


def test_submit_malformed_script_is_one_line(kernel: Kernel) -> None:
    # the cell's line 1 is the magic's own, so the directive is on the cell's line 3
    cell = kernel.run("%%betty submit\n#!/bin/bash\n#SBATCH --partition=nowhere\necho hi\n")
    assert one_error_line(cell) == "betty: can't submit: line 3: partition 'nowhere' does not exist; choose cpu or gpu"
    empty = kernel.run("%%betty submit\n\n")
    assert "batch script as the cell's body" in one_error_line(empty)
    line = kernel.run("%betty submit")
    assert "cell magic" in one_error_line(line)


# ----- GPU, wiki, mode, log, help ------------------------------------------------------------------
def test_gpu_estimate_and_calculator(kernel: Kernel) -> None:
    cell = kernel.run("%betty gpu --model Llama-3.1-8B --method lora --batch-size 2")
    assert cell.status == "ok" and "GiB per GPU" in cell.plain, cell.stderr
    peak = kernel.run("round(_.peak_gib, 1), _.request.batch_size")
    expected = subprocess.run([str(Path(__file__).parents[1] / ".venv/bin/betty"), "gpu", "estimate", "--model",
                               "Llama-3.1-8B", "--method", "lora", "--batch-size", "2", "--json"],
                              capture_output=True, text=True)
    assert peak.text == f"({round(json.loads(expected.stdout)['peak_gib'], 1)}, 2)"
    calc = kernel.run("%betty gpu calculator")
    root = calc.widgets[0]
    summary = kernel.find(root, "betty-gpu-summary")[0]
    first = kernel.models[summary]["value"]
    gpus = [m for m in kernel.descendants(root) if kernel.models[m].get("description") == "GPUs"][0]
    sharding = [m for m in kernel.descendants(root) if kernel.models[m].get("description") == "sharding"][0]
    kernel.set_value(sharding, index=kernel.models[sharding]["_options_labels"].index("zero3"))
    kernel.set_value(gpus, value=4)
    kernel.wait_for(lambda: kernel.models[summary]["value"] != first, what="the live estimate")
    assert "GiB per GPU" in kernel.models[summary]["value"]
    assert "--model and --method are needed" in one_error_line(kernel.run("%betty gpu --model Llama-3.1-8B"))
    assert "No-Such-Model" in one_error_line(kernel.run("%betty gpu --model No-Such-Model --method lora"))


def test_wiki(kernel: Kernel) -> None:
    # Pages are rendered by Betty (raw HTML as text, remote images not loaded), never handed
    # to the front-end as markdown it would render with remote images.
    index = kernel.run("%betty wiki")
    assert any("<h1>Index</h1>" in d.get("text/html", "") and "text/markdown" not in d for d in index.displays)
    found = kernel.run("%betty wiki search dev cluster")
    assert "clusters/dev-cluster.md" in found.stdout
    shown = kernel.run("%betty wiki show clusters/dev-cluster.md")
    assert any("<h1>The dev cluster</h1>" in d.get("text/html", "") and "<table>" in d["text/html"]
               and d.get("text/plain", "").startswith("# The dev cluster") for d in shown.displays)
    assert "wiki" in one_error_line(kernel.run("%betty wiki show ../../etc/passwd"))


def test_mode(kernel: Kernel) -> None:
    assert kernel.run("%betty mode").text == "'confirm'"
    assert kernel.run("%betty mode auto").text == "'auto'"
    assert kernel.run("%betty mode confirm").text == "'confirm'"
    assert "invalid choice: 'yolo'" in one_error_line(kernel.run("%betty mode yolo"))


def test_every_command_has_help(kernel: Kernel) -> None:
    for command in ("clusters", "use", "squeue", "sinfo", "sacct", "status", "logs", "cancel", "gpu", "submit",
                    "ask", "wiki", "mode", "log", "wait", "approvals", "where"):
        cell = kernel.run(f"%betty {command} --help")
        assert cell.status == "ok" and not cell.stderr, (command, cell.stderr)
        assert cell.stdout.startswith(f"usage: %betty {command}"), (command, cell.stdout[:80])
    assert "unknown %betty command 'frob'" in one_error_line(kernel.run("%betty frob"))
    assert "unrecognized arguments: --bogus" in one_error_line(kernel.run("%betty squeue --bogus"))


# ----- the agent ---------------------------------------------------------------------------------
def test_ask_streams_tool_rows_and_an_inline_card(kernel: Kernel, llm: ScriptedLLM) -> None:
    job = submit(kernel, "asked", seconds=300)
    llm.add(call("cluster_cancel", {"job_id": job}), say(f"Job {job} is **cancelled**."))
    cell = kernel.run(f"%betty ask please cancel job {job}")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    chat = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(chat, "betty-approve"), what="the inline card")[0])
    kernel.wait_for(lambda: "<strong>cancelled</strong>" in kernel.texts(chat), what="the reply")
    assert kernel.find(chat, "betty-tool-row")
    assert "approved by" in kernel.texts(chat)
    assert kernel.run("chat = _; chat.done.wait(30), chat.reason").text == "(True, 'finished')"


def test_waiting_for_an_approval_and_for_a_job(kernel: Kernel) -> None:
    cell = kernel.run(f"%%betty submit --slug waited --goal 'wait for it'\n{SCRIPT.format(name='waited', seconds=2)}")
    root = cell.widgets[0]
    early = kernel.run("submission = _\nsubmission.wait()")
    assert early.errors == ["UsageError: cluster_submit waits for your approval: answer its card above, then run "
                            "this cell again"]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0])
    kernel.wait_for(lambda: "submitted job" in kernel.texts(root), what="the submission")
    job = kernel.run("submission.wait().job_id").text.strip("'")
    assert job.isdigit() and job == kernel.run("submission.job_id").text.strip("'")
    ended = kernel.run(f"%betty wait {job} --every 1")
    assert ended.status == "ok" and not ended.stderr, ended.stderr
    progress = [m for m in ended.widgets if f"waiting for job {job} to end" in str(kernel.models[m].get("value"))]
    assert progress and progress[0] in kernel.closed, "a progress line is shown while it waits, then removed"
    assert kernel.run("_.state.value").text == "'COMPLETED'"
    assert "--every is at least 1 second" in one_error_line(kernel.run(f"%betty wait {job} --timeout 0"))


def test_ask_without_a_model_explains_how_to_configure_one(project: dict[str, Any], tmp_path: Path) -> None:
    config = tmp_path / "no-model.json"
    settings = json.loads(Path(project["env"]["BETTY_CONFIG"]).read_text())
    settings["BettyConfig"].pop("llm")
    config.write_text(json.dumps(settings))
    driver = Kernel(project["root"], {**project["env"], "BETTY_CONFIG": str(config)})
    try:
        driver.run("%load_ext betty_jupyter")
        cell = driver.run('%betty ask "what runs now?"')
        # The turn ends at once: its output is the record of it (or becomes so).
        [shown] = cell.outputs
        text = driver.wait_for(lambda: "Ollama" in shown["data"]["text/html"] and shown["data"]["text/html"],
                               what="the explanation")
        assert "Betty&#x27;s chat needs a model" in text and "vLLM server" in text
        assert driver.run("%betty sinfo").plain.count("gpu") >= 1, "every other command works without a model"
    finally:
        driver.close()


def test_cancel_from_the_job_table_goes_through_a_card(kernel: Kernel) -> None:
    job = submit(kernel, "tabled", seconds=300)
    table = kernel.run("%betty squeue --me").widgets[0]
    chooser = kernel.find(table, "betty-cancel-job")[0]
    [chosen] = [i for i, label in enumerate(kernel.models[chooser]["_options_labels"]) if label.split(" ")[0] == job]
    kernel.set_value(chooser, index=chosen)
    kernel.click(kernel.find(table, "betty-cancel")[0])
    kernel.click(kernel.wait_for(lambda: kernel.find(table, "betty-approve"), what="the card in the table")[0])
    kernel.wait_for(lambda: f"cancelled job {job}" in kernel.texts(table), what="the cancellation")


def test_ask_as_a_cell_and_approve_for_the_session(kernel: Kernel, llm: ScriptedLLM) -> None:
    kernel.run("%betty mode confirm")
    # two different reads by one tool (the same call twice in a turn is answered from the first, not run again)
    llm.add(call("cluster_queue", {}), call("cluster_queue", {"states": ["RUNNING"]}), say("Two partitions: cpu and gpu."))
    cell = kernel.run("%%betty ask\nWhich partitions are there,\nand which has GPUs?")
    chat = cell.widgets[0]
    assert "Which partitions are there,\nand which has GPUs?" in kernel.texts(chat)
    kernel.click(kernel.wait_for(lambda: kernel.find(chat, "betty-approve-session"), what="the tier 1 card")[0])
    kernel.wait_for(lambda: "Two partitions" in kernel.texts(chat), what="the reply")
    assert kernel.texts(chat).count("approved for this session") == 1, "the second read ran without a card"
    assert len(kernel.find(chat, "betty-tool-row")) == 2
    asked = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"][-1]
    assert asked == "Which partitions are there,\nand which has GPUs?"


def test_a_sweep_cell_is_one_card_for_the_whole_array(kernel: Kernel, dev_cluster) -> None:
    script = SCRIPT.format(name="nb-sweep", seconds=300).replace("echo started", 'echo "started lr=$lr"')
    cell = kernel.run(f"%%betty sweep --grid lr=1e-4,3e-4 seed=0,1,2 --at-once 2 --goal 'a sweep from a cell'\n"
                      f"{script}")
    root = cell.widgets[0]
    approve = kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0]
    shown = kernel.texts(root)
    assert "6 tasks, at most 2 at once" in shown and "#SBATCH --array=0-5%2" in shown and "3e-4" in shown
    kernel.click(approve)
    found = kernel.wait_for(lambda: re.search(r"as job array (\d+)", kernel.texts(root)), what="the array's id")
    array = found.group(1)
    try:
        tasks = ssh(dev_cluster, f"scontrol -o show job {array}").stdout
        assert "ArrayTaskThrottle=2" in tasks and f"ArrayJobId={array}" in tasks
    finally:
        ssh(dev_cluster, f"scancel {array}")


def test_a_pipeline_cell_is_one_card_for_every_step(kernel: Kernel, dev_cluster) -> None:
    steps = "".join(f"# ==== step {name} ====\n" + SCRIPT.format(name=f"nb-{name}", seconds=300)
                    for name in ("prep", "train"))  # prep runs until cancelled: train stays behind it
    cell = kernel.run(f"%%betty pipeline --goal 'two steps from a cell'\n{steps}")
    root = cell.widgets[0]
    approve = kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0]
    shown = kernel.texts(root)
    assert "# ==== step train (after prep) ====" in shown and "train after prep (--dependency=afterok)" in shown
    kernel.click(approve)
    found = kernel.wait_for(lambda: re.search(r"\(prep (\d+), train (\d+)\)", kernel.texts(root)), what="the jobs")
    prep, train = found.groups()
    try:
        assert f"Dependency=afterok:{prep}" in ssh(dev_cluster, f"scontrol -o show job {train}").stdout
    finally:
        ssh(dev_cluster, f"scancel {prep} {train}")
