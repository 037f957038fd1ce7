"""Every read Betty makes on the cluster, in one remote step that checks the file it really reads.

A path checked by one command and read by another can be swapped for a symlink in between.
So nothing here resolves a path and then reads it: one fixed script (:data:`READ_SCRIPT`),
run as ``bash -c READ_SCRIPT betty-read ARGS…`` (no start-up files read), opens each path, asks the kernel where the
*opened* file is, checks that place, and hands the reader the open file itself
(``/dev/fd/N``). The inode checked is the inode read; a path flipped to a symlink after the
check changes nothing.

The same script caps what comes back at :data:`READ_LIMIT` bytes on the cluster's side, for
file readers and Slurm listings alike, so a 60 MB file never crosses the link whole; Betty
adds a note saying where it was cut.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import PolicyError, TransportError
from ..secret_names import PRIVATE_KEY_HEADER, blank_private_keys
from .allowlist import SECRET_PATHS, AllowedCommand
from ..transport.interface import CommandResult, Transport

READ_LIMIT = 1 << 20
"""The most bytes one command's output may bring back (1 MiB); the rest is cut on the cluster."""

FIRST_FD = 10
"""The file descriptor the first path is opened on; the next paths follow."""

KEY_SCAN = 64 << 10
"""A file with a private key's header in its first this many bytes is refused, whatever its name (64 KiB)."""

# bash with no start-up files: Debian's bash reads ~/.bashrc when sshd runs it, and $BASH_ENV
# (Lmod sets it on many clusters) is read by every non-interactive bash; either can be slow
# (a conda or module init) or print into the output.
_BASH = ("env", "BASH_ENV=", "bash", "--norc", "--noprofile", "-c")
_OWN_EXIT = 125  # the script's own answer: a path refused or unreadable; the reader never ran
_MARK = "betty-read:"
_SAFE_PATTERN = re.compile(r"^[A-Za-z0-9_.*/-]+$")
# Readers that would show or list the link /dev/fd/N itself rather than the file it stands for.
_FOLLOW_ARGUMENTS = {"ls": "-H", "du": "-D"}


def _case_patterns(patterns: Sequence[str]) -> str:
    """The secret-path globs as one ``case`` pattern list; each is checked to hold no shell syntax."""
    for pattern in patterns:
        if not _SAFE_PATTERN.match(pattern):
            raise ValueError(f"secret path pattern {pattern!r} would not read the same in a shell case")
    return "|".join(patterns)


READ_SCRIPT = r"""
limit=$1 keep=$2 nroots=$3
shift 3
refuse() { printf 'betty-read:%s:%s:%s\n' "$1" "$2" "${3-}" >&2; exit 125; }
check() {
  local LC_ALL=C index=$1 path=$2 fd=$3 real root inside=
  if [[ -p $path || ! ( -f $path || -d $path ) ]]; then
    [[ -e $path ]] && refuse special "$index" || refuse missing "$index"
  fi
  [[ -r $path ]] || refuse denied "$index"
  eval "exec $fd"'<"$path"' || refuse denied "$index"
  real=$(readlink -- "/proc/self/fd/$fd" && printf x) || refuse unresolved "$index"
  real=${real%$'\nx'}
  real=${real%' (deleted)'}
  [[ -f /dev/fd/$fd || -d /dev/fd/$fd ]] || refuse special "$index" "$real"
  [[ $real == /* ]] || refuse unresolved "$index" "$real"
  for root in "${roots[@]}"; do
    [[ $real == "$root" || $real == "$root"/* ]] && inside=1
  done
  [[ -n $inside ]] || refuse outside "$index" "$real"
  shopt -s nocasematch  # for the secret names only: the roots above compare exactly
  case $real in
    @SECRETS@) refuse secret "$index" "$real" ;;
  esac
  shopt -u nocasematch
  if [[ -f /dev/fd/$fd ]] && head -c @KEY_SCAN@ "/dev/fd/$fd" | LC_ALL=C grep -qaiE -e '@KEY_HEADER@'; then
    refuse key "$index" "$real"
  fi
}
roots=()
for ((i = 0; i < nroots; i++)); do
  real=$(realpath -e -- "$1" 2>/dev/null && printf x) && real=${real%$'\nx'} && roots+=("${real%/}")
  shift
done
npaths=$1
shift
for ((i = 0; i < npaths; i++)); do
  check "$i" "$1" "$((10 + i))"
  shift
done
if [[ $keep == tail ]]; then
  size=$("$@" 2>/dev/null | wc -c)
  "$@" | tail -c "$limit"
  status=("${PIPESTATUS[@]}")
  more=$(( size > limit ))
else
  "$@" | { head -c "$limit"; (( $(head -c 1 | wc -c) == 0 )); }
  status=("${PIPESTATUS[@]}")
  more=$(( status[1] != 0 ))
  (( more && status[0] == 141 )) && status[0]=0
fi
(( more )) && printf 'betty-read:truncated\n' >&2
exit "${status[0]}"
""".replace("@SECRETS@", _case_patterns(SECRET_PATHS)).replace("@KEY_SCAN@", str(KEY_SCAN)).replace(
    "@KEY_HEADER@", PRIVATE_KEY_HEADER)
