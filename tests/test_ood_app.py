"""The Open OnDemand app in ood/betty: its templates rendered with Ruby's ERB as OnDemand renders them,
then run on this machine as OnDemand's job script runs them, starting a real JupyterLab whose Betty
reaches the dev cluster over the local transport."""

from __future__ import annotations

import html.parser
import http.cookiejar
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from test_server_support import rows_of

APP = REPO / "ood" / "betty"

# What OnDemand provides when it renders an app, reduced to what these templates use: the form's
# values as plain names in submit.yml.erb, as `context` in template/*.erb, and host, port and
# password in view.html.erb. OnDemand renders with trim_mode "-", and form values are strings.
PRELUDE = r"""
require "erb"
require "json"

class FormValues
  def initialize(values)
    @values = values
  end

  def method_missing(name, *args)
    return @values.fetch(name.to_s) { super } if args.empty?
    super
  end

  def respond_to_missing?(name, include_private = false)
    @values.key?(name.to_s) || super
  end

  def scope
    binding
  end
end

kind, path, values_json = ARGV
values = JSON.parse(values_json)
erb = ERB.new(File.read(path), trim_mode: "-")
erb.filename = path
case kind
when "submit"
  print erb.result(FormValues.new(values).scope)
when "template"
  context = FormValues.new(values)
  print erb.result(binding)
when "view"
  host, port, password = values.values_at("host", "port", "password")
  print erb.result(binding)
end
"""

# OnDemand's job script defines these before it sources before.sh; here they are stand-ins.
JOB_SCRIPT = r"""
find_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
create_passwd() { tr -dc 'A-Za-z0-9' </dev/urandom | head -c "${1:-8}"; }
host=$(hostname)
source ./before.sh
(umask 077; printf 'host: %s\nport: %s\npassword: %s\n' "$host" "$port" "$password" > connection.yml)
"""


def form_values(**overrides: str) -> dict[str, str]:
    """Every field of form.yml at its default, as the strings OnDemand hands the templates."""
    form = yaml.safe_load((APP / "form.yml").read_text())
    values = {}
    for name in form["form"]:
        attribute = form["attributes"][name]
        values[name] = str(attribute.get("value", "") if isinstance(attribute, dict) else attribute)
    return {**values, **overrides}


