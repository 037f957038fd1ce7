"""Betty's agent against a real model: a fixed set of researcher tasks on the dev cluster, each run scored.

Run by hand (not a test), with the dev cluster up (``betty dev-cluster up``) and any OpenAI-compatible server::

    .venv/bin/python bench/agent_eval.py --base-url http://127.0.0.1:8089/v1 --model qwen2.5-coder-1.5b \\
        [--runs 3] [--tasks partitions,my_jobs] [--api-key-env NAME] [--out bench/results/agent-eval-NAME.md]

Each run is a fresh project and a fresh session, as a new ``betty ask`` is, on the dev cluster over SSH in confirm
mode: the person approves every card, and what each card showed is kept. Before a task that needs one, the cluster
gets what the question is about (a job waiting for its start time; a job that failed just now). A run succeeds when
every check of its task holds: a tool that answers the question ran and succeeded with valid arguments, the card
(for a submission) showed a runnable script, the job ran, and the final answer states what the tools found.

Between Betty and the server sits a small recording proxy: for every request it keeps the prompt's size the server
reports (``usage.prompt_tokens``) and, from llama.cpp, how many of those it had to read (``timings.prompt_n``; the
rest came from its prompt cache), so the table says whether the prompt cache held from the first request on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from betty_jupyter.agent.approvals import ApprovalBroker  # noqa: E402
from betty_jupyter.agent.session import SessionSpec, open_session  # noqa: E402
from betty_jupyter.config import BettyConfig  # noqa: E402
from betty_jupyter.experiments.workspace import Workspace  # noqa: E402

WAITING = "#!/bin/bash\n#SBATCH --job-name=bench-waiting\n#SBATCH --partition=cpu\n#SBATCH --time=00:05:00\n" \
          "#SBATCH --begin=now+2hours\nsleep 1\n"
FAILING = "#!/bin/bash\n#SBATCH --job-name=bench-prep\n#SBATCH --partition=cpu\n#SBATCH --time=00:05:00\n" \
          "echo loading data/train.csv\necho 'FileNotFoundError: data/train.csv' >&2\nexit 3\n"


# ----- the cluster's side ------------------------------------------------------------------------------

def ssh(cluster: dict[str, str], command: str) -> str:
    """``command``'s stdout on the dev cluster (over its own SSH config)."""
    done = subprocess.run(["ssh", "-F", cluster["BETTY_DEV_SSH_CONFIG"], cluster["BETTY_DEV_SSH_HOST"], command],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{command!r} on the dev cluster: {done.stderr.strip()}")
    return done.stdout


def submit(cluster: dict[str, str], script: str) -> str:
    """The id of ``script`` submitted by hand on the dev cluster."""
    out = ssh(cluster, f"sbatch --parsable <<'EOF'\n{script}EOF")
    return out.strip().split(";")[0]


def state_of(cluster: dict[str, str], job: str) -> str:
    out = ssh(cluster, f"sacct -X -n -P -o State -j {job}").strip().splitlines()
    return out[0].split()[0] if out else ""


def wait_for_end(cluster: dict[str, str], job: str, seconds: float = 180) -> str:
    """The job's end state, looked at every second until it ends or ``seconds`` pass ("" then)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = state_of(cluster, job)
        if state and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return state
        time.sleep(1)
    return ""


# ----- the recording proxy ------------------------------------------------------------------------------

@dataclass
class Seen:
    """One request as the server answered it."""

    prompt_tokens: int | None = None
    read_tokens: int | None = None
    """Prompt tokens the server had to read (llama.cpp's ``timings.prompt_n``); the rest came from its cache."""


class Proxy:
    """Forwards every request to ``upstream`` as it comes and keeps what the server said of each prompt."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.seen: list[Seen] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes | None) -> None:
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                request = urllib.request.Request(proxy.upstream + self.path.removeprefix("/v1"), data=body,
                                                 headers=headers, method="POST" if body is not None else "GET")
                seen = Seen()
                if body is not None:
                    proxy.seen.append(seen)  # in the order the requests came, filled in as the answer streams
                try:
                    answer = urllib.request.urlopen(request, timeout=1800)
                except urllib.error.HTTPError as error:
                    answer = error
                except OSError as error:  # the server is gone: Betty sees a 502, as from any proxy
                    data = json.dumps({"error": {"message": f"upstream: {error}", "type": "server_error"}}).encode()
                    self.send_response(502)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.end_headers()
                for line in answer:
                    _note(seen, line)
                    self.wfile.write(line)
                    self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()


def _note(seen: Seen, line: bytes) -> None:
    text = line.decode("utf-8", "replace").strip().removeprefix("data:").strip()
    if not text.startswith("{"):
        return
    try:
        chunk = json.loads(text)
    except ValueError:
        return
    usage, timings = chunk.get("usage") or {}, chunk.get("timings") or {}
    if usage.get("prompt_tokens") is not None:
        seen.prompt_tokens = usage["prompt_tokens"]
    if timings.get("prompt_n") is not None:
        seen.read_tokens = timings["prompt_n"]


# ----- one run of one task ------------------------------------------------------------------------------

@dataclass
class Run:
    """What one session did with one question."""

    reason: str
    answer: str
    calls: list[tuple[str, dict[str, Any], bool, str]]
    """Each call: tool, arguments, whether it succeeded, its summary."""
    cards: list[Any]
    seconds: float
    turns: int
    facts: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    """Every assistant message and every note of the loop (replanning), in order."""

    def ran(self, *tools: str) -> list[tuple[str, dict[str, Any], bool, str]]:
        return [call for call in self.calls if call[0] in tools and call[2]]


@dataclass(frozen=True)
class Task:
    """A question a researcher asks, what the cluster holds first, and the checks its run must pass."""

    name: str
    question: str
    checks: Callable[[Run], list[tuple[str, bool]]]
    setup: Callable[[dict[str, str]], dict[str, str]] = lambda cluster: {}


def mentions(text: str, *words: str) -> bool:
    """Whether the answer's prose (its code blocks and ``#SBATCH`` lines left out) names every one of ``words``."""
    prose = re.sub(r"^#SBATCH.*$", "", re.sub(r"```.*?(```|$)", "", text, flags=re.DOTALL), flags=re.MULTILINE)
    return all(re.search(rf"(?<![\w.=-]){re.escape(word)}(?![\w:-])", prose, re.IGNORECASE) for word in words)


def _queue_checks(run: Run) -> list[tuple[str, bool]]:
    reads = run.ran("cluster_queue", "cluster_overview", "cluster_run", "cluster_history", "cluster_status")
    return [("read the queue", bool(reads)),
            ("not another user's", all(args.get("user") in (None, run.facts["login"]) for _, args, _, _ in reads)),
            ("answer names the waiting job", mentions(run.answer, run.facts["waiting"]))]


def _estimate_peak(run: Run) -> str | None:
    for tool, _, ok, summary in run.calls:
        found = re.search(r"(\d+\.\d) GiB per GPU", summary) if tool == "gpu_estimate" and ok else None
        if found:
            return found.group(1)
    return None


def _answer_has_peak(run: Run) -> bool:
    peak = _estimate_peak(run)
    if peak is None:
        return False
    figures = [float(number) for number in re.findall(r"\d+(?:\.\d+)?", run.answer)]
    return any(abs(figure - float(peak)) <= 0.06 * float(peak) for figure in figures)


def _submitted(run: Run) -> str | None:
    for tool, _, ok, summary in run.calls:
        found = re.search(r"submitted job (\d+)", summary) if tool == "cluster_submit" and ok else None
        if found:
            return found.group(1)
    return None


def _submit_checks(run: Run) -> list[tuple[str, bool]]:
    job = _submitted(run)
    card = next((card for card in run.cards if card.tool == "cluster_submit"), None)
    return [("card shows a runnable script", card is not None and card.preview.text.startswith("#!")),
            ("job submitted", job is not None),
            ("job ran", job is not None and run.facts.get(f"end:{job}") == "COMPLETED"),
            ("answer names the job", job is not None and mentions(run.answer, job))]


def _estimate_submit_checks(run: Run) -> list[tuple[str, bool]]:
    card = next((card for card in run.cards if card.tool == "cluster_submit"), None)
    shown = card.preview if card is not None else None
    return [("sized with gpu_estimate", _estimate_peak(run) is not None),
            ("card shows a runnable GPU script", shown is not None and shown.text.startswith("#!")
             and "gpu" in shown.text),
            ("card shows the estimate", shown is not None and "gpu_memory" in shown.details),
            ("job submitted", _submitted(run) is not None)]


TASKS = [
    Task("partitions", "What partitions are there?",
         lambda run: [("read the partitions", bool(run.ran("cluster_partitions", "cluster_overview", "cluster_run"))),
                      ("answer names cpu and gpu", mentions(run.answer, "cpu", "gpu"))]),
    Task("my_jobs", "Show my jobs.", _queue_checks,
         setup=lambda cluster: {"waiting": submit(cluster, WAITING)}),
    Task("submit", "Submit this to the cpu partition for 5 minutes: python3 -c \"print('hello from betty')\"",
         _submit_checks),
    Task("gpu_memory", "How much GPU memory do I need for LoRA fine-tuning of Llama 3 8B?",
         lambda run: [("ran gpu_estimate", _estimate_peak(run) is not None),
                      ("answer gives the estimate's peak", _answer_has_peak(run))]),
    Task("why_failed", "Why did my last job fail?",
         lambda run: [("read the job", bool(run.ran("job_logs", "cluster_history", "cluster_status", "cluster_why",
                                                    "cluster_run"))),
                      ("answer gives the cause", mentions(run.answer, "train.csv")
                       or mentions(run.answer, "FileNotFoundError") or bool(re.search(r"exit(?: code)? 3\b",
                                                                                       run.answer, re.I)))],
         setup=lambda cluster: {"failed": _failed_job(cluster)}),
    Task("submit_estimate", "Submit a LoRA fine-tune of Llama 3 8B on one GPU of the gpu partition for 10 minutes "
         "running python3 train.py; size its GPU memory first.", _estimate_submit_checks),
    Task("pending", "Why is my job pending?",
         lambda run: [("asked why", bool(run.ran("cluster_why", "cluster_queue", "cluster_status", "cluster_run"))),
                      ("answer gives the reason", mentions(run.answer, "BeginTime")
                       or bool(re.search(r"begin|start time|scheduled to start", run.answer, re.I)))],
         setup=lambda cluster: {"waiting": submit(cluster, WAITING)}),
]
CORE = ["partitions", "my_jobs", "submit", "gpu_memory", "why_failed"]
"""The five everyday requests the acceptance counts (4 of 5 succeed in 2 of 3 runs)."""


def _failed_job(cluster: dict[str, str]) -> str:
    job = submit(cluster, FAILING)
    wait_for_end(cluster, job)
    return job


async def one_run(task: Task, cluster: dict[str, str], llm: dict[str, Any], root: Path, login: str) -> Run:
    """A fresh project and session answering ``task.question``; every card approved."""
    facts = {"login": login, **task.setup(cluster)}
    subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "init", str(root)], check=True, capture_output=True)
    profile = json.loads(Path(cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]["clusters"][0]
    profile = {**profile, "work_dir": str(root / "work"), "readable_roots": [str(root)]}
    config = BettyConfig(clusters=[profile], llm=llm)
    broker = ApprovalBroker(timeout=600)
    cards: list[Any] = []
    calls: dict[str, list[Any]] = {}
    answer: list[str] = []
    errors: list[str] = []
    said: list[str] = []
    turns = [0]

    def person(event: Any) -> None:
        if event.type == "approval_request":
            cards.append(event.payload)
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, "approved", "bench")
        elif event.type == "tool_call":
            calls[event.payload.call_id] = [event.payload.tool, event.payload.args, False, ""]
        elif event.type == "tool_result":  # a call refused before it was decided has a result only
            calls.setdefault(event.payload.call_id, [event.payload.tool, {}, False, ""])[2:] = [
                event.payload.ok, event.payload.summary]
        elif event.type == "message" and event.payload.role == "assistant":
            answer.append(event.payload.text)
            said.append(event.payload.text)
        elif event.type == "replanning":
            said.append(f"[{event.payload.reason}]")
        elif event.type == "budget":
            turns[0] = event.payload.iterations
        elif event.type == "error":
            errors.append(event.payload.message)

    began = time.monotonic()
    session = await open_session(Workspace.at(root), config, SessionSpec(broker=broker, listeners=(person,)))
    try:
        reason = await session.ask(task.question)
    finally:
        await session.context.close()
    run = Run(reason, answer[-1] if answer else "", [tuple(call) for call in calls.values()], cards,  # type: ignore[misc]
              time.monotonic() - began, turns[0], facts, errors, said)
    job = _submitted(run)
    if job is not None and task.name == "submit":
        facts[f"end:{job}"] = wait_for_end(cluster, job)
    for key in ("waiting",):
        if key in facts:
            ssh(cluster, f"scancel {facts[key]}")
    return run


