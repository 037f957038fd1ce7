"""Experiment pages written from hostile text, for comparing the page writer's bytes across versions.

``python tests/wiki_pages_fixture.py`` rewrites ``tests/data/wiki/experiment_pages.json`` from the
code on the path; the test compares today's pages with that file.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile import hostile  # noqa: E402

from betty_jupyter.cluster.jobs import Job, JobState  # noqa: E402
from betty_jupyter.errors import WikiError  # noqa: E402
from betty_jupyter.experiments import content  # noqa: E402
from betty_jupyter.experiments.ledger import Experiment  # noqa: E402
from betty_jupyter.experiments.refresh import write_page  # noqa: E402
from betty_jupyter.experiments.workspace import Workspace  # noqa: E402
from betty_jupyter.wiki import WikiStore  # noqa: E402

UPDATED = re.compile(r"_Updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d by")
GOLDEN = Path(__file__).parent / "data" / "wiki" / "experiment_pages.json"
TRICKY = ["", " lead", "trail ", "yes", "null", "2026-11-25", "a: b", "#x", "- x", "'q'", '"dq"', "tab\there",
          "é ü 中文", "emoji \U0001F600", "\x85", "\u2028", "\ufeff", "\x07", "a" * 1200, "word " * 300, "a\r\nb"]


def pages(root: Path) -> dict[str, str]:
    """Each hostile payload as an experiment's goal, job name, failure log and a person's extra field, its page
    created PENDING and then rewritten by the watcher as FAILED; page name → the page's text."""
    workspace = Workspace.at(root)
    workspace.wiki.mkdir(parents=True)
    store = WikiStore(workspace.wiki)
    written = {}
    for number, payload in enumerate(hostile() + TRICKY):
        slug = f"2026-11-25-hostile-{number}"
        experiment = Experiment(slug=slug, job_id=str(1000 + number), cluster="betty-dev",
                                submitted="2026-11-25T01:00:00", goal=payload, script="#!/bin/bash\ntrue\n",
                                script_path=f"/s/{slug}.sbatch")
        try:
            store.create(experiment.page, content.page_frontmatter(experiment),
                         content.page_body(experiment, content.auto_region(experiment, None, "PENDING")))
        except WikiError as refused:  # refused before and after alike
            written[experiment.page] = f"refused: {refused}"
            continue
        if number % 2:  # a person added a field of their own
            store.update(experiment.page, frontmatter={"note": payload[:2000], "tags": [payload[:200], "x"]})
        job = Job(job_id=experiment.job_id, name=payload, user="ada", partition="gpu", state=JobState.FAILED,
                  exit_code="1:0", reason=payload, started=datetime(2026, 11, 25, 1, 0),
                  ended=datetime(2026, 11, 25, 1, 5), elapsed=timedelta(minutes=5), comment=payload)
        write_page(workspace, experiment, job, payload)
        text = (workspace.wiki / experiment.page).read_text(encoding="utf-8")
        written[experiment.page] = UPDATED.sub("_Updated (when) by", text)  # the clock's line aside
    return written


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(pages(Path(tempfile.mkdtemp())), indent=1, ensure_ascii=True) + "\n")