"""The one remote step behind every read (positional arguments only; nothing is interpolated).

Arguments: ``LIMIT KEEP NROOTS ROOT… NPATHS PATH… PROGRAM ARG…``. For each root, its real
path (``realpath -e``; a missing root is dropped). For each path *i*, in order: refuse a
FIFO, device or missing file before opening it (opening a FIFO would wait); open it on fd
``10+i``; read where the kernel says the opened file is (``/proc/self/fd/N``); refuse it
unless it is a regular file or directory, under a real root, and not a secret (a file
removed since it was opened is checked at the place it was removed from)
(:data:`~betty_jupyter.cluster.allowlist.SECRET_PATHS`, rendered into the ``case`` above), and
refuse a regular file whose first :data:`KEY_SCAN` bytes hold a private key's header, in any
case (:data:`~betty_jupyter.secret_names.PRIVATE_KEY_HEADER`): a key is known by its content,
not its name.
Only then does the reader run, on ``/dev/fd/N`` (PROGRAM's argv names the open files).

Its output is cut at LIMIT bytes: the first ones (``KEEP=head``, read by coreutils ``head -c``,
which never reads past what it prints, then one more byte to know whether there was more),
or the last ones (``KEEP=tail``: the reader runs twice on the same open files, once to count).
A cut is reported as a last stderr line ``betty-read:truncated``; a reader killed by the cut
(SIGPIPE, 141) counts as a success. Refusals are ``betty-read:WHY:INDEX:REAL`` on stderr with
exit status 125, before the reader ever starts.
"""


@dataclass(frozen=True)
class _Refusal:
    why: str
    index: int
    real: str


async def run_checked(transport: Transport, allowed: AllowedCommand, roots: Sequence[str], *,
                      keep: str = "head", limit: int = READ_LIMIT, timeout: float = 60.0) -> CommandResult:
    """Run ``allowed`` on the cluster in one step: its paths opened and checked first, its output capped.

    ``roots`` are the directories its files must really lie under (resolved on the cluster).
    ``keep`` says which end of a long output survives (``tail`` for logs). A path that leads
    outside the roots or to a secret raises :class:`PolicyError`; a missing or unreadable file
    comes back as a failed result naming it, as the reader itself would. The result's argv is
    ``allowed.argv``: what the person asked for, not the script.
    """
    argv = _reader_argv(allowed)
    checked_roots = list(roots) if allowed.paths else []
    words = [*_BASH, READ_SCRIPT, "betty-read", str(limit), keep, str(len(checked_roots)), *checked_roots,
             str(len(allowed.paths)), *allowed.paths, *argv]
    result = await transport.run(words, timeout)
    if result.exit_code == 127 and "bash" in result.stderr:
        raise TransportError("the cluster has no bash, which Betty needs to read files safely; ask its admins")
    refusal = _refusal(result)
    if refusal is not None:
        return _refused(allowed, roots, refusal, result)
    return _finished(allowed, result, keep, limit)


