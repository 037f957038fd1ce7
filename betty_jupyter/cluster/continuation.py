"""Continuation chains: one piece of work run as segments of a job's time limit, each resuming from a checkpoint.

A chain is the person's script submitted as up to ``cap`` jobs at once, each after the one before
(``--dependency=afterany:<previous>``). Every segment gets ``#SBATCH --signal=B:USR1@N``: N seconds
before its limit Slurm signals the batch shell, and Betty's helper (:data:`HELPER`, written into the
script) forwards the signal to the program run through ``betty_run`` (or, in a script that does not
use it, to the programs its commands start), waits for it to checkpoint, and ends the segment with
:data:`CONTINUE_EXIT` so the next one resumes. ``afterany`` and not
``afternotok``: a segment always becomes runnable once the one before ended, so none is left pending
forever; a segment that starts after the work was done (or failed) exits at once without running it,
and the segment that finished the work cancels the ones after it.

With the person's consent (``ChainPlan.requeue``) segments also carry ``#SBATCH --requeue``: one Slurm preempts
goes back in the queue under the same job id and runs again from the top of the helper, which resumes the program from
its checkpoint; a segment stopped by ``SIGTERM`` never marks the chain failed. A chain may then have one segment.

Everything here is pure: the script Betty writes, the card's figures, and each segment's outcome
read from Slurm's states.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import UsageError

if TYPE_CHECKING:
    from .jobs import Job

REQUEUE_WAIT = timedelta(minutes=5)
"""How long a preempted segment that may be requeued is waited for before it counts as ended."""
CONTINUE_EXIT = 85
"""The exit code of a segment that checkpointed at its time limit and leaves the work to the next one."""
MAX_SEGMENTS = 50
SIGNAL_SECONDS = 120
"""Default: the program is told to checkpoint two minutes before the limit (``--signal=B:USR1@120``)."""
_SIGNAL = re.compile(r"^#SBATCH\s+--signal(=|\s)", re.MULTILINE)
_USES_HELPER = re.compile(r"^\s*betty_run\s+\S", re.MULTILINE)

HELPER = r'''# ---- Betty: continuation chain (docs/long-runs.md) ----
export BETTY_CHAIN_DIR="{chain_dir}"
export BETTY_CHAIN_DONE="$BETTY_CHAIN_DIR/done"
mkdir -p "$BETTY_CHAIN_DIR"
_betty_prev=$(sed -n "/^$SLURM_JOB_ID\$/{{x;p;q}};h" "$BETTY_CHAIN_DIR/jobs" 2>/dev/null) || true
if [ -n "$_betty_prev" ]; then
  _betty_seen=$(scontrol show job -o "$_betty_prev" 2>/dev/null | tr ' ' '\n') || true
  _betty_state=$(echo "$_betty_seen" | sed -n 's/^JobState=//p')
  _betty_code=$(echo "$_betty_seen" | sed -n 's/^ExitCode=//p')
  case "$_betty_state:$_betty_code" in
    COMPLETED:*) [ -e "$BETTY_CHAIN_DIR/failed" ] || echo "$_betty_prev" > "$BETTY_CHAIN_DIR/done" ;;
    FAILED:{continue_exit}:*) ;;
    FAILED:*|OUT_OF_MEMORY:*|CANCELLED:*) echo "$_betty_prev $_betty_state" > "$BETTY_CHAIN_DIR/failed" ;;
  esac
fi
if [ -e "$BETTY_CHAIN_DIR/done" ] || [ -e "$BETTY_CHAIN_DIR/failed" ]; then
  echo "betty: the work already ended; segment $SLURM_JOB_ID is not needed"
  exit 0
fi
if [ "${{SLURM_RESTART_COUNT:-0}}" -gt 0 ]; then
  echo "betty: segment $SLURM_JOB_ID of chain {slug} starts again after an interruption (restart $SLURM_RESTART_COUNT)"
else
  echo "betty: segment $SLURM_JOB_ID of chain {slug} starts"
fi
betty_run() {{
  local signalled=0 rc child=
  trap 'signalled=1; echo "betty: time limit near, telling the program to checkpoint"; _betty_forward' USR1
  trap 'echo "betty: stopped by Slurm (preempted or cancelled)"; exit 143' TERM
  "$@" &
  child=$!
  while :; do
    wait "$child" && rc=0 || rc=$?
    kill -0 "$child" 2>/dev/null || break
  done
  trap - USR1
  if [ -e "$BETTY_CHAIN_DONE" ] || {{ [ "$rc" -eq 0 ] && [ "$signalled" -eq 0 ]; }}; then
    echo "$SLURM_JOB_ID" > "$BETTY_CHAIN_DONE"
    _betty_cancel_rest
    return 0
  fi
  if [ "$signalled" -eq 1 ]; then
    echo "betty: checkpointed; the next segment resumes"
    exit {continue_exit}
  fi
  echo "$SLURM_JOB_ID $rc" > "$BETTY_CHAIN_DIR/failed"
  _betty_cancel_rest
  exit "$rc"
}}
_betty_forward() {{
  [ -n "$child" ] || return 0
  if [ "${{_betty_whole:-0}}" = 1 ]; then pkill -USR1 -P "$child" 2>/dev/null || true
  else kill -USR1 "$child" 2>/dev/null || true; fi
}}
betty_run_script() {{
  _betty_whole=1 betty_run bash -c "$1"
}}
_betty_cancel_rest() {{
  local later
  later=$(sed -n "/^$SLURM_JOB_ID\$/,\$p" "$BETTY_CHAIN_DIR/jobs" 2>/dev/null | tail -n +2) || true
  if [ -n "$later" ]; then scancel $later 2>/dev/null || true; fi
}}
# ---- end of Betty's continuation helper ----
'''


@dataclass(frozen=True)
class ChainPlan:
    """What the person asked for: at most ``cap`` segments, each signalled ``signal_seconds`` before its limit."""

    cap: int
    signal_seconds: int = SIGNAL_SECONDS
    requeue: bool = False
    """The person agreed that Slurm may put a preempted segment back in the queue (``--requeue``): it starts again
    under the same job id and resumes from the last checkpoint."""

    def check(self, time_minutes: int | None) -> None:
        """UsageError, in one line, when the plan cannot work with the script's time limit."""
        if not (1 if self.requeue else 2) <= self.cap <= MAX_SEGMENTS:
            raise UsageError(f"continuations: a chain has 2 to {MAX_SEGMENTS} segments, not {self.cap}")
        if time_minutes is None:
            raise UsageError("continuations: the script needs #SBATCH --time= (each segment's limit)")
        if not 10 <= self.signal_seconds < time_minutes * 60:
            raise UsageError(f"continuations: the checkpoint signal comes {self.signal_seconds} s before the limit; "
                             f"give 10 s to less than the limit ({time_minutes * 60} s)")

    def option(self) -> str:
        """The ``#SBATCH`` lines of the signal (and of ``--requeue`` when the person agreed to it)."""
        signal = f"#SBATCH --signal=B:USR1@{self.signal_seconds}"
        return f"{signal}\n#SBATCH --requeue" if self.requeue else signal