# ----- the table -----------------------------------------------------------------------------------------

def verdict(task: Task, run: Run) -> tuple[bool, str]:
    checks = task.checks(run) if run.reason not in ("error", "breaker") else [(f"ended: {run.reason}", False)]
    failed = [name for name, ok in checks if not ok]
    return not failed, "ok" if not failed else "✗ " + "; ".join(failed)


def table(results: dict[str, list[tuple[bool, str, Run]]], runs: int) -> list[str]:
    lines = ["| task | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " | succeeded | median s | median turns |",
             "|---|" + "---|" * runs + "---|---|---|"]
    for name, done in results.items():
        cells = [note for _, note, _ in done]
        wins = sum(ok for ok, _, _ in done)
        seconds = statistics.median(run.seconds for _, _, run in done)
        turns = statistics.median(run.turns for _, _, run in done)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {wins}/{len(done)} | {seconds:.0f} | {turns:g} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-env", help="the variable holding the server's key (none by default)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", default=",".join(task.name for task in TASKS))
    parser.add_argument("--reply-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    parser.add_argument("--log", type=Path, help="also write each run (calls, cards, answer) here, one JSON line each")
    args = parser.parse_args()
    env = json.loads(subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "dev-cluster", "env", "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    cluster = {**env, "BETTY_CONFIG": env.get("BETTY_CONFIG") or str(Path(env["BETTY_DEV_CLUSTER_DIR"]) /
                                                                       "jupyter" / "jupyter_server_config.json")}
    os.environ.update({k: v for k, v in env.items() if k != "BETTY_CONFIG"})
    login = ssh(cluster, "id -un").strip()
    proxy = Proxy(args.base_url)
    llm: dict[str, Any] = {"base_url": proxy.base_url, "model": args.model, "timeout": 1800, "max_retries": 1,
                           "reply_tokens": args.reply_tokens}
    if args.api_key_env:
        llm["api_key_env"] = args.api_key_env
    chosen = [task for task in TASKS if task.name in args.tasks.split(",")]
    results: dict[str, list[tuple[bool, str, Run]]] = {task.name: [] for task in chosen}
    first_requests: list[Seen] = []
    later: list[Seen] = []
    with tempfile.TemporaryDirectory(prefix="betty-agent-eval-") as tmp:
        for number in range(args.runs):
            for task in chosen:
                before = len(proxy.seen)
                run = asyncio.run(one_run(task, cluster, llm, Path(tmp) / f"{task.name}-{number}", login))
                seen = proxy.seen[before:]
                first_requests += seen[:1]
                later += seen[1:]
                ok, note = verdict(task, run)
                results[task.name].append((ok, note, run))
                if args.log:
                    with args.log.open("a") as log:
                        log.write(json.dumps({"task": task.name, "run": number + 1, "ok": ok, "note": note,
                                              "reason": run.reason, "seconds": round(run.seconds, 1),
                                              "calls": run.calls, "cards": [c.preview.text for c in run.cards],
                                              "answer": run.answer, "said": run.said, "errors": run.errors, "requests": [vars(s) for s in seen]},
                                             default=str) + "\n")
                print(f"run {number + 1} {task.name}: {note} ({run.seconds:.0f} s, {run.turns} turns; "
                      f"tools {[call[0] for call in run.calls]}; answer {run.answer[:160]!r})", file=sys.stderr)
    proxy.close()
    core_wins = sum(sum(ok for ok, _, _ in results[name]) * 3 >= 2 * args.runs
                    for name in CORE if name in results)
    sizes = sorted({seen.prompt_tokens for seen in first_requests if seen.prompt_tokens})
    read_later = [seen.read_tokens for seen in later if seen.read_tokens is not None]
    read_first = [seen.read_tokens for seen in first_requests[1:] if seen.read_tokens is not None]
    summary = [
        f"Model `{args.model}` at {args.base_url}, {args.runs} runs per task, "
        f"{time.strftime('%Y-%m-%d')}; `bench/agent_eval.py --runs {args.runs}`.",
        "",
        *table(results, args.runs),
        "",
        f"- Of the five everyday tasks, {core_wins} succeeded in at least 2 of {args.runs} runs.",
        f"- First request (system prompt + offered tools + the question), as the server counts it: "
        f"{', '.join(map(str, sizes)) or 'not reported'} tokens.",
        f"- Prompt tokens the server had to read on a session's first request after the very first one "
        f"(median): {statistics.median(read_first):.0f}" if read_first else
        "- Prompt-cache use on first requests: not reported by this server.",
        f"- On later requests of a session (median): {statistics.median(read_later):.0f}" if read_later else
        "- Later requests: none, or not reported by this server.",
    ]
    print("\n".join(summary))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
