"""``betty llm serve`` on the dev cluster, over SSH and locally, with a stand-in for vLLM: a small
OpenAI-compatible stub submitted through ``--command`` that lists one model, to those who bring
the job's key (``$VLLM_API_KEY``, as vLLM asks for it), on the address the script gives it."""

from __future__ import annotations

import ipaddress
import json
import os
import pty
import queue
import re
import secrets
import signal
import socket
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from betty_jupyter.devcluster.layout import NODE_NAME
from conftest import BETTY, REPO, run_betty
from signal_moment import needs_gdb, started_interrupted

# Waits --delay seconds before it listens (as vLLM loads weights first), notes when it listens
# and every request it answers, and whether the request carried the job's key.
STUB = r'''
import argparse, http.server, json, os, pathlib, time

parser = argparse.ArgumentParser()
parser.add_argument("--host", required=True)
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--notes", required=True)
args = parser.parse_args()
notes = pathlib.Path(args.notes)
key = os.environ["VLLM_API_KEY"]
time.sleep(args.delay)


class OpenAIModels(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        authorized = self.headers.get("Authorization") == f"Bearer {key}"
        with notes.open("a") as log:
            log.write(f"GET {self.path} {'with' if authorized else 'without'} the key\n")
        if not authorized:
            self.send_error(401)
            return
        if self.path != "/v1/models":
            self.send_error(404)
            return
        body = json.dumps({"object": "list", "data": [{"id": args.model, "object": "model", "owned_by": "stub"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer((args.host, args.port), OpenAIModels)
with notes.open("a") as log:
    log.write(f"listening with a key of {len(key)} characters\n")
server.serve_forever()
'''
MODEL = "/models/tiny-llama"


@pytest.fixture
def job_name(dev_cluster):
    """A job name of this test's own; every job of that name is cancelled afterwards."""
    name = f"betty-llm-{secrets.token_hex(4)}"
    yield name
    subprocess.run(["scancel", "--name", name], env={**os.environ, **dev_cluster}, capture_output=True, timeout=60)


@pytest.fixture
def stub(tmp_path) -> tuple[Path, Path]:
    """The stub's script and the file it notes into."""
    script = tmp_path / "stub.py"
    script.write_text(STUB)
    return script, tmp_path / "stub-notes.txt"


def stub_command(stub: tuple[Path, Path], delay: float = 2.0) -> str:
    script, notes = stub
    return f'exec python3 {script} --host "$HOST" --port "$PORT" --model "$MODEL" --delay {delay} --notes {notes}'


def betty_env(profile, tmp_path: Path) -> dict[str, str]:
    """The person's environment: only ``profile`` configured, and Jupyter's config dir of this test."""
    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [profile.to_dict()]}}))
    return {**os.environ, "BETTY_CONFIG": str(config)}


def llm_file() -> Path:
    return Path(os.environ["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.d" / "betty_llm.json"


def accounted(dev_cluster: dict[str, str], name: str) -> list[str]:
    """Job ids of every job called ``name``, in the queue or in accounting."""
    env = {**os.environ, **dev_cluster}
    queued = subprocess.run(["squeue", "--noheader", "--name", name, "--format", "%A"], env=env,
                            capture_output=True, text=True, timeout=60).stdout.split()
    recorded = subprocess.run(["sacct", "-X", "--noheader", "--parsable2", "--name", name, "--starttime", "now-1days",
                               "--format", "JobIDRaw"], env=env, capture_output=True, text=True, timeout=60).stdout.split()
    return sorted(set(queued) | set(recorded))


def one_job_called(dev_cluster: dict[str, str], name: str) -> str:
    """The id of the one job called ``name``, once accounting has it (it lags the controller a moment)."""
    deadline = time.monotonic() + 60
    while len(ids := accounted(dev_cluster, name)) != 1:
        assert len(ids) < 2 and time.monotonic() < deadline, f"jobs called {name}: {ids}"
        time.sleep(0.5)
    return ids[0]


def wait_for_state(dev_cluster: dict[str, str], job_id: str, wanted: str) -> None:
    """Wait until accounting records ``wanted`` as the job's state."""
    env = {**os.environ, **dev_cluster}
    deadline = time.monotonic() + 60
    while True:
        result = subprocess.run(["sacct", "-X", "--noheader", "--parsable2", "--jobs", job_id, "--format", "State"],
                                env=env, capture_output=True, text=True, timeout=60)
        state = result.stdout.strip().split(" ")[0]
        if state == wanted:
            return
        assert time.monotonic() < deadline, f"job {job_id} is {state}, not {wanted}"
        time.sleep(0.5)


OPENAI_CANARY = "sk-canary-openai-never-sent-0123456789"


def route_to(host: str) -> str:
    """This machine's address on the route to ``host`` (what the job script works out on its node)."""
    family, kind, _, _, address = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, kind) as probe:
        probe.connect(address)
        return str(probe.getsockname()[0])


def listening_addresses(port: int) -> set[str]:
    """The local addresses something listens on at TCP ``port``, from /proc/net/tcp and tcp6."""
    found = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            hex_address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                raw = bytes.fromhex(hex_address)
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
                found.add(str(ipaddress.ip_address(words)))
    return found


def models_at(base_url: str, key: str | None) -> list[str]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(f"{base_url}/models", headers=headers), timeout=30) as answer:
        return [model["id"] for model in json.loads(answer.read())["data"]]


