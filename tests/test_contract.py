"""One contract: the committed JSON Schemas are the pydantic models', and the panel's generated TypeScript is theirs.

Each test fails when someone changes a model (or a schema, or the generator) without
regenerating: ``python -m betty_jupyter.schemas``, then ``npm run generate`` in ``labextension/``.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from betty_jupyter import schemas
from betty_jupyter.agent.events import EventStream, ToolResultInfo
from betty_jupyter.agent.models import ToolOutcome
from betty_jupyter.agent.wire import outcome_to_json
from betty_jupyter.json_schema import offline_validator

REPO = Path(__file__).resolve().parents[1]
LABEXTENSION = REPO / "labextension"
GENERATED = LABEXTENSION / "src" / "contract"


def differences(committed: str, generated: str, name: str) -> str:
    """The first lines of a unified diff, for a failure message."""
    diff = difflib.unified_diff(committed.splitlines(), generated.splitlines(), f"committed {name}",
                                f"generated {name}", lineterm="", n=1)
    return "\n".join(list(diff)[:40])


@pytest.mark.parametrize("name", sorted(schemas.SCHEMAS))
def test_the_committed_schema_is_the_models(name: str) -> None:
    committed = (schemas.DIRECTORY / name).read_text(encoding="utf-8")
    generated = schemas.schema_text(schemas.SCHEMAS[name]())
    assert committed == generated, (
        f"betty_jupyter/schemas/{name} differs from the pydantic models: run `python -m betty_jupyter.schemas` "
        f"and `npm run generate` in labextension/, and commit what they wrote\n"
        + differences(committed, generated, name))


def test_the_module_writes_the_schemas_and_checks_them(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "betty_jupyter.schemas"]
    subprocess.run([*run, str(tmp_path)], check=True, capture_output=True, timeout=120)
    for name in schemas.SCHEMAS:
        assert (tmp_path / name).read_bytes() == (schemas.DIRECTORY / name).read_bytes()
    assert subprocess.run([*run, "--check"], capture_output=True, timeout=120).returncode == 0
    (tmp_path / "events.v1.json").write_text("{}\n", encoding="utf-8")
    checked = subprocess.run([*run, "--check", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1 and "events.v1.json differs from the models" in checked.stderr


@pytest.mark.parametrize("name", sorted(schemas.SCHEMAS))
def test_each_schema_is_versioned_and_valid(name: str) -> None:
    schema = schemas.load(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("https://betty-jupyter.org/schemas/") and schema["$id"].endswith("/v1")
    assert name == f"{schema['$id'].split('/')[-2]}.v1.json"
    offline_validator(schema)  # a valid 2020-12 schema whose every $ref resolves inside it


def test_the_schemas_ship_in_the_package() -> None:
    assert schemas.DIRECTORY == REPO / "betty_jupyter" / "schemas"
    assert not (REPO / "betty_jupyter" / "agent" / "events.schema.json").exists()


def api_validator(definition: str):  # noqa: ANN201
    schema = schemas.load("server-api.v1.json")
    return offline_validator({**schema, "$ref": f"#/$defs/{definition}"})


def test_an_outcome_with_a_table_is_what_the_schema_says() -> None:
    frame = pd.DataFrame({"job_id": ["41", "42"], "cpus": pd.array([2, None], dtype="Int64"),
                          "elapsed": pd.to_timedelta([61.0, None], unit="s"),
                          "gpu_types": [{"a100": 4}, {}]})
    answer = json.loads(json.dumps(outcome_to_json(ToolOutcome(summary="2 jobs", data=frame))))
    api_validator("Outcome").validate(answer)
    assert answer["data"]["value"]["columns"] == [
        {"name": "job_id", "type": "string"}, {"name": "cpus", "type": "integer"},
        {"name": "elapsed", "type": "duration"}, {"name": "gpu_types", "type": "json"}]
    assert answer["data"]["value"]["rows"] == [["41", 2, 61.0, {"a100": 4}], ["42", None, None, {}]]


def test_the_server_error_frame_is_not_an_event() -> None:
    frame = {"type": "server_error", "message": "a message is {type: ask|approval|stop, …}"}
    api_validator("ServerError").validate(frame)
    events = offline_validator(schemas.load("events.v1.json"))
    assert not events.is_valid(frame)
    event = json.loads(EventStream("s").emit("tool_result", ToolResultInfo(
        call_id="c", tool="cluster_queue", ok=True, decision="auto", summary="2 jobs", duration_ms=3)).model_dump_json())
    assert events.is_valid(event) and not api_validator("ServerError").is_valid(event)


# ----- the panel's generated TypeScript ------------------------------------------------------------
def generate_typescript(out: Path) -> None:
    """Run the panel's generator (``npm run generate``) into ``out``."""
    assert (LABEXTENSION / "node_modules" / "json-schema-to-typescript").is_dir(), (
        "labextension/node_modules is not installed: scripts/install.sh and scripts/test.sh install it")
    node = shutil.which("node")
    assert node, "node is missing on this machine (scripts/install.sh installs Debian's nodejs)"
    subprocess.run([node, "scripts/generate.mjs", str(out)], cwd=LABEXTENSION, check=True, capture_output=True,
                   timeout=300)


def test_the_committed_typescript_is_what_the_schemas_generate(tmp_path: Path) -> None:
    generate_typescript(tmp_path)
    generated = sorted(path.name for path in tmp_path.iterdir())
    assert sorted(path.name for path in GENERATED.iterdir()) == generated
    for name in generated:
        committed = (GENERATED / name).read_text(encoding="utf-8")
        fresh = (tmp_path / name).read_text(encoding="utf-8")
        assert committed == fresh, (
            f"labextension/src/contract/{name} is not what the committed schemas generate: run `npm run generate` "
            f"in labextension/ and commit it\n" + differences(committed, fresh, name))