def erb(tmp_path: Path, kind: str, template: str, values: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Render ``template`` with Ruby's ERB as OnDemand does (``kind``: submit, template or view)."""
    ruby = shutil.which("ruby")
    assert ruby, "Ruby is not installed: `apt-get install ruby` (scripts/install.sh does it for the tests)"
    prelude = tmp_path / "render.rb"
    prelude.write_text(PRELUDE)
    return subprocess.run([ruby, str(prelude), kind, str(APP / template), json.dumps(values)],
                          capture_output=True, text=True, timeout=60)


def render(tmp_path: Path, kind: str, template: str, values: dict[str, str]) -> str:
    result = erb(tmp_path, kind, template, values)
    assert result.returncode == 0, result.stderr
    return result.stdout


def stage(tmp_path: Path, values: dict[str, str]) -> Path:
    """The job's directory as OnDemand stages it: the rendered templates, script.sh executable."""
    staged = tmp_path / "job"
    staged.mkdir()
    (staged / "before.sh").write_text(render(tmp_path, "template", "template/before.sh.erb", values))
    (staged / "script.sh").write_text(render(tmp_path, "template", "template/script.sh.erb", values))
    (staged / "script.sh").chmod(0o755)
    return staged


def native_args(tmp_path: Path, **fields: str) -> list[str]:
    submit = yaml.safe_load(render(tmp_path, "submit", "submit.yml.erb", form_values(**fields)))
    assert submit["batch_connect"] == {"template": "basic"}
    return list(submit["script"]["native"])


def test_the_yaml_files_declare_a_batch_connect_app_with_its_fields():
    manifest = yaml.safe_load((APP / "manifest.yml").read_text())
    assert manifest["role"] == "batch_connect" and manifest["category"] == "Interactive Apps" and manifest["name"]
    form = yaml.safe_load((APP / "form.yml").read_text())
    assert form["cluster"]
    for field in ("partition", "num_gpus", "bc_num_hours", "llm_base_url", "llm_model", "working_dir"):
        assert field in form["form"] and form["attributes"][field].get("help"), field
    assert set(form["form"]) == set(form["attributes"])


def test_submit_asks_for_the_partition_hours_and_gpus(tmp_path):
    assert native_args(tmp_path, partition="gpu", num_gpus="2", bc_num_hours="3") == [
        "--partition", "gpu", "--time", "03:00:00", "--gres", "gpu:2"]
    assert native_args(tmp_path, partition=" cpu ", num_gpus="0", bc_num_hours="12") == [
        "--partition", "cpu", "--time", "12:00:00"]
    assert native_args(tmp_path, partition="", num_gpus="", bc_num_hours="1") == ["--time", "01:00:00"]


def test_hostile_form_values_stay_values(tmp_path):
    """Whatever a person types reaches the job as data: JSON in Betty's config, never shell code."""
    odd = "m'\"; touch pwned; $(touch pwned) `touch pwned`"
    (tmp_path / "home" / "my project").mkdir(parents=True)
    values = form_values(llm_model=odd, llm_base_url="http://gpu-7:8000/v1", working_dir="~/my project",
                         betty_cluster_name="hpc-1", betty_readable_roots="/home /scratch")
    staged = stage(tmp_path, values)
    syntax = subprocess.run(["bash", "-n"], input=(staged / "before.sh").read_text() + (staged / "script.sh").read_text(),
                            capture_output=True, text=True, timeout=30)
    assert syntax.returncode == 0, syntax.stderr
    run = subprocess.run(["bash", "-c", JOB_SCRIPT + 'echo "$BETTY_NOTEBOOK_ROOT"'], cwd=staged, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path / "home")})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(tmp_path / "home" / "my project")
    assert json.loads((staged / "betty_config.json").read_text()) == {"BettyConfig": {
        "clusters": [{"name": "hpc-1", "transport": "local", "readable_roots": ["/home", "/scratch"]}],
        "default_cluster": "hpc-1",
        "llm": {"base_url": "http://gpu-7:8000/v1", "model": odd}}}
    assert not list(tmp_path.rglob("pwned"))
    for written in ("betty_config.json", "jupyter_config.py", "connection.yml"):
        assert (staged / written).stat().st_mode & 0o077 == 0, written


def test_a_bad_cluster_name_is_refused_when_rendering(tmp_path):
    result = erb(tmp_path, "template", "template/before.sh.erb", form_values(betty_cluster_name="my cluster"))
    assert result.returncode != 0 and "betty_cluster_name \"my cluster\" in form.yml must be" in result.stderr
    result = erb(tmp_path, "template", "template/before.sh.erb", form_values(betty_readable_roots="/home scratch"))
    assert result.returncode != 0 and "betty_readable_roots \"/home scratch\" in form.yml must be absolute" in result.stderr


