"""What enters the model's context: big outputs condensed, the asking person's jobs kept whole."""

from __future__ import annotations

import random

from betty_jupyter.agent.budget import ANSWER_CHARS, Paging
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
    frame.loc[0, "state"] = "FAILED"  # an exit code is shown for a job that ended
    text = condense(ToolOutcome(summary="", data=frame), "user1")
    assert "3:0" in text and "nan" not in text and "<NA>" not in text, text


def test_a_person_with_thousands_of_jobs_gets_their_newest_rows_never_the_whole_table():
    """The person's own jobs come first, the newest first, a page at a time: a busy account must not fill a context."""
    mine = set(range(0, 10_000, 3))
    frame = parsing.parse_queue(queue_text(10_000, mine))
    text = condense(ToolOutcome(summary="10000 jobs in the queue", data=frame, paging=Paging(narrow="states")),
                    user="alice")
    assert estimate_tokens(text) < 2_000
    assert "all 3334 jobs of alice:" in text
    assert "19999 |" in text and "19996 |" in text and "10000 |" not in text  # alice's newest first
    assert text.endswith("[rows 1–40 of 10000 shown; call again with offset=40 for the next ones, "
                         "or narrow with states]")


def test_the_next_page_starts_where_the_answer_said():
    mine = set(range(0, 10_000, 3))
    frame = parsing.parse_queue(queue_text(10_000, mine))
    first = condense(ToolOutcome(summary="", data=frame, paging=Paging()), user="alice")
    second = condense(ToolOutcome(summary="", data=frame, paging=Paging(offset=40)), user="alice")
    last_shown = first.splitlines()[-2].split(" | ")[0]
    assert int(second.split("job_id | ")[1].splitlines()[1].split(" | ")[0]) == int(last_shown) - 3
    end = condense(ToolOutcome(summary="", data=frame, paging=Paging(offset=9_990)), user="alice")
    assert end.endswith("[rows 9991–10000 of 10000 shown]") and "\n10001 |" in end  # the oldest of the others last


def test_long_cells_cost_rows_not_the_budget():
    frame = parsing.parse_queue(queue_text(1_000, set(range(1_000))))
    frame["name"] = "x" * 5_000
    text = condense(ToolOutcome(summary="", data=frame, paging=Paging()), user="alice")
    assert len(text) <= ANSWER_CHARS and "characters omitted" not in text
    assert "of 1000 shown; call again with offset=" in text.splitlines()[-1]


