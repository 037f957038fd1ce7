"""``%%betty run`` in a real kernel against the dev cluster, over SSH and with the local transport: a card first,
then the cell's job followed in the cell, and its output, figure and values back in the kernel."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from conftest import ssh
from jupyter_server_proc import JupyterServer
from kernel_driver import Kernel
from llm_server import ScriptedLLM
from notebook_support import betty_kernel, cell_run_project, llm, one_error_line  # noqa: F401 (a fixture)

pytestmark = pytest.mark.cluster

CLUSTERS = ["betty-dev", "betty-dev-local"]
"""The dev cluster over SSH, and the same cluster through local commands (as under Open OnDemand)."""


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM) -> dict[str, Any]:
    """A project whose two profiles of the dev cluster have an environment ``betty``: this test run's own venv."""
    root = tmp_path_factory.mktemp("cell-run")
    made = cell_run_project(root, dev_cluster, llm, {"betty": {"venv": sys.prefix},
                                                     "gone": {"venv": str(root / "no-such-venv")}})
    made["env"]["BETTY_TEST_API_TOKEN"] = "s3cret-never-in-a-job"  # where sbatch runs, for the local transport
    return made


@pytest.fixture(scope="module")
def kernel(project: dict[str, Any]) -> Iterator[Kernel]:
    with betty_kernel(project["root"], project["env"]) as driver:
        yield driver


@pytest.fixture(scope="module")
def remote(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, JupyterServer]]:
    """A kernel whose Betty is a Jupyter server's extension serving the project (as in JupyterLab)."""
    server = JupyterServer(project["root"], project["env"], tmp_path_factory.mktemp("runtime"))
    try:
        with betty_kernel(project["root"], {**project["env"], "BETTY_SERVER_URL": server.url,
                                            "BETTY_SERVER_TOKEN": server.token}) as driver:
            yield driver, server
    finally:
        server.stop()


def approve(kernel: Kernel, cell: Any) -> str:
    """Approve the run's card; the widget that follows its job (found among every widget the kernel opened, since
    an ended job's output keeps only its record)."""
    before = set(kernel.models)
    root = cell.widgets[0]
    kernel.click(kernel.wait_for(lambda: kernel.find(root, "betty-approve"), what="the card")[0])

    def followed() -> str | None:
        return next((m for m in kernel.models if m not in before
                     and "betty-cell-run" in kernel.models[m].get("_dom_classes", [])), None)

    return str(kernel.wait_for(followed, timeout=120, what=f"the followed job: {kernel.texts(root)[-400:]}"))


