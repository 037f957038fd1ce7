"""``betty gpu``: the shape other tools script, human tables, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import betty_in_process, run_betty

from betty_jupyter.gpu import estimate, gpu_type


def betty(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``betty`` in this process; (exit code, stdout, stderr)."""
    return betty_in_process(capsys, *argv)


def test_estimate_json_has_the_fields_scripts_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = betty(capsys, "gpu", "estimate", "--model", "meta-llama/Meta-Llama-3-8B", "--method", "lora",
                           "--batch-size", "2", "--seq-len", "4096", "--gpu", "a100-80gb", "--json")
    assert code == 0, err
    data = json.loads(out)
    expected = estimate("Llama-3-8B", method="lora", batch_size=2, seq_len=4096)
    assert data["peak_gib"] == pytest.approx(expected.peak_gib, abs=1e-3)
    assert data["params"] == 8_030_261_248
    assert data["breakdown"] == {name: pytest.approx(value, abs=1e-3) for name, value in expected.breakdown.items()}
    assert data["fits"] == expected.fits(gpu_type("a100-80gb"))


def test_every_documented_option_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = betty(capsys, "gpu", "estimate", "--model", "llama-3.1-70b", "--method", "full",
                           "--precision", "bf16-mixed", "--optimizer", "adamw8bit", "--batch-size", "1",
                           "--seq-len", "8192", "--grad-ckpt", "full", "--gpus", "8", "--sharding", "zero3",
                           "--offload", "optimizer", "--lora-rank", "8", "--framework", "hf", "--gpu", "h100",
                           "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["gpus"] == 8 and data["cpu_gib"] > 0 and data["breakdown"]["optimizer"] == 0


def test_estimate_prints_a_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = betty(capsys, "gpu", "estimate", "--model", "Llama-3.2-1B", "--method", "inference",
                         "--gpu", "t4")
    assert code == 0
    for word in ("weights", "kv cache", "runtime", "peak", "T4", "fits"):
        assert word in out
    peak_line = next(line for line in out.splitlines() if line.strip().startswith("peak"))
    assert f"{estimate('Llama-3.2-1B', method='inference').peak_gib:.2f}" in peak_line


def test_a_config_json_path_works_as_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
              "num_hidden_layers": 16, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
              "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = betty(capsys, "gpu", "estimate", "--model", str(tmp_path / "config.json"),
                           "--method", "inference", "--json")
    assert code == 0, err
    assert json.loads(out)["params"] == 1_235_814_400


def test_models_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = betty(capsys, "gpu", "models", "--json")
    rows = json.loads(out)
    assert code == 0 and {"Llama-3.1-405B", "Mixtral-8x7B", "T5-3B"} <= {row["name"] for row in rows}
    code, text, _ = betty(capsys, "gpu", "models")
    assert "Gemma-2-9B" in text and "9.24B" in text


def test_advise_with_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = betty(capsys, "gpu", "advise", "--model", "llama-3.2-1b", "--method", "full",
                           "--seq-len", "2048", "--grad-ckpt", "full",
                           "--partitions", "gpu=gpu:a100:4,gpu:h100:2", "small=gpu:rtx4090:1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert {p["target"] for p in data["placements"]} == {"gpu/A100-40GB", "gpu/H100-80GB", "small/RTX4090"}
    assert data["fits_somewhere"]


def test_advise_suggests_changes_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = betty(capsys, "gpu", "advise", "--model", "llama-3-8b", "--method", "full",
                         "--batch-size", "4", "--seq-len", "4096", "--gpu-types", "rtx4090=24")
    assert code == 0
    assert "to make it fit" in out and "8 GPUs with FSDP" in out and "does not fit" in out


@pytest.mark.parametrize(("argv", "named"), [
    (["--model", "llama-3-7b", "--method", "inference"], "Llama-3-8B"),
    (["--model", "llama-3-8b", "--method", "full", "--precision", "nf4"], "--precision nf4"),
    (["--model", "llama-3-8b", "--method", "full", "--sharding", "zero3"], "--sharding zero3"),
    (["--model", "llama-3-8b", "--method", "full", "--batch-size", "-4"], "--batch-size"),
    (["--model", "llama-3-8b", "--method", "inference", "--seq-len", "0"], "--seq-len"),
    (["--model", "llama-3-8b", "--method", "inference", "--gpu", "tpu-v5"], "tpu-v5"),
    (["--model", "llama-3-8b", "--method", "lora", "--lora-targets", "attention"], "--lora-targets"),
])
def test_bad_input_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str], argv: list[str], named: str) -> None:
    code, out, err = betty(capsys, "gpu", "estimate", *argv)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("betty: error:") and named in lines[0]


def test_a_malformed_config_names_the_missing_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    code, _, err = betty(capsys, "gpu", "estimate", "--model", str(tmp_path / "config.json"), "--method", "inference")
    assert code == 1 and err.count("\n") == 1 and "num_attention_heads" in err


@pytest.mark.parametrize("argv", [
    ["gpu", "estimate", "--model", "llama-3-8b"],
    ["gpu", "estimate", "--model", "llama-3-8b", "--method", "pretrain"],
    ["gpu", "estimate", "--model", "llama-3-8b", "--method", "full", "--batch-size", "two"],
    ["gpu", "advise", "--method", "full"],
    ["gpu"],
])
def test_argparse_misuse_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = betty(capsys, *argv)
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("betty gpu")


def test_the_installed_command_runs_end_to_end() -> None:
    done = run_betty("gpu", "estimate", "--model", "mistral-7b", "--method", "qlora", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["precision"] == "nf4"
    failed = run_betty("gpu", "estimate", "--model", "nosuchmodel", "--method", "inference", timeout=120)
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1
