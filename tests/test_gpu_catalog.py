"""The model catalog: published sizes, forgiving names, and Hugging Face config.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from betty_jupyter.errors import GpuEstimateError
from betty_jupyter.gpu import catalog, find_model, load_config, resolve_model

# Exact counts of sum(p.numel() for p in model.parameters()) for a few models, as Hugging Face
# reports them; the catalog's published sizes are the rounded model-card figures.
EXACT = {
    "Llama-2-7B": 6_738_415_616,
    "Llama-3-8B": 8_030_261_248,
    "Llama-3.2-3B": 3_212_749_824,
    "Mixtral-8x7B": 46_702_792_704,
    "BERT-large": 335_141_888,
    "T5-3B": 2_851_598_336,
}

LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize("entry", catalog(), ids=lambda entry: entry.name)
def test_every_catalog_model_matches_its_published_size(entry) -> None:
    computed = entry.architecture.params()
    assert abs(computed - entry.published_params) / entry.published_params < 0.01, entry.source


@pytest.mark.parametrize(("name", "count"), EXACT.items())
def test_parameter_counts_are_exact_where_the_exact_count_is_known(name: str, count: int) -> None:
    assert find_model(name).architecture.params() == count


def test_catalog_covers_the_models_researchers_ask_for() -> None:
    names = {entry.name for entry in catalog()}
    wanted = {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3-8B", "Llama-3-70B", "Llama-3.1-8B",
              "Llama-3.1-70B", "Llama-3.1-405B", "Llama-3.2-1B", "Llama-3.2-3B", "Mistral-7B", "Mixtral-8x7B",
              "Qwen2.5-7B", "Qwen2.5-72B", "Gemma-2-9B", "Phi-3-mini", "BERT-large", "T5-3B"}
    assert wanted <= names


@pytest.mark.parametrize("spelling", ["meta-llama/Llama-2-7b-hf", "llama-2-7b", "Llama 2 7B", "LLAMA2-7B",
                                      "meta-llama/Llama-2-7b-chat-hf"])
def test_names_are_found_forgivingly(spelling: str) -> None:
    assert find_model(spelling).name == "Llama-2-7B"


def test_hub_names_with_organisation_prefixes_resolve() -> None:
    assert find_model("meta-llama/Meta-Llama-3-8B-Instruct").name == "Llama-3-8B"
    assert find_model("bigscience/T0_3B").name == "T5-3B"
    assert find_model("google-bert/bert-large-uncased").name == "BERT-large"


def test_an_unknown_model_lists_the_closest_catalog_names() -> None:
    with pytest.raises(GpuEstimateError) as caught:
        find_model("llama-3-7b")
    message = str(caught.value)
    assert "Llama-3-8B" in message and "betty gpu models" in message
    assert "\n" not in message


def test_a_config_dict_gives_the_catalog_shape() -> None:
    loaded = load_config(LLAMA3_8B_CONFIG, name="Llama-3-8B")
    assert loaded == find_model("Llama-3-8B").architecture


def test_a_config_file_and_its_directory_both_load(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B_CONFIG))
    assert resolve_model(str(tmp_path / "config.json")).params() == 8_030_261_248
    assert resolve_model(tmp_path).kv_heads == 8


def test_gemma2_config_has_alternating_sliding_window_layers() -> None:
    config = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16,
              "num_hidden_layers": 42, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000,
              "sliding_window": 4096}
    loaded = load_config(config)
    assert loaded.sliding_window_layers == 21 and loaded.tied_embeddings
    assert loaded.params() == find_model("Gemma-2-9B").architecture.params()


def test_mixtral_config_reads_experts() -> None:
    config = {**LLAMA3_8B_CONFIG, "model_type": "mixtral", "vocab_size": 32000, "num_local_experts": 8,
              "num_experts_per_tok": 2, "sliding_window": None}
    loaded = load_config(config)
    assert loaded.params() == find_model("Mixtral-8x7B").architecture.params()
    assert loaded.active_params() < loaded.params() / 3


def test_t5_and_bert_configs_load() -> None:
    t5 = {"model_type": "t5", "d_model": 1024, "d_kv": 128, "d_ff": 16384, "num_heads": 32, "num_layers": 24,
          "vocab_size": 32128, "feed_forward_proj": "relu"}
    bert = {"model_type": "bert", "hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16,
            "num_hidden_layers": 24, "vocab_size": 30522}
    assert load_config(t5).params() == EXACT["T5-3B"]
    assert load_config(bert).params() == EXACT["BERT-large"]


def test_a_config_without_a_required_field_names_it() -> None:
    broken = {key: value for key, value in LLAMA3_8B_CONFIG.items() if key != "num_hidden_layers"}
    with pytest.raises(GpuEstimateError, match="num_hidden_layers"):
        load_config(broken)


def test_a_field_of_the_wrong_type_is_named() -> None:
    with pytest.raises(GpuEstimateError, match="hidden_size"):
        load_config({**LLAMA3_8B_CONFIG, "hidden_size": "big"})


@pytest.mark.parametrize("text", ["{not json", "[1, 2, 3]"])
def test_a_file_that_is_not_a_config_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(GpuEstimateError, match="config"):
        load_config(path)


def test_a_missing_config_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(GpuEstimateError, match="no config.json"):
        resolve_model(str(tmp_path / "nowhere" / "config.json"))


@pytest.mark.parametrize("name, model", [
    ("Mistral-7B-Instruct-v0.1", "Mistral-7B"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"),
    ("Mixtral-8x7B-v0.1", "Mixtral-8x7B"),
])
def test_a_version_suffixed_name_is_found(name: str, model: str) -> None:
    assert find_model(name).name == model


def test_another_version_is_not_taken_for_the_catalog_one() -> None:
    with pytest.raises(GpuEstimateError, match="unknown model 'Mistral-7B-Instruct-v0.3'"):
        find_model("Mistral-7B-Instruct-v0.3")  # v0.3 has another vocabulary and no sliding window
