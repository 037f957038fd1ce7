"""Page names: which are refused, and how a name becomes a path that stays inside the wiki.

A page name is a path relative to the wiki's root, written with ``/`` between folders and
ending in ``.md`` (``experiments/2026-11-22-lora.md``). Names are checked, never repaired:
a name that is not ``.md`` is refused rather than given the suffix, so the name a caller
passes is always the file that is read or written. Each refusal is a :class:`WikiError`
whose message names the rule.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from ..errors import WikiError

MAX_NAME_CHARS = 255
# Temporary files add ".<name>.<8 hex>.tmp" to a part; 200 bytes keeps them under NAME_MAX (255).
MAX_PART_BYTES = 200
# Characters Windows refuses in file names; a wiki may live on a laptop's disk or a share.
_WINDOWS_RESERVED = '"*<>?|'
_WINDOWS_DEVICES = {"CON", "PRN", "AUX", "NUL"} | {f"{kind}{n}" for kind in ("COM", "LPT") for n in range(1, 10)}
# Control and format characters, surrogates, private-use and unassigned code points, line and
# paragraph separators: none of them belongs in a file name, several hide what a name says.
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def check_page_name(name: object) -> str:
    """Return ``name`` unchanged when it is an acceptable page name; raise WikiError naming the rule."""
    name = check_folder_name(name, what="page name")
    if not name.endswith(".md"):
        hint = f"; did you mean {name + '.md'!r}?" if len(name) <= 60 else ""
        raise _refused(name, "page name", f"does not end in '.md' (pages are markdown files){hint}")
    return name


def check_folder_name(name: object, what: str = "folder name") -> str:
    """Return ``name`` unchanged when it is an acceptable relative path; raise WikiError naming the rule."""
    if not isinstance(name, str):
        raise WikiError(f"refused {what}: it must be text, not {type(name).__name__}")
    if not name:
        raise WikiError(f"refused {what}: it is empty")
    problem = _character_problem(name) or _shape_problem(name)
    if problem:
        raise _refused(name, what, problem)
    return name


def _character_problem(name: str) -> str | None:
    if len(name) > MAX_NAME_CHARS:
        return f"is longer than {MAX_NAME_CHARS} characters"
    if "\0" in name:
        return "contains a NUL byte"
    if not (name.isascii() and name.isprintable()):  # printable ASCII is in no refused category and NFKC keeps it
        for char in name:
            if unicodedata.category(char) in _REFUSED_CATEGORIES:
                return f"contains the control or invisible character U+{ord(char):04X}"
        normal = unicodedata.normalize("NFKC", name)
        if normal != name:
            return f"changes under Unicode NFKC normalisation (to {normal!r}); write the plain characters"
    if "\\" in name:
        return "contains a backslash; use '/' between folders"
    if ":" in name:
        return "contains ':' (Windows drive letters and streams are not allowed)"
    if "%" in name:
        return "contains '%' (names are not URL-decoded; write the name itself)"
    reserved = next((char for char in name if char in _WINDOWS_RESERVED), None)
    if reserved:
        return f"contains {reserved!r}, which Windows does not allow in file names"
    return None


def _shape_problem(name: str) -> str | None:
    if name.startswith("/"):
        return "is an absolute path; give a path inside the wiki, e.g. 'experiments/run.md'"
    for part in name.split("/"):
        problem = _part_problem(part)
        if problem:
            return problem
    return None


def _part_problem(part: str) -> str | None:
    if not part:
        return "has an empty part ('//' or a trailing '/')"
    if part in (".", ".."):
        return f"contains {part!r}; a page must stay inside the wiki"
    if part.startswith("."):
        return f"has a part starting with '.' ({part!r}); hidden files are Betty's locks and temporary files"
    if part != part.strip() or part.endswith("."):
        return f"has a part starting or ending with a space or ending with '.' ({part!r})"
    if len(part.encode("utf-8")) > MAX_PART_BYTES:
        return f"has a part longer than {MAX_PART_BYTES} bytes"
    if part.split(".")[0].upper() in _WINDOWS_DEVICES:
        return f"has a part named like a Windows device ({part!r})"
    return None


def _refused(name: str, what: str, problem: str) -> WikiError:
    shown = repr(name)
    if len(shown) > 60:
        shown = shown[:50] + "…" + shown[-8:]
    return WikiError(f"refused {what} {shown}: it {problem}")


def resolve_inside(root: Path, name: str, what: str = "page name") -> tuple[Path, str]:
    """The real path of ``name`` under ``root`` (a real path) and its real name relative to the root.

    Symbolic links are followed; one that leads outside the root is refused, and so is one
    that leads to a name the rules refuse (a lock file, ``.``), so a link cannot be used to
    reach what its target's own name could not.
    """
    real = Path(os.path.realpath(root.joinpath(*name.split("/"))))
    if real == root or not real.is_relative_to(root):
        raise _refused(name, what, "leads outside the wiki through a symbolic link")
    if real.is_symlink():
        raise _refused(name, what, "is a loop of symbolic links")
    real_name = real.relative_to(root).as_posix()
    if real_name != name:
        check = check_page_name if what == "page name" else check_folder_name
        try:
            check(real_name)
        except WikiError as error:
            raise _refused(name, what, f"is a symbolic link to {real_name!r}, which is refused") from error
    return real, real_name
