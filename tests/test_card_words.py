"""A card in the person's words: its summary first, every detail labelled in words, the digest unchanged."""

from __future__ import annotations

from betty_jupyter.agent.events import ApprovalRequest
from betty_jupyter.agent.models import Preview, card_digest
from betty_jupyter.experiments.sweep import Grid, grid_table
from betty_jupyter.notebook.widgets.approval import ApprovalCard

SCRIPT = "#!/bin/bash\n#SBATCH --partition=gpu\n#SBATCH --time=00:30:00\nsrun python train.py\n"
COMMAND = "SLURM_EXPORT_ENV=ALL sbatch --parsable '--comment=betty:<fresh token>' /scratch/betty/scripts/x.sbatch"


def sweep_preview() -> Preview:
    grid = Grid.parse(["lr=0.1,0.3", "seed=0,1"])
    details = {"cluster": "dev", "resources": "partition gpu, time 30 min", "script_path": "/scratch/x.sbatch",
               "command": COMMAND, "environment": "PATH, HOME (where set) and Slurm's SLURM_*", "tasks": len(grid),
               "grid": grid.words(), "at_once": None, "points": grid_table(grid)}
    return Preview(kind="script", title="sweep lr-scan on dev: 4 tasks; each task partition gpu, time 30 min",
                   text=SCRIPT, details=details)


def test_a_sweep_card_says_what_runs_and_its_parameters_first_in_three_lines_at_most() -> None:
    preview = sweep_preview()
    assert preview.summary == ["sweep lr-scan on dev: 4 tasks; each task partition gpu, time 30 min",
                               "parameters: lr = 0.1, 0.3; seed = 0, 1",
                               "sends the script to dev (environment and paths below)"]
    assert not any("sbatch" in line or "SLURM" in line for line in preview.summary)


def test_details_are_labelled_in_words_and_a_table_is_rows() -> None:
    facts = {fact.label: fact for fact in sweep_preview().facts}
    assert "script path" in facts and "script_path" not in facts
    assert facts["parameters"].text == "lr = 0.1, 0.3\nseed = 0, 1"
    assert facts["tasks"].table == [["task", "lr", "seed"], ["0", "0.1", "0"], ["1", "0.1", "1"],
                                    ["2", "0.3", "0"], ["3", "0.3", "1"]]
    assert not any("[" in fact.text or "|" in fact.text for fact in facts.values())


def test_a_resubmission_says_which_job_it_replaces_in_words() -> None:
    preview = Preview(kind="diff", title="resubmit a as b to dev: partition gpu", text="-x\n+y\n",
                      details={"replaces": {"job_id": "42", "experiment": "2026-11-29-train", "page": "wiki/x.md"}})
    assert "replaces job 42 (2026-11-29-train)" in preview.summary
    assert [fact.text for fact in preview.facts if fact.label == "replaces"] == ["job 42 (2026-11-29-train)"]


def test_a_command_step_shows_the_command_and_says_refused_only_when_it_is() -> None:
    allowed = Preview(kind="command", title="run on dev", text="sinfo -s",
                      details={"cluster": "dev", "argv": ["sinfo", "-s"], "refused": False})
    assert allowed.summary == ["run on dev", "runs: sinfo -s"]
    assert [fact.label for fact in allowed.facts] == ["cluster"]
    refused = Preview(kind="text", title="refused on dev", text="rm is not on the allowlist",
                      details={"refused": True, "cluster": "dev"})
    assert refused.summary[1] == "Betty will not run this: rm is not on the allowlist"
    assert ("refused", "yes") in [(fact.label, fact.text) for fact in refused.facts]


def test_the_gpu_memory_line_is_said_once() -> None:
    preview = Preview(kind="script", title="submit x to dev", text=SCRIPT,
                      details={"gpu_memory": "GPU memory estimate: 67.5 GiB per GPU (Llama-3.1-8B, lora)"})
    assert preview.summary[1] == "GPU memory estimate: 67.5 GiB per GPU (Llama-3.1-8B, lora)"


def test_the_summary_and_facts_are_not_part_of_the_digest() -> None:
    preview = sweep_preview()
    reworded = preview.model_copy(update={"summary": ["other words"], "facts": []})
    assert card_digest("sweep_submit", {"a": 1}, preview) == card_digest("sweep_submit", {"a": 1}, reworded)


def test_the_notebook_card_shows_the_summary_before_the_exact_script_and_details() -> None:
    request = ApprovalRequest(approval_id="apr_1", call_id="c1", tool="sweep_submit", tier=2, args={},
                              preview=sweep_preview(), reason="a person answers every call", digest="sha256:x")
    html = ApprovalCard(request, lambda *_: None).record().html
    summary_at, exact_at = html.index("parameters: lr = 0.1, 0.3; seed = 0, 1"), html.index("<details")
    assert summary_at < exact_at < html.index("srun") and exact_at < html.index("SLURM_EXPORT_ENV")
    assert "script path" in html and "script_path" not in html and "tier 2 · always asks" in html
    assert "<th style='border:1px solid" in html and "| task |" not in html and '["lr' not in html


def test_a_cell_run_says_what_crosses_the_wire_first() -> None:
    details = {"cell": "x = 1\n", "crosses the wire": "cell.py: the cell's code, 1 lines\nframe: a DataFrame (in inputs.pkl)",
               "cluster": "dev", "environment": "PATH", "command": COMMAND, "run directory": "/scratch/runs/x"}
    preview = Preview(kind="script", title="run a cell as x on dev: partition cpu, time 10 min", text=SCRIPT,
                      details=details)
    assert preview.summary == ["run a cell as x on dev: partition cpu, time 10 min",
                               "sends cell.py: the cell's code, 1 lines; frame: a DataFrame (in inputs.pkl)"]