def chain_script(text: str, plan: ChainPlan, slug: str, chain_dir: str) -> str:
    """The script every segment runs: the person's, with the signal line after its ``#SBATCH`` lines and Betty's
    helper before its first command. A script that runs nothing through ``betty_run`` has its commands run as one
    (``betty_run_script``): the programs they start get the signal. UsageError when it already asks for a signal."""
    if _SIGNAL.search(text):
        raise UsageError("continuations: the script already has #SBATCH --signal; remove it, the chain sets it")
    lines = text.splitlines()
    header = 1 if lines and lines[0].startswith("#!") else 0
    while header < len(lines) and (not lines[header].strip() or lines[header].lstrip().startswith("#")):
        header += 1
    last_option = max((i for i in range(header) if lines[i].startswith("#SBATCH")), default=max(header - 1, 0))
    helper = HELPER.format(chain_dir=shell_path(chain_dir), slug=slug, continue_exit=CONTINUE_EXIT)
    commands = lines[header:]
    if not _USES_HELPER.search(text):  # the whole script is the program: its commands get the signal
        commands = [f"betty_run_script {shlex.quote(chr(10).join(commands))}"]
    body = lines[:last_option + 1] + plan.option().splitlines() + lines[last_option + 1:header] + \
        helper.rstrip("\n").splitlines() + commands
    return "\n".join(body) + "\n"


def shell_path(path: str) -> str:
    """A path for a double-quoted shell word: ``~/x`` → ``$HOME/x``; refuses what would need quoting."""
    if re.search(r'["`$\\\n]', path.removeprefix("~")):
        raise UsageError(f"the work folder {path!r} cannot be written into a script; choose a plain path")
    return "$HOME" + path[1:] if path == "~" or path.startswith("~/") else path


def dependency(previous: str) -> str:
    """The sbatch option that queues a segment behind the one before."""
    return f"--dependency=afterany:{previous}"