def _reader_argv(allowed: AllowedCommand) -> list[str]:
    """``allowed.argv`` with each path operand replaced by the open file that stands for it."""
    argv = list(allowed.argv)
    for position in allowed.operands:
        argv[position] = f"/dev/fd/{FIRST_FD + allowed.paths.index(argv[position])}"
    follow = _FOLLOW_ARGUMENTS.get(argv[0]) if allowed.operands else None
    return [argv[0], follow, *argv[1:]] if follow else argv


def _refusal(result: CommandResult) -> _Refusal | None:
    if result.exit_code != _OWN_EXIT:
        return None
    line = next((line for line in reversed(result.stderr.splitlines()) if line.startswith(_MARK)), None)
    if line is None:
        return None
    why, index, real = (line[len(_MARK):].split(":", 2) + ["", ""])[:3]
    return _Refusal(why, int(index), real) if index.isdigit() else None


def _refused(allowed: AllowedCommand, roots: Sequence[str], refusal: _Refusal, result: CommandResult) -> CommandResult:
    path = allowed.paths[refusal.index]
    program = allowed.argv[0]
    if refusal.why in ("missing", "denied"):
        reason = "No such file or directory" if refusal.why == "missing" else "Permission denied"
        return CommandResult(allowed.argv, "", f"{program}: {path}: {reason}\n", 1, result.duration_ms)
    where = f"{path} leads to {refusal.real}" if refusal.real and refusal.real != path else path
    messages = {
        "outside": f"{where}, which is outside the readable roots ({', '.join(roots) or 'none configured'})",
        "secret": f"{where}, which may hold secrets; Betty never reads such files",
        "key": f"{where}, which holds a private key; Betty never reads such files",
        "special": f"{where}, which is not a regular file or directory (a pipe, device or socket)",
        "unresolved": f"Betty could not tell where {path} leads on the cluster, so it reads nothing there",
    }
    raise PolicyError(f"refused: {messages.get(refusal.why, messages['unresolved'])}")


def _finished(allowed: AllowedCommand, result: CommandResult, keep: str, limit: int) -> CommandResult:
    stderr, truncated = result.stderr, result.stderr.endswith(f"{_MARK}truncated\n")
    if truncated:
        stderr = stderr[: -len(f"{_MARK}truncated\n")]
    # A key further into a file than the scan (a long log that prints one) never leaves this step whole.
    stdout = blank_private_keys(_relabel(allowed, result.stdout))
    stderr = blank_private_keys(_relabel(allowed, stderr, everywhere=True))
    if truncated:
        stdout = _with_note(stdout, keep, limit)
    return CommandResult(allowed.argv, stdout, stderr, result.exit_code, result.duration_ms)


def _with_note(text: str, keep: str, limit: int) -> str:
    """``text`` cut at the cluster with Betty's note where it was cut (a partial line dropped)."""
    if keep == "tail":
        rest = text.partition("\n")[2] if "\n" in text else text
        return f"[… truncated at {limit} bytes: only the end is shown]\n{rest}"
    kept = text.rpartition("\n")[0] + "\n" if "\n" in text else text
    return f"{kept}[… truncated at {limit} bytes: the output is longer; read a part with head, tail or a narrower command]\n"


def _relabel(allowed: AllowedCommand, text: str, everywhere: bool = False) -> str:
    """Put the asked-for paths back where a reader names the open file (``==> /dev/fd/10 <==``).

    File contents are never touched: only ``head``/``tail`` headers, and the names ``ls``,
    ``du``, ``wc`` and ``df`` print (their output holds no file content), or stderr.
    """
    if not allowed.paths or "/dev/fd/" not in text:
        return text
    labels = {f"/dev/fd/{FIRST_FD + index}": path for index, path in enumerate(allowed.paths)}
    if allowed.argv[0] in ("head", "tail") and not everywhere:
        return re.sub(r"^==> (/dev/fd/\d+) <==$", lambda m: f"==> {labels.get(m[1], m[1])} <==", text, flags=re.M)
    if allowed.argv[0] == "cat" and not everywhere:
        return text
    return re.sub(r"/dev/fd/\d+(?=$|[/:\s'])", lambda m: labels.get(m[0], m[0]), text, flags=re.M)