def command_lines() -> list[str]:
    """Every process's command line on this machine, as ``ps`` shows them to anyone."""
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            lines.append(entry.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return lines


class Serving:
    """``betty llm serve`` running in the background, its output read line by line."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.process = subprocess.Popen([*BETTY, "llm", "serve", *args], cwd=REPO, env=env, text=True,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                        for stream, into in ((self.process.stdout, self.stdout), (self.process.stderr, self.stderr))]
        for reader in self.readers:
            reader.start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))
            if into is self.stdout:
                self.lines.put(line.rstrip("\n"))

    def line_starting(self, prefix: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            if line.startswith(prefix):
                return line
        pytest.fail(f"no line starting {prefix!r}; stdout: {self.stdout[-5:]}; stderr: {self.stderr[-5:]}")

    def stop(self) -> int:
        """SIGINT, then its exit code; one that does not end is killed (its pipes closed) and fails the test."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"betty llm serve still ran 120 s after SIGINT; stderr: {self.stderr[-5:]}")
        finally:
            for reader in self.readers:  # they end with the output
                reader.join(30)
            for stream in (self.process.stdout, self.process.stderr):
                assert stream is not None
                stream.close()


@pytest.mark.cluster
def test_serve_submits_once_waits_for_the_server_points_betty_at_it_and_cancels_on_ctrl_c(
        profile, dev_cluster, tmp_path, job_name, stub):
    env = {**betty_env(profile, tmp_path), "OPENAI_API_KEY": OPENAI_CANARY}
    serving = Serving(env, "--partition", "gpu", "--model", MODEL, "--command", stub_command(stub),
                      "--name", job_name, "--yes")
    try:
        job_id = serving.line_starting("submitted job ").split()[2]
        ready = serving.line_starting("serving ")
        # It waited for the stub, which listens only after its delay, to answer; it asked with the job's key.
        assert stub[1].read_text().splitlines()[:2] == ["listening with a key of 43 characters",
                                                       "GET /v1/models with the key"]
        parts = re.fullmatch(r"serving (\S+) at (\S+) \(job (\d+) on (\S+), listening on ([0-9a-f.:]+):(\d+)\)", ready)
        assert parts and parts[1] == MODEL and parts[3] == job_id and parts[4] == NODE_NAME, ready
        base_url, address, port = parts[2], parts[5], int(parts[6])
        # The stand-in listens only on the address that reaches the host sbatch ran on, not on every interface.
        assert address == route_to(socket.gethostname())
        assert listening_addresses(port) == {address}
        if profile.transport in ("ssh", "openssh"):
            assert base_url.startswith("http://127.0.0.1:"), "over SSH Betty reaches the server through a local forward"
        else:
            assert base_url == f"http://{address}:{port}/v1"

        written = json.loads(llm_file().read_text())
        key_file = Path(written["BettyConfig"]["llm"].pop("api_key_file"))
        assert written == {"BettyConfig": {"llm": {"base_url": base_url, "model": MODEL}}}
        key = key_file.read_text().strip()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
        on_cluster = list(Path(profile.work_dir, "llm").glob("*.key"))
        assert [path.read_text() for path in on_cluster] == [key]
        assert stat.S_IMODE(on_cluster[0].stat().st_mode) == 0o600
        assert stat.S_IMODE(on_cluster[0].parent.stat().st_mode) == 0o700
        assert models_at(base_url, key) == [MODEL]
        with pytest.raises(urllib.error.HTTPError, match="401"):
            models_at(base_url, None)
        with pytest.raises(urllib.error.HTTPError, match="401"):
            models_at(base_url, OPENAI_CANARY)

        from betty_jupyter.agent.llm import LLMSettings
        from betty_jupyter.config import load_config

        settings = LLMSettings.from_config(load_config().llm, environ={"OPENAI_API_KEY": OPENAI_CANARY})
        assert (settings.base_url, settings.model, settings.api_key) == (base_url, MODEL, key)
        # The key is in no text anyone else sees: not the script, its log, a command line or the output.
        shown = [*serving.stdout, *serving.stderr, *(p.read_text() for p in Path(profile.work_dir).rglob("*")
                                                    if p.is_file() and p.suffix != ".key")]
        assert not any(key in text for text in shown) and not any(key in line for line in command_lines())
        assert "VLLM_API_KEY=$(cat -- " in "\n".join(serving.stdout)
        assert one_job_called(dev_cluster, job_name) == job_id
    finally:
        code = serving.stop()
    assert code == 0, serving.stderr
    assert serving.stdout[-1] == f"cancelled job {job_id}; removed {llm_file()}"
    assert not llm_file().exists() and not key_file.exists() and not any(Path(profile.work_dir, "llm").glob("*.key"))
    assert OPENAI_CANARY not in stub[1].read_text()
    wait_for_state(dev_cluster, job_id, "CANCELLED")
    # still exactly one job of that name, once accounting has caught up with its name
    assert one_job_called(dev_cluster, job_name) == job_id


@pytest.mark.cluster
def test_ctrl_c_puts_the_previous_llm_setting_back(local_profile, dev_cluster, tmp_path, job_name, stub):
    llm_file().parent.mkdir(parents=True, exist_ok=True)
    previous = '{"BettyConfig": {"llm": {"model": "gpt-4o"}}}\n'
    llm_file().write_text(previous)
    serving = Serving(betty_env(local_profile, tmp_path), "--partition", "cpu", "--gpus", "0", "--model", MODEL,
                      "--command", stub_command(stub, delay=0), "--name", job_name, "--yes")
    try:
        serving.line_starting("serving ")
        assert json.loads(llm_file().read_text())["BettyConfig"]["llm"]["model"] == MODEL
    finally:
        code = serving.stop()
    assert code == 0 and serving.stdout[-1].endswith(f"; restored the previous {llm_file()}")
    assert llm_file().read_text() == previous


@pytest.mark.cluster
def test_ctrl_c_right_after_sbatch_cancels_the_job_and_leaves_the_setting_alone(local_profile, dev_cluster, tmp_path,
                                                                                job_name):
    llm_file().parent.mkdir(parents=True, exist_ok=True)
    previous = '{"BettyConfig": {"llm": {"model": "gpt-4o"}}}\n'
    llm_file().write_text(previous)
    # The server never answers, so the interruption lands while Betty waits for it.
    serving = Serving(betty_env(local_profile, tmp_path), "--partition", "cpu", "--gpus", "0", "--model", MODEL,
                      "--command", "sleep 300", "--name", job_name, "--yes")
    try:
        job_id = serving.line_starting("submitted job ").split()[2]
    finally:
        code = serving.stop()
    assert code == 130 and serving.stderr[-2:] == [f"betty: cancelled job {job_id}", "betty: interrupted"], \
        serving.stderr
    wait_for_state(dev_cluster, job_id, "CANCELLED")
    assert llm_file().read_text() == previous


@pytest.mark.cluster
def test_ctrl_c_the_instant_before_betty_waits_for_the_server_cancels_the_job(local_profile, dev_cluster, tmp_path,
                                                                             job_name):
    needs_gdb()
    llm_file().parent.mkdir(parents=True, exist_ok=True)
    previous = '{"BettyConfig": {"llm": {"model": "gpt-4o"}}}\n'
    llm_file().write_text(previous)
    serving = started_interrupted(
        [*BETTY, "llm", "serve", "--partition", "cpu", "--gpus", "0", "--model", MODEL, "--command", "sleep 300",
         "--name", job_name, "--yes"], b"submitted job ", tmp_path, cwd=REPO, env=betty_env(local_profile, tmp_path),
        text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        try:
            out, err = serving.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            raise AssertionError("betty llm serve still runs 120 s after SIGINT") from None
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.communicate()
    job_id = next(line for line in out.splitlines() if line.startswith("submitted job ")).split()[2]
    assert serving.returncode == 130 and err.splitlines()[-2:] == [f"betty: cancelled job {job_id}", "betty: interrupted"], err
    wait_for_state(dev_cluster, job_id, "CANCELLED")
    assert llm_file().read_text() == previous


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert lines[0].startswith("betty: error: ")
    return lines[0]


@pytest.mark.cluster
def test_refusing_the_approval_submits_nothing(ssh_profile, dev_cluster, tmp_path, job_name, stub):
    controller, terminal = pty.openpty()
    try:
        asked = subprocess.Popen(
            [*BETTY, "llm", "serve", "--partition", "gpu", "--model", MODEL, "--command", stub_command(stub),
             "--name", job_name], cwd=REPO, env=betty_env(ssh_profile, tmp_path), text=True,
            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.write(controller, b"n\n")
        out, err = asked.communicate(timeout=120)
    finally:
        os.close(terminal)
        os.close(controller)
    assert asked.returncode == 1 and err.strip().splitlines() == ["betty: error: nothing was done"], err
    assert f"#SBATCH --job-name={job_name}" in out and "Submit this model server to betty-dev (partition gpu, 1 GPU" in out
    assert "the job's environment: HOME, USER, LOGNAME, SHELL, PATH, " in out
    no_terminal = run_betty("llm", "serve", "--partition", "gpu", "--model", MODEL, "--name", job_name,
                            env=betty_env(ssh_profile, tmp_path))
    assert "needs a confirmation; pass --yes when running without a terminal" in one_error_line(no_terminal)
    assert accounted(dev_cluster, job_name) == []
    assert not Path(ssh_profile.work_dir).exists()


@pytest.mark.cluster
def test_a_partition_the_cluster_lacks_is_one_line_and_submits_nothing(ssh_profile, dev_cluster, tmp_path, job_name):
    refused = run_betty("llm", "serve", "--partition", "gpux", "--model", MODEL, "--name", job_name, "--yes",
                        env=betty_env(ssh_profile, tmp_path))
    assert "partition 'gpux' does not exist" in one_error_line(refused)
    assert accounted(dev_cluster, job_name) == [] and not Path(ssh_profile.work_dir).exists()
    for bad, says in [(["--gpus", "-1"], "--gpus must be 0 or more"), (["--name", "a b"], "--name 'a b' must be"),
                      (["--time", "1h"], "time '1h'")]:
        assert says in one_error_line(run_betty("llm", "serve", "--partition", "gpu", "--model", MODEL, "--yes",
                                                *bad, env=betty_env(ssh_profile, tmp_path)))


@pytest.mark.cluster
@pytest.mark.parametrize("transport", ["ssh", "local"])
def test_a_server_that_fails_at_start_is_one_line_with_the_end_of_its_log(
        transport, request, dev_cluster, tmp_path, job_name):
    profile = request.getfixturevalue(f"{transport}_profile")
    failed = run_betty("llm", "serve", "--partition", "gpu", "--model", MODEL, "--name", job_name, "--yes",
                       "--command", 'echo "loading $MODEL"; echo "torch.OutOfMemoryError: CUDA out of memory" >&2; exit 3',
                       env=betty_env(profile, tmp_path))
    assert failed.returncode == 1, failed.stderr
    last = failed.stderr.strip().splitlines()[-1]
    job_id = one_job_called(dev_cluster, job_name)
    assert last == (f"betty: error: the model server (job {job_id}) ended FAILED before it answered; its log ends: "
                    "loading /models/tiny-llama / torch.OutOfMemoryError: CUDA out of memory")
    assert not llm_file().exists()


@pytest.mark.cluster
def test_giving_up_cancels_the_job(local_profile, dev_cluster, tmp_path, job_name):
    gave_up = run_betty("llm", "serve", "--partition", "cpu", "--gpus", "0", "--model", MODEL, "--name", job_name,
                        "--yes", "--timeout", "3", "--command", "sleep 300", env=betty_env(local_profile, tmp_path))
    last = gave_up.stderr.strip().splitlines()[-1]
    assert gave_up.returncode == 1, gave_up.stderr
    job_id = one_job_called(dev_cluster, job_name)
    assert last.startswith(f"betty: error: the model server (job {job_id}) did not answer within 3 s")
    assert last.endswith(f"; cancelled job {job_id}")
    wait_for_state(dev_cluster, job_id, "CANCELLED")
    assert not llm_file().exists()


def test_the_default_script_runs_vllm_with_tool_calling_on_every_gpu(tmp_path):
    from betty_jupyter.cluster.sbatch import SbatchScript
    from betty_jupyter.llmserve import ServeRequest, render_script

    model = "/models/it's $(here)"
    key_file = "/work/my llm/k.key"
    request = ServeRequest(model=model, partition="gpu", gpus=2, tool_parser="llama3_json")
    text = render_script(request, "/work/my llm", key_file)
    script = SbatchScript.parse(text)
    assert (script.get("partition"), script.gpu_request(), script.get("output")) == ("gpu", (None, 2), "/work/my llm/%j.log")
    assert text.rstrip().endswith(
        'exec python -m vllm.entrypoints.openai.api_server --model "$MODEL" --host "$HOST" --port "$PORT" '
        "--enable-auto-tool-choice --tool-call-parser llama3_json --tensor-parallel-size 2")
    assert "0.0.0.0" not in text and "--api-key" not in text
    assert subprocess.run(["bash", "-n"], input=text, text=True, timeout=30).returncode == 0
    # Up to the server, the script runs as it would in the job: it reads the key into the environment
    # and says where the server will listen: on the address that reaches the submitting host.
    (tmp_path / "k.key").write_text("the-job-key")
    preamble = text.rsplit("\n", 2)[0].replace("'/work/my llm/k.key'", str(tmp_path / "k.key"))
    preamble = preamble.replace("'/work/my llm'", str(tmp_path))
    ran = subprocess.run(["bash", "-c", preamble + '\necho "MODEL=$MODEL KEY=$(printenv VLLM_API_KEY)"'],
                         env={**os.environ, "SLURM_JOB_ID": "77", "SLURM_SUBMIT_HOST": socket.gethostname()},
                         capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    host, port = (tmp_path / "77.address").read_text().strip().rsplit(":", 1)
    assert host == route_to(socket.gethostname()) and 20000 <= int(port) < 50000
    assert ran.stdout.splitlines()[-1] == f"MODEL={model} KEY=the-job-key"


def test_a_job_that_cannot_read_its_key_or_find_its_address_stops_with_one_line(tmp_path):
    from betty_jupyter.llmserve import ServeRequest, render_script

    text = render_script(ServeRequest(model="m", partition="cpu", gpus=0), str(tmp_path), str(tmp_path / "gone.key"))
    run = subprocess.run(["bash", "-c", text], env={**os.environ, "SLURM_JOB_ID": "78", "SLURM_SUBMIT_HOST": "x"},
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and run.stderr.strip().splitlines()[-1] == "betty: cannot read the server's key"
    (tmp_path / "gone.key").write_text("k")
    run = subprocess.run(["bash", "-c", text], env={**os.environ, "SLURM_JOB_ID": "78",
                                                    "SLURM_SUBMIT_HOST": "no-such-host.invalid"},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("betty: cannot tell which address of ")
    assert not (tmp_path / "78.address").exists()
