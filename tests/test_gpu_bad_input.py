"""A hostile ``config.json`` is one clear line, never a traceback, and a trace is bounded whatever the model's size.

Through ``betty gpu estimate`` (in process and as a real process) and the agent's ``gpu_estimate`` tool:
sizes that are ``NaN``, ``Infinity``, zero, negative, fractional, enormous or not numbers at all, JSON nested
without end, and models with thousands of experts asked for ``--trace`` (refused before PyTorch is even
imported, so these run without the trace extra; a model of thousands of layers is traced at two small depths and
extended: ``test_gpu_trace_depth.py``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import betty_in_process, run_betty

from betty_jupyter.agent.registry import default_registry
from betty_jupyter.gpu.architecture import LARGEST_FIELD
from betty_jupyter.gpu.trace import MAX_EXPERTS

LLAMA = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
         "num_hidden_layers": 16, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256}
FIELDS = ["hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "head_dim",
          "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window"]
BAD = ["NaN", "Infinity", "-Infinity", "0", "-4", "1e300", "1e999", "4096.5", str(LARGEST_FIELD + 1), "true",
       '"32"', "[32]", "{}", "null-ish"]


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(text)
    return path


def with_field(field: str, raw: str) -> str:
    """LLAMA's config.json text with ``field`` set to the raw JSON text ``raw``."""
    return json.dumps(LLAMA)[:-1] + f', "{field}": {raw}' + "}"


@pytest.mark.parametrize("field", FIELDS)
def test_a_bad_size_in_config_json_is_one_line_naming_the_field(tmp_path: Path, capsys: Any, field: str) -> None:
    for raw in BAD:
        if field == "sliding_window" and raw == "0":
            continue  # no window: a valid value
        path = written(tmp_path, with_field(field, raw))
        code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", str(path), "--method", "lora")
        line = err.strip()
        assert code != 0 and out == "", (field, raw, out)
        assert "\n" not in line and "Traceback" not in line and line.startswith("betty: "), (field, raw, err)
        assert (f"`{field}`" in line or "not a readable JSON config" in line), (field, raw, line)


def test_json_nested_without_end_is_one_line(tmp_path: Path, capsys: Any) -> None:
    for text in ("[" * 100_000, '{"hidden_size": ' + "[" * 5000 + "]" * 5000 + "}", "NaN", "[]", '"x"'):
        code, _, err = betty_in_process(capsys, "gpu", "estimate", "--model", str(written(tmp_path, text)))
        assert code != 0 and "\n" not in err.strip() and "Traceback" not in err, err


def test_a_real_process_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    result = run_betty("gpu", "estimate", "--model", str(written(tmp_path, with_field("num_attention_heads", "NaN"))),
                       "--method", "lora")
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "num_attention_heads" in result.stderr, result.stderr


@pytest.mark.parametrize("field, value, words", [
    ("num_local_experts", MAX_EXPERTS + 1, f"{MAX_EXPERTS + 1:,} experts per layer"),
    ("num_local_experts", LARGEST_FIELD, f"{LARGEST_FIELD:,} experts per layer"),
])
def test_a_trace_of_a_model_too_large_to_trace_is_refused_at_once(tmp_path: Path, capsys: Any, field: str,
                                                                   value: int, words: str) -> None:
    path = written(tmp_path, json.dumps({**LLAMA, field: value}))
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", str(path), "--method", "lora", "--trace")
    assert code != 0 and words in err and "drop --trace" in err and "\n" not in err.strip(), err
    code, out, err = betty_in_process(capsys, "gpu", "estimate", "--model", str(path), "--method", "lora", "--json")
    assert code == 0 and json.loads(out)["peak_gib"] > 0, err  # the formula estimate still answers


def test_the_agents_tool_answers_a_bad_config_and_an_untraceable_model_in_one_line(offline_context: Any) -> None:
    context = offline_context
    tool = default_registry().get("gpu_estimate")
    project = context.workspace.root
    for name, config in (("bad", with_field("hidden_size", "Infinity")),
                         ("huge", json.dumps({**LLAMA, "num_local_experts": 5000}))):
        (project / name).mkdir()
        (project / name / "config.json").write_text(config)
    for args, words in (({"model": "bad/config.json", "method": "lora"}, "`hidden_size` is inf"),
                        ({"model": "huge/config.json", "method": "lora", "trace": True}, "5,000 experts")):
        outcome = asyncio.run(tool.execute(context, tool.parse(args)))
        assert not outcome.ok and words in outcome.summary and "\n" not in outcome.summary, outcome.summary