def ended(kernel: Kernel, view: str) -> str:
    """Wait until the followed job has ended and what it brought back is shown; the view's text."""
    kernel.wait_for(lambda: kernel.models[kernel.find(view, "betty-cell-cancel")[0]].get("disabled"), timeout=240,
                    what="the job's end")
    return kernel.texts(view)


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_a_cell_runs_as_a_job_and_its_output_figure_and_value_come_back(kernel: Kernel, project, dev_cluster,
                                                                          cluster: str) -> None:
    assert kernel.run(f"%betty use {cluster}").status == "ok"
    slug = "c-local" if cluster.endswith("local") else "c-ssh"
    kernel.run("import numpy as np\nsamples = np.arange(10.0)\nsecret_token = 'never-sent'")
    cell = kernel.run(f"%%betty run --partition cpu --time 5 --env betty --in samples --out total,peak --slug {slug}\n"
                      "import matplotlib.pyplot as plt\n"
                      "total = float(samples.sum())\npeak = samples.max()\n"
                      "print('sum is', total)\nprint('<b>bold</b><script>alert(1)</script>')\n"
                      "import os\nprint('secrets:', [k for k in os.environ if k.endswith('_TOKEN')])\n"
                      "plt.plot(samples)\n")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
    shown = kernel.texts(cell.widgets[0])
    assert re.search(r"samples: numpy\.ndarray, \d+ B \(in inputs\.pkl\)", shown), shown
    assert "total = float(samples.sum())" in shown and "secret_token" not in shown
    token = kernel.run("_run = _\n_run.run.token").text.strip("'")
    run_dir = f"{project['root'].parent}/work-{'local' if cluster.endswith('local') else 'ssh'}/runs/cell-{token}"
    script = kernel.run("print(_run.call.approval.preview.text)").stdout
    assert script == (f"#!/bin/bash\n#SBATCH --job-name=cell-{slug}\n#SBATCH --partition=cpu\n#SBATCH --time=5\n"
                      f"#SBATCH --chdir={run_dir}\n#SBATCH --output={run_dir}/cell.out\n"
                      f"#SBATCH --error={run_dir}/cell.err\n"
                      "# %%betty run: the cell (cell.py) and its --in values (inputs.pkl) are in this directory;\n"
                      "# cell_runner.py runs the cell, then writes result.json, figure-N.png and outputs.pkl beside "
                      "them.\n# Nothing runs unless the directory is yours alone (mode 700).\n"
                      f'cd -- {run_dir} && [[ -O . ]] && (( (0$(stat -c %a .) & 077) == 0 )) || '
                      f'{{ echo "betty: {run_dir} is not yours alone; the cell was not run" >&2; exit 1; }}\n'
                      f"export MPLBACKEND=Agg\nexec {sys.prefix}/bin/python3 -u cell_runner.py {token}\n\n"), script
    assert ssh(dev_cluster, f"test -e {run_dir}").returncode == 1, "nothing is sent before the approval"
    assert kernel.run("_run.status").text == "'waiting for approval'"

    view = approve(kernel, cell)
    text = ended(kernel, view)
    assert "COMPLETED" in text and "sum is 45.0" in text and "secrets: []" in text, text
    assert "&lt;b&gt;bold&lt;/b&gt;&lt;script&gt;" in text and "<script>" not in text, "output is shown as text"
    assert any(kernel.models[m].get("_model_name") == "ImageModel" for m in kernel.descendants(view))
    back = kernel.run("_r = _run.result(timeout=60)\n(total, float(peak), _r.values['total'], _r.figures[0][:4], "
                      "_run.status)")
    assert back.text == "(45.0, 9.0, 45.0, b'\\x89PNG', 'COMPLETED')", back.errors
    uploaded = ssh(dev_cluster, f"ls {run_dir}; grep -c never-sent {run_dir}/inputs.pkl {run_dir}/cell.py")
    assert uploaded.stdout.split() == ["cell.err", "cell.out", "cell.py", "cell_runner.py", "figure-1.png",
                                       "inputs.pkl", "outputs.pkl", "result.json", "result.sig", "run.json",
                                       "run.key",
                                       f"{run_dir}/inputs.pkl:0", f"{run_dir}/cell.py:0"], uploaded.stdout
    assert ssh(dev_cluster, f"stat -c %a {run_dir}").stdout.strip() == "700", "the run's values are the person's alone"
    # It is an experiment like any other submission: page, notebook and a line in the action log.
    [record] = [r for r in ActionLog(project["root"]).read() if r.tool == "cell_run" and f"-{slug}:" in r.summary]
    assert record.decision == "approved" and record.ok
    page = next((project["root"] / "wiki" / "experiments").glob(f"*-{slug}.md")).read_text()
    assert "cell_runner.py" in page


def test_a_failing_cell_brings_back_its_traceback_as_text(kernel: Kernel) -> None:
    assert (used := kernel.run("%betty use betty-dev")).status == "ok", (used.errors, used.stderr)
    cell = kernel.run("%%betty run --partition cpu --time 5 --env betty\nx = 1\nraise ValueError('<i>bad</i> value')\n")
    view = approve(kernel, cell)
    text = ended(kernel, view)
    assert "FAILED" in text and "ValueError: &lt;i&gt;bad&lt;/i&gt; value" in text and "<i>bad" not in text, text
    assert "File &quot;&lt;cell&gt;&quot;, line 2" in text, "the traceback names the cell's own line"
    raised = kernel.run("_.result(timeout=60)")
    assert raised.errors and raised.errors[0].startswith("CellRunError: the cell raised on the cluster: ValueError")


def test_an_unpicklable_value_is_refused_before_anything_is_submitted(kernel: Kernel, project) -> None:
    before = len(ActionLog(project["root"]).read())
    kernel.run("import threading\nlock = threading.Lock()")
    line = one_error_line(kernel.run("%%betty run --partition cpu --time 5 --in lock\nprint(lock)\n"))
    assert line.startswith("betty: --in lock: a _thread.lock cannot be pickled") and "nothing was submitted" in line
    missing = one_error_line(kernel.run("%%betty run --partition cpu --time 5 --in nowhere\nprint(1)\n"))
    assert "there is no variable nowhere in this notebook" in missing
    assert len(ActionLog(project["root"]).read()) == before, "no call was made"
    assert "as the cell's body" in one_error_line(kernel.run("%betty run --partition cpu --time 5"))
    assert "the following arguments are required: --partition" in one_error_line(kernel.run("%%betty run\nprint(1)\n"))
    assert kernel.run("%betty run --help").stdout.startswith("usage: %betty run [-h] --partition P --time MIN")


