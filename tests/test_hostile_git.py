"""The context chip's git facts over the real server, from hostile repositories: every program a repository's
configuration can name (filters, textconv, an external diff, fsmonitor, hooks, pagers, helpers, included
configs, a submodule's own config, a ``.git`` file leading elsewhere, a colleague's unpacked archive) plants a
command that would leave a marker; computing the chip never leaves it, and the chip still shows the branch and
whether there is uncommitted work. Where git itself would run the planted program, the test shows it does
(so each trap is live)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from test_server_support import call, jp_server_config, llm  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster

IDENTITY = ["-c", "user.name=T", "-c", "user.email=t@example.org", "-c", "protocol.file.allow=always"]


def git(where: Path, *argv: str, env: dict[str, str] | None = None) -> str:
    """Git as a person would run it in ``where`` (with the repository's own config)."""
    return subprocess.run(["git", "-C", str(where), *IDENTITY, *argv], check=True, capture_output=True, text=True,
                          env=env).stdout


def live(top: Path, marker: Path) -> None:
    """Git itself, run as a person would, runs a planted program: the trap is real."""
    subprocess.run(["git", "-C", str(top), "status", "--porcelain"], capture_output=True, timeout=60)
    assert marker.exists(), "git itself runs the planted program"


def notebook(path: Path, source: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"cells": [{"cell_type": "code", "source": "%s", "metadata": {}, "outputs": [], '
                    '"execution_count": null}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}' % source)


def repository(top: Path, branch: str = "main") -> Path:
    """A committed repository at ``top`` with a notebook and a text file, every file routed through ``evil``."""
    notebook(top / "nb.ipynb", "x = 1")
    (top / "data.txt").write_text("one\n")
    (top / ".gitattributes").write_text("* filter=evil diff=evil merge=evil working-tree-encoding=UTF-8\n")
    git(top, "init", "-q", "-b", branch)
    git(top, "add", ".")
    git(top, "commit", "-q", "-m", "start")
    return top


def plant(top: Path, marker: Path, config: Path | None = None) -> None:
    """Every program a config can name, each leaving ``marker``, into ``config`` (the repository's by default)."""
    run = f"touch {marker}"
    settings = {
        "filter.evil.clean": f"{run}; cat", "filter.evil.smudge": f"{run}; cat", "filter.evil.process": run,
        "filter.evil.required": "false", "diff.evil.textconv": f"{run}; cat", "diff.external": run,
        "merge.evil.driver": run, "core.fsmonitor": f"{run}; false", "core.pager": run, "pager.status": run,
        "core.editor": run, "core.sshCommand": run, "credential.helper": f"!{run}", "gpg.program": run,
        "alias.st": f"!{run}", "core.askPass": run, "core.hooksPath": str(top / "hooks-elsewhere"),
        "status.showUntrackedFiles": "all", "core.untrackedCache": "true", "submodule.recurse": "true",
    }
    where = ["config", "--file", str(config)] if config else ["config"]
    for key, value in settings.items():
        git(top, *where, key, value)
    for hooks in (top / ".git" / "hooks", top / "hooks-elsewhere"):
        if hooks.parent.is_dir():
            hooks.mkdir(exist_ok=True)
            for name in ("post-index-change", "reference-transaction", "post-checkout", "fsmonitor-watchman"):
                (hooks / name).write_text(f"#!/bin/sh\n{run}\n")
                (hooks / name).chmod(0o755)


def touched(top: Path) -> None:
    """Every tracked file's stat changed, its content not (as an unpacked archive leaves them)."""
    for path in top.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(top).parts:
            path.write_bytes(path.read_bytes())


async def chip(jp_fetch, path: str) -> dict[str, Any]:
    place: dict[str, Any] = await call(jp_fetch, "GET", "notebooks", "context", params={"path": path})
    return place


async def test_a_repository_full_of_programs_runs_none_of_them(jp_fetch, jp_root_dir, tmp_path):
    marker = tmp_path / "ran"
    top = repository(jp_root_dir / "planted", "exp/<b>lr")
    plant(top, marker)
    touched(top)
    assert await chip(jp_fetch, "planted/nb.ipynb") == {"directory": "planted", "branch": "exp/<b>lr", "dirty": False}
    (top / "data.txt").write_text("two\n")
    assert (await chip(jp_fetch, "planted/nb.ipynb"))["dirty"] is True
    assert not marker.exists(), "the chip ran a program the repository's config named"
    live(top, marker)


async def test_staged_work_counts_and_a_committed_tree_is_clean(jp_fetch, jp_root_dir, tmp_path):
    marker = tmp_path / "ran"
    top = repository(jp_root_dir / "staged")
    (top / "data.txt").write_text("two\n")
    git(top, "add", "data.txt")
    plant(top, marker)
    assert (await chip(jp_fetch, "staged/nb.ipynb"))["dirty"] is True
    (top / "data.txt").write_text("one\n")  # the work tree as committed, the index still holding "two"
    assert (await chip(jp_fetch, "staged/nb.ipynb"))["dirty"] is True, "a staged change is uncommitted work"
    assert not marker.exists()


@pytest.mark.parametrize("how", ["include.path", "includeIf.gitdir", "includeIf.onbranch"])
async def test_a_config_pulled_in_from_elsewhere_runs_nothing(jp_fetch, jp_root_dir, tmp_path, how):
    marker = tmp_path / "ran"
    top = repository(jp_root_dir / f"included-{how}")
    elsewhere = tmp_path / "elsewhere.config"
    plant(top, marker, config=elsewhere)
    key = {"include.path": "include.path", "includeIf.gitdir": f"includeIf.gitdir:{top}/.path",
           "includeIf.onbranch": "includeIf.onbranch:main.path"}[how]
    git(top, "config", key, str(elsewhere))
    touched(top)
    place = await chip(jp_fetch, f"included-{how}/nb.ipynb")
    assert place["branch"] == "main" and place["dirty"] is False and not marker.exists()
    live(top, marker)


async def test_a_colleagues_archive_unpacked_runs_nothing(jp_fetch, jp_root_dir, tmp_path):
    marker = tmp_path / "ran"
    top = repository(tmp_path / "colleague" / "project")
    plant(top, marker)
    archive = tmp_path / "project.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(top, arcname="project")
    (jp_root_dir / "unpacked").mkdir()
    # unpacked as a person would, with tar (Python's extraction filters are not in Debian 12's Python 3.11.2)
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(jp_root_dir / "unpacked")], check=True, timeout=60)
    place = await chip(jp_fetch, "unpacked/project/nb.ipynb")
    assert place == {"directory": "unpacked/project", "branch": "main", "dirty": False}
    assert not marker.exists(), "opening a notebook of an unpacked archive ran a program from it"
    live(jp_root_dir / "unpacked" / "project", marker)


async def test_a_submodules_own_config_runs_nothing(jp_fetch, jp_root_dir, tmp_path):
    marker = tmp_path / "ran"
    inner = repository(tmp_path / "inner")
    top = repository(jp_root_dir / "outer")
    git(top, "submodule", "add", "-q", str(inner), "sub")
    git(top, "commit", "-q", "-m", "sub")
    plant(top / "sub", marker)
    touched(top / "sub")
    (top / "sub" / "data.txt").write_text("changed in the submodule\n")
    assert await chip(jp_fetch, "outer/nb.ipynb") == {"directory": "outer", "branch": "main", "dirty": False}
    assert await chip(jp_fetch, "outer/sub/nb.ipynb") == {"directory": "outer/sub", "branch": "main", "dirty": True}
    assert not marker.exists(), "the chip ran a program a submodule's config named"
    live(top, marker)


async def test_a_worktree_shows_its_branch_and_runs_nothing_its_repository_names(jp_fetch, jp_root_dir, tmp_path):
    marker = tmp_path / "ran"
    top = repository(jp_root_dir / "main-repo")
    git(top, "worktree", "add", "-q", "-b", "side", str(jp_root_dir / "side-tree"))
    plant(top, marker)
    touched(jp_root_dir / "side-tree")
    assert await chip(jp_fetch, "side-tree/nb.ipynb") == {"directory": "side-tree", "branch": "side", "dirty": False}
    (jp_root_dir / "side-tree" / "data.txt").write_text("two\n")
    assert (await chip(jp_fetch, "side-tree/nb.ipynb"))["dirty"] is True
    assert not marker.exists()


@pytest.mark.parametrize("pointer", ["outside", "missing", "symlink", "fifo", "garbage"])
async def test_a_git_file_leading_elsewhere_gives_no_facts(jp_fetch, jp_root_dir, tmp_path, pointer):
    marker = tmp_path / "ran"
    away = repository(tmp_path / f"away-{pointer}")
    plant(away, marker)
    top = jp_root_dir / f"pointer-{pointer}"
    notebook(top / "nb.ipynb", "x = 1")
    dot_git = top / ".git"
    if pointer == "outside":
        dot_git.write_text(f"gitdir: {away / '.git'}\n")
    elif pointer == "missing":
        dot_git.write_text("gitdir: ../no-such-dir\n")
    elif pointer == "symlink":
        dot_git.symlink_to(away / ".git")
    elif pointer == "fifo":
        os.mkfifo(dot_git)
    else:
        dot_git.write_bytes(b"gitdir: \x00\n/etc\n" + b"x" * 10000)
    place = await chip(jp_fetch, f"pointer-{pointer}/nb.ipynb")
    assert place == {"directory": f"pointer-{pointer}", "branch": None, "dirty": None}
    assert not marker.exists()


async def test_a_worktrees_commondir_leading_outside_gives_no_facts(jp_fetch, jp_root_dir, tmp_path):
    marker = tmp_path / "ran"
    away = repository(tmp_path / "away-common")
    plant(away, marker)
    top = repository(jp_root_dir / "common-outside")
    git(top, "worktree", "add", "-q", "-b", "side", str(jp_root_dir / "common-side"))
    (top / ".git" / "worktrees" / "common-side" / "commondir").write_text(f"{away / '.git'}\n")
    place = await chip(jp_fetch, "common-side/nb.ipynb")
    assert place == {"directory": "common-side", "branch": None, "dirty": None} and not marker.exists()


@pytest.mark.parametrize("head", ["ref: refs/heads/ok\x1b[31m", "ref: ../../etc/passwd",
                                  "ref: refs/../../../etc/passwd", "ref: refs/heads/x.lock", "nonsense", ""])
async def test_a_hostile_head_gives_no_branch(jp_fetch, jp_root_dir, tmp_path, head):
    top = repository(jp_root_dir / f"head-{abs(hash(head))}")
    (top / ".git" / "HEAD").write_text(head)
    place = await chip(jp_fetch, f"{top.name}/nb.ipynb")
    assert place["branch"] is None and place["dirty"] is None


async def test_a_detached_head_reads_as_git_names_it(jp_fetch, jp_root_dir):
    top = repository(jp_root_dir / "detached")
    git(top, "checkout", "-q", "--detach")
    assert await chip(jp_fetch, "detached/nb.ipynb") == {"directory": "detached", "branch": "HEAD", "dirty": False}


@pytest.mark.parametrize("piece", ["config", "HEAD", "index", "commondir"])
async def test_a_fifo_in_the_git_directory_never_blocks_the_chip(jp_fetch, jp_root_dir, piece):
    top = repository(jp_root_dir / f"fifo-{piece}")
    (top / ".git" / piece).unlink(missing_ok=True)
    os.mkfifo(top / ".git" / piece)
    expected = {"config": ("main", False), "HEAD": (None, None), "index": ("main", True), "commondir": (None, None)}
    branch, dirty = expected[piece]
    assert await chip(jp_fetch, f"fifo-{piece}/nb.ipynb") == {"directory": f"fifo-{piece}", "branch": branch,
                                                               "dirty": dirty}

