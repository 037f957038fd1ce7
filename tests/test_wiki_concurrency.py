"""Writers in separate processes (spawned, as a Jupyter server and a CLI would be): nothing lost, nothing torn."""

from __future__ import annotations

import multiprocessing
import re
from pathlib import Path

from betty_jupyter.wiki import AUTO_END, AUTO_START, WikiStore

LOGGERS, ENTRIES = 8, 200
UPDATERS, UPDATES = 3, 40
PAGE = "experiments/run.md"
USER_BEFORE = "# Run\n\n## Goal\n\nThe person's goal.\n\n"
USER_AFTER = "\n## Lessons\n\nThe person's lessons.\n"
ENTRY = re.compile(r"^- \d{4}-\d\d-\d\d \d\d:\d\d — logger (\d) entry (\d{3}) (x+)$")


def log_entries(root: str, logger: int) -> None:
    """Child process: ENTRIES log lines, each long enough that a torn write would show."""
    store = WikiStore(root)
    for entry in range(ENTRIES):
        store.log(f"logger {logger} entry {entry:03d} " + "x" * 300)


def update_region(root: str, updater: int) -> None:
    """Child process: UPDATES rewrites of Betty's region, each merging this updater's own frontmatter key."""
    store = WikiStore(root)
    for step in range(UPDATES):
        status = f"## Status\n\nupdater {updater} step {step}\n\n## Runtime\n\n" + f"line {step}\n" * 200
        store.update_auto(PAGE, status, {f"updater_{updater}": step})


def test_concurrent_logs_and_region_updates_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "wiki"
    root.mkdir()
    store = WikiStore(root)
    store.log("start")
    store.create(PAGE, {"name": "run", "description": "A run.", "type": "experiment"},
                 f"{USER_BEFORE}{AUTO_START}\n## Status\n\nPENDING\n{AUTO_END}\n{USER_AFTER}")
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=log_entries, args=(str(root), n)) for n in range(LOGGERS)]
    workers += [spawn.Process(target=update_region, args=(str(root), n)) for n in range(UPDATERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0] * len(workers)

    log = store.read("log.md")
    lines = [line for line in log.body.splitlines() if line.startswith("- ")]
    assert len(lines) == 1 + LOGGERS * ENTRIES
    seen: dict[int, list[int]] = {n: [] for n in range(LOGGERS)}
    for line in lines[1:]:
        match = ENTRY.match(line)
        assert match and len(match.group(3)) == 300, f"torn or mixed line: {line[:80]!r}"
        seen[int(match.group(1))].append(int(match.group(2)))
    assert seen == {n: list(range(ENTRIES)) for n in range(LOGGERS)}  # all there, each logger's in order

    page = store.read(PAGE)
    assert page.body.startswith(USER_BEFORE + AUTO_START + "\n") and page.body.endswith(AUTO_END + "\n" + USER_AFTER)
    assert page.auto is not None and re.fullmatch(
        rf"## Status\n\nupdater \d step {UPDATES - 1}\n\n## Runtime\n\n(line {UPDATES - 1}\n){{200}}", page.auto)
    assert {key: page.frontmatter[key] for key in page.frontmatter if key.startswith("updater_")} == {
        f"updater_{n}": UPDATES - 1 for n in range(UPDATERS)}  # no merge lost to a concurrent writer
    assert [path.name for path in root.rglob("*.tmp")] == []
    assert [page.name for page in store.list()] == [PAGE, "log.md"]