def test_a_denied_run_sends_nothing(kernel: Kernel, project, dev_cluster) -> None:
    assert (used := kernel.run("%betty use betty-dev")).status == "ok", (used.errors, used.stderr)
    kernel.run("import numpy as np\nprivate = np.zeros(3)")
    cell = kernel.run("%%betty run --partition cpu --time 5 --in private\nprint(private)\n")
    kernel.run("_denied = _")
    token = kernel.run("_denied.run.token").text.strip("'")
    kernel.click(kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-deny"), what="the card")[0])
    kernel.wait_for(lambda: kernel.run("_denied.status").text == "'not submitted'", what="the denial")
    assert kernel.run("_denied.result(timeout=10)").errors[0].startswith("UsageError: the cell run was not submitted")
    listed = ssh(dev_cluster, f"ls -d {project['root'].parent}/work-ssh/runs/cell-{token}")
    assert listed.returncode != 0 and "No such file" in listed.stderr, "nothing was uploaded"


def test_a_cell_changed_after_its_card_was_shown_is_not_run(kernel: Kernel, project, dev_cluster) -> None:
    """The card showed the staged cell; another hand rewrote the staged cell.py while it waited. The approval
    was for what the card showed, so nothing is uploaded or submitted and the person is told in one line."""
    assert (used := kernel.run("%betty use betty-dev")).status == "ok", (used.errors, used.stderr)
    cell = kernel.run("%%betty run --partition cpu --time 5\nprint('the code the card shows')\n")
    kernel.run("_swapped = _")
    token = kernel.run("_swapped.run.token").text.strip("'")
    staged = project["root"] / ".betty" / "cell-runs" / token / "cell.py"
    card = kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")[0]
    assert "the code the card shows" in kernel.texts(cell.widgets[0])
    staged.write_text("open('planted-by-someone-else', 'w').write('ran')\n")
    before = len(ActionLog(project["root"]).read())
    kernel.click(card)
    kernel.wait_for(lambda: kernel.run("_swapped.status").text == "'not submitted'", what="the refusal")
    error = kernel.run("_swapped.result(timeout=10)").errors[0]
    assert "changed after the card was shown" in error and "\n" not in error.strip()
    records = ActionLog(project["root"]).read()[before:]
    assert [(r.tool, r.decision, r.ok) for r in records] == [("cell_run", "refused", False)]
    assert "cell.py" in records[0].summary, "the refusal names what changed"
    listed = ssh(dev_cluster, f"ls -d {project['root'].parent}/work-ssh/runs/cell-{token}")
    assert listed.returncode != 0 and "No such file" in listed.stderr, "nothing was uploaded"


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_an_environment_missing_on_the_cluster_is_refused_before_the_card(kernel: Kernel, project, cluster) -> None:
    assert kernel.run(f"%betty use {cluster}").status == "ok"
    line = one_error_line(kernel.run("%%betty run --partition cpu --time 5 --env gone\nprint(1)\n"))
    assert line == (f"betty: environment gone: there is no {project['root'].parent}/no-such-venv/bin/python3 on the "
                    "cluster; nothing was submitted: fix the profile's environments or pick another --env")
    unknown = one_error_line(kernel.run("%%betty run --partition cpu --time 5 --env jax\nprint(1)\n"))
    assert unknown == (f"betty: --env jax: cluster {cluster} has no such environment (configured: betty, gone); add "
                       "it under the profile's environments")


def test_cancel_from_the_cell_cancels_the_job(kernel: Kernel, dev_cluster) -> None:
    assert (used := kernel.run("%betty use betty-dev")).status == "ok", (used.errors, used.stderr)
    cell = kernel.run("%%betty run --partition cpu --time 5\nimport time\nprint('started', flush=True)\n"
                      "time.sleep(600)\n")
    kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
    assert "the cluster&#x27;s default python3 (no --env" in kernel.texts(cell.widgets[0]), "the card says where it runs"
    kernel.run("_sleeper = _")
    view = approve(kernel, cell)
    kernel.wait_for(lambda: "started" in kernel.texts(view), timeout=120, what="the job's first output")
    assert kernel.run("21 * 2").text == "42", "the kernel is free while the job runs"
    assert kernel.run("_sleeper.result(timeout=0.1)").errors == [
        f"UsageError: job {kernel.run('_sleeper.job_id').text.strip(chr(39))} is still RUNNING after 0.1 s"]
    kernel.click(kernel.find(view, "betty-cell-cancel")[0])
    job = kernel.run("_sleeper.job_id").text.strip("'")
    assert job.isdigit(), job
    kernel.click(kernel.wait_for(lambda: kernel.find(view, "betty-approve"), what="the cancel card")[0])
    text = ended(kernel, view)
    assert "CANCELLED" in text, text
    assert kernel.run("_sleeper.status").text == "'CANCELLED'"
    assert kernel.run("_sleeper.cancel()").errors == [f"UsageError: job {job} already ended (CANCELLED); nothing to cancel"]
    assert "CANCELLED" in ssh(dev_cluster, f"sacct -n -X -j {job} -o State").stdout or \
        "CANCELLED" in ssh(dev_cluster, f"scontrol -o show job {job}").stdout


CHAINED_CELL = """%%betty run --partition cpu --time 1 --env betty --segments 2 --checkpoint-seconds 20 --out seen --slug c-chain
import os, signal, time
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
resumed = os.path.exists("checkpoint")
with open("segments.txt", "a") as log:
    log.write(("resumed" if resumed else "started") + "\\n")
if not resumed:  # the first segment works until it is told to checkpoint; the second finishes at once
    while not stop:
        time.sleep(0.2)
    with open("checkpoint", "w") as saved:
        saved.write("1")
    with open("segments.txt", "a") as log:
        log.write("checkpointed on the signal\\n")
seen = open("segments.txt").read().split()
print("segments:", seen)
"""


def test_a_cell_runs_as_a_two_segment_chain_resuming_from_its_checkpoint(kernel: Kernel, project) -> None:
    assert kernel.run("%betty use betty-dev").status == "ok"
    cell = kernel.run(CHAINED_CELL)
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")
    kernel.run("_chain = _")
    script = kernel.run("print(_chain.call.approval.preview.text)").stdout
    assert "#SBATCH --signal=B:USR1@20" in script and f"betty_run {sys.prefix}/bin/python3 -u cell_runner.py" in script
    assert "exec " not in script.split("end of Betty's continuation helper", 1)[1], script
    view = approve(kernel, cell)
    kernel.wait_for(lambda: kernel.find(view, "betty-cell-cancel"), timeout=120, what="the followed job's cancel")
    text = ended(kernel, view)
    assert "COMPLETED" in text, text
    back = kernel.run("_chain.result(timeout=60)\n(seen, _chain.status)")
    assert back.text == "(['started', 'checkpointed', 'on', 'the', 'signal', 'resumed'], 'COMPLETED')", back.errors
    [tracked] = [t for t in Ledger(Workspace.at(project["root"]).ledger_path).all() if "c-chain" in t.experiment.slug]
    assert len(tracked.experiment.chain["jobs"]) == 2  # one experiment: the two segments' jobs


def test_under_a_jupyter_server_the_run_is_the_servers_and_its_value_comes_back(remote, project) -> None:
    kernel, server = remote
    assert "Jupyter server's Betty extension" in kernel.run("%betty where").text
    kernel.run("import numpy as np\nweights = np.ones(4)")
    cell = kernel.run("%%betty run --partition cpu --time 5 --env betty --in weights --out norm --slug on-server\n"
                      "norm = float((weights ** 2).sum() ** 0.5)\nprint('norm', norm)\n")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    kernel.run("_served = _")
    text = ended(kernel, approve(kernel, cell))
    assert "COMPLETED" in text and "norm 2.0" in text, text
    assert kernel.run("_served.result(timeout=60).values, norm").text == "({'norm': 2.0}, 2.0)"
    actions = server.request("GET", "actions?limit=200")["actions"]
    assert [a["decision"] for a in actions if a["tool"] == "cell_run" and "on-server" in a["summary"]] == ["approved"]