def card(plan: ChainPlan, time_minutes: int, gpus: int) -> dict[str, Any]:
    """The whole chain as a card shows it: segments, signal, cap, and the most wall time (and GPU-hours) it takes."""
    hours = plan.cap * time_minutes / 60
    shown: dict[str, Any] = {
        "segments": f"up to {plan.cap} jobs of {time_minutes} min each, each queued after the one before "
                    "(--dependency=afterany), all submitted now; one approval covers them all",
        "signal": f"--signal=B:USR1@{plan.signal_seconds}: {plan.signal_seconds} s before each limit the program "
                  "gets SIGUSR1 to checkpoint; the next segment resumes from it",
        "cap": f"{plan.cap} segments; work not done by then stops there ('cap reached')",
        "at most": f"{_hours(hours)} of wall time" + (f", {gpus * hours:.1f} GPU-hours" if gpus else ""),
        "ends early": "once the work is done (or fails) the segments after it are cancelled, and any that still "
                      "starts exits at once without running the work",
    }
    if plan.requeue:
        shown["requeue"] = ("--requeue: if Slurm preempts a segment for another job, it puts it back in the queue under "
                            "the same job id; it starts again and resumes from the last checkpoint (work since then "
                            "runs again), and the record lists each interruption")
    if plan.cap == 1:
        shown["segments"] = (f"one job of {time_minutes} min, told to checkpoint before its limit; one approval "
                             "covers its restarts")
    return shown


def _hours(hours: float) -> str:
    return f"{hours:.1f} h" if hours >= 1 else f"{round(hours * 60)} min"


def segment_outcomes(job_ids: list[str], jobs: dict[str, "Job"], before: Iterable[dict[str, Any]] = (),
                     requeue: bool = False, now: datetime | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Each segment's record (``job_id``, ``state``, ``ended``, ``why``) and how the chain ended (None: not yet).

    ``why``: ``waiting``, ``running``, ``time limit → continued``, ``done``, ``failed``, ``cancelled``,
    ``cap reached``, ``not needed`` (after the work ended). ``before``: the segments as last recorded; a segment
    that ran and now waits again, or started again, was interrupted (preempted and requeued): its ``interruptions``
    list when each interrupted run had started (:func:`interruptions`). With ``requeue`` a segment Slurm preempted
    waits to run again (accounting says ``PREEMPTED`` until the requeued job is recorded), unless it ended more than
    :data:`REQUEUE_WAIT` ago (the site cancelled it instead): then it counts as continued.
    """
    segments: list[dict[str, Any]] = []
    ended: str | None = None
    earlier = {str(record.get("job_id")): record for record in before}
    for position, ident in enumerate(job_ids):
        job = jobs.get(ident)
        state = job.state.value if job is not None else "UNKNOWN"
        record: dict[str, Any] = {"job_id": ident, "state": state,
                                  "ended": job.ended.strftime("%Y-%m-%d %H:%M:%S") if job and job.ended else None}
        record.update(interruptions(earlier.get(ident), job))
        if ended is not None:
            record["why"] = "not needed"
        elif job is None or not job.state.finished or (requeue and _requeued(job, now or datetime.now())):
            record["why"] = "running" if state == "RUNNING" else "waiting"
        elif _continued(job):
            last = position == len(job_ids) - 1
            record["why"] = "cap reached" if last else (
                "preempted → continued" if state == "PREEMPTED" else "time limit → continued")
            ended = "cap reached" if last else None
        elif state == "COMPLETED":
            record["why"] = ended = "done"
        elif state == "CANCELLED":
            record["why"] = ended = "cancelled"
        else:
            record["why"] = ended = "failed"
        segments.append(record)
    return segments, ended


def interruptions(before: dict[str, Any] | None, job: "Job | None") -> dict[str, Any]:
    """A segment's ``started`` now and its ``interruptions`` (when each interrupted run had started): a run recorded
    before whose start is no longer the job's (it waits again, or started again) was interrupted."""
    started = job.started.strftime("%Y-%m-%d %H:%M:%S") if job is not None and job.started else None
    runs = list((before or {}).get("interruptions") or [])
    previous = (before or {}).get("started")
    if previous and previous != started and previous not in runs:
        runs.append(previous)
    found: dict[str, Any] = {"started": started}
    if runs:
        found["interruptions"] = runs
    return found


def _requeued(job: "Job", now: datetime) -> bool:
    """A preempted job of a chain that asked for ``--requeue``, recently enough that it is being put back."""
    return job.state.value in ("PREEMPTED", "REQUEUED") and (job.ended is None or now - job.ended < REQUEUE_WAIT)


def _continued(job: "Job") -> bool:
    state = job.state.value
    code = (job.exit_code or "").split(":", 1)[0]
    return state in ("TIMEOUT", "PREEMPTED") or (state == "FAILED" and code == str(CONTINUE_EXIT))


def deciding_job(job_ids: list[str], jobs: dict[str, "Job"], segments: Iterable[dict[str, Any]]) -> str:
    """The segment whose job speaks for the chain now: the one running or waiting, else the one that ended it."""
    listed = list(segments)
    for record in listed:
        if record["why"] in ("running", "waiting"):
            return str(record["job_id"])
    for record in listed:
        if record["why"] in ("done", "failed", "cancelled", "cap reached"):
            return str(record["job_id"])
    return job_ids[-1]
