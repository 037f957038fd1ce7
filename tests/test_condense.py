"""What enters the model's context: big outputs condensed, the asking person's jobs kept whole."""

from __future__ import annotations

import random

from betty_jupyter.agent.condense import condense, condense_log, estimate_tokens
from betty_jupyter.agent.models import ToolOutcome
from betty_jupyter.cluster import parsing

STATES = ["PENDING", "RUNNING", "COMPLETING", "PENDING", "RUNNING"]


def queue_text(jobs: int, mine: set[int]) -> str:
    rng = random.Random(3)
    lines = []
    for number in range(jobs):
        user = "alice" if number in mine else f"user{rng.randint(1, 300)}"
        fields = [str(10_000 + number), "", "", f"train-{number} | sweep", user, "proj", rng.choice(["gpu", "cpu", "debug"]),
                  rng.choice(STATES), "Priority", "1:00:00", "2-00:00:00", "1", "8", "32G", "gres/gpu:a100:2",
                  "", "2026-11-20T09:00:00", "N/A", ""]
        lines.append(parsing.SEPARATOR.join(fields))
    return "\n".join(lines) + "\n"


def test_a_10000_job_queue_fits_in_2000_tokens_and_keeps_every_job_of_the_person():
    mine = {17, 4_200, 9_999, 123, 5_555, 777, 8_001}
    frame = parsing.parse_queue(queue_text(10_000, mine))
    text = condense(ToolOutcome(summary="10000 jobs in the queue", data=frame), user="alice")
    assert estimate_tokens(text) < 2_000
    for number in mine:
        assert f"{10_000 + number} | train-{number} | sweep | alice" in text
    assert "10000 rows." in text and "by state: " in text and "by partition: " in text
    assert text.count("| alice |") == len(mine)


def test_a_small_table_is_shown_whole():
    frame = parsing.parse_queue(queue_text(5, set()))
    text = condense(ToolOutcome(summary="5 jobs", data=frame))
    assert all(f"train-{n} | sweep" in text for n in range(5))


def test_a_long_log_keeps_head_tail_and_the_error_lines():
    lines = [f"step={i} loss=0.{i % 97:02d}" for i in range(5_000)]
    lines[2_500] = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    lines[3_000] = "Traceback (most recent call last):"
    text = condense_log("\n".join(lines))
    assert "step=0 loss=0.00" in text and "step=4999" in text
    assert "RuntimeError: CUDA out of memory" in text and "Traceback (most recent call last):" in text
    assert "step=2499 " not in text and estimate_tokens(text) < 2_000


def test_a_failed_outcome_is_one_error_line():
    assert condense(ToolOutcome(ok=False, summary="job 5 is not known")) == "error: job 5 is not known"


def test_missing_values_are_blank_not_a_crash():
    import pandas as pd

    frame = parsing.parse_queue(queue_text(3, {1}))
    frame["exit_code"] = pd.array(["3:0", None, ""], dtype="string")
    frame.loc[0, "reason"] = None
    text = condense(ToolOutcome(summary="", data=frame), "user1")
    assert "3:0" in text and "nan" not in text and "<NA>" not in text, text


def test_a_person_with_thousands_of_jobs_gets_their_first_rows_never_the_whole_table():
    """The person's own jobs are kept whole only while they fit: a busy account's history must not fill a context."""
    mine = set(range(0, 10_000, 3))
    frame = parsing.parse_queue(queue_text(10_000, mine))
    text = condense(ToolOutcome(summary="10000 jobs in the queue", data=frame), user="alice")
    assert estimate_tokens(text) < 2_000
    assert "(the first 40 rows of alice's; the action log has all 3334)" in text
    assert "10000 |" in text and "10003 |" in text and "19999 |" not in text  # the table's own first rows