class _Form(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.form: dict[str, str] = {}
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.form = values
        elif tag == "input" and values.get("type") == "hidden":
            self.fields[values["name"]] = values["value"]


def connect_view(tmp_path: Path, host: str, port: str, password: str) -> _Form:
    """view.html.erb rendered for this session, read as the browser reads it."""
    parser = _Form()
    parser.feed(render(tmp_path, "view", "view.html.erb", {"host": host, "port": port, "password": password}))
    return parser


def test_the_connect_button_posts_the_token_to_jupyters_login(tmp_path):
    view = connect_view(tmp_path, "node-7", "43210", "s3cret")
    assert view.form["method"] == "post"
    assert view.form["action"] == "/node/node-7/43210/login?next=%2Fnode%2Fnode-7%2F43210%2Flab"
    assert view.fields["password"] == "s3cret" and len(view.fields["_xsrf"]) == 32
    assert f"_xsrf={view.fields['_xsrf']}; path=/node/node-7/43210/" in view.form["onsubmit"]


# ----- the real thing --------------------------------------------------------------------------
class Session:
    """The app running as OnDemand would run it, stopped with its whole process group."""

    def __init__(self, staged: Path, env: dict[str, str]) -> None:
        self.staged = staged
        self.log = (staged / "output.log").open("w")
        self.process = subprocess.Popen(["bash", "-c", JOB_SCRIPT + "exec ./script.sh"], cwd=staged, env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while not (staged / "connection.yml").exists():
            self._check_alive(deadline)
            time.sleep(0.2)
        time.sleep(0.2)
        connection = yaml.safe_load((staged / "connection.yml").read_text())
        self.host, self.port, self.password = str(connection["host"]), str(connection["port"]), str(connection["password"])
        self.base = f"http://127.0.0.1:{self.port}/node/{self.host}/{self.port}"

    def _check_alive(self, deadline: float) -> None:
        if self.process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the app did not start: {(self.staged / 'output.log').read_text()[-3000:]}")

    def api(self, route: str) -> Any:
        request = urllib.request.Request(f"{self.base}/betty/api/{route}",
                                         headers={"Authorization": f"token {self.password}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())

    def wait_until_serving(self) -> dict[str, Any]:
        deadline = time.monotonic() + 180
        while True:
            self._check_alive(deadline)
            try:
                return dict(self.api("health"))
            except urllib.error.HTTPError as answer:
                answer.close()
            except OSError:
                pass
            time.sleep(0.5)

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        self.log.close()


@pytest.fixture
def session(dev_cluster, tmp_path):
    home, jupyter_config = tmp_path / "home", tmp_path / "jupyter-config"
    home.mkdir()
    jupyter_config.mkdir()
    if os.geteuid() == 0:  # this machine's tests run as root; OnDemand never starts a job as root
        (jupyter_config / "jupyter_config.json").write_text(json.dumps({"ServerApp": {"allow_root": True}}))
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(jupyter_config),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "SLURM_CONF": dev_cluster["SLURM_CONF"]}
    running = Session(stage(tmp_path, form_values(betty_cluster_name="betty-dev", partition="cpu")), env)
    yield running
    running.stop()


@pytest.mark.cluster
def test_the_app_starts_jupyterlab_whose_betty_reaches_the_dev_cluster_locally(session):
    health = session.wait_until_serving()
    assert health["status"] == "ok" and health["clusters"] == ["betty-dev"] and health["default_cluster"] == "betty-dev"
    assert session.api("clusters")["clusters"] == [
        {"name": "betty-dev", "transport": "local", "host": "", "default": True, "environments": []}]
    rows = rows_of(session.api("partitions"))
    assert sorted(row["partition"] for row in rows) == ["cpu", "gpu"]

    # Jupyter's command line does not carry the token (anyone on the node can read command lines).
    assert session.password not in " ".join(_command_lines(session.process.pid))


@pytest.mark.cluster
def test_the_connect_button_logs_the_browser_into_jupyterlab(session, tmp_path):
    session.wait_until_serving()
    view = connect_view(tmp_path, session.host, session.port, session.password)
    origin = f"http://127.0.0.1:{session.port}"
    cookies = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    # What the form's onsubmit does: the _xsrf cookie for Jupyter's path, then the post.
    path = view.form["onsubmit"].split("path=", 1)[1].split(";", 1)[0]
    cookies.set_cookie(http.cookiejar.Cookie(
        0, "_xsrf", view.fields["_xsrf"], None, False, "127.0.0.1", False, False, path, True, False, None, False,
        None, None, {}))
    body = urllib.parse.urlencode(view.fields).encode()
    with browser.open(urllib.request.Request(origin + view.form["action"], data=body,
                                             headers={"Origin": origin}), timeout=60) as page:
        assert page.url == f"{origin}/node/{session.host}/{session.port}/lab"
        assert page.status == 200 and b"JupyterLab" in page.read()

    without_cookie = urllib.request.build_opener()
    with pytest.raises(urllib.error.HTTPError) as refused:
        without_cookie.open(urllib.request.Request(origin + view.form["action"], data=body), timeout=60)
    refused.value.close()
    assert refused.value.code == 403


def _command_lines(root: int) -> list[str]:
    """The command lines of ``root`` and every process below it."""
    lines, pending = [], [root]
    while pending:
        pid = pending.pop()
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        pending.extend(int(child) for child in children)
    return lines
