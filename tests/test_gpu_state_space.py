"""State-space models and their hybrids (Mamba, Jamba, Falcon-H1, Zamba, …) are refused by name, in one line that
says why; the list is held to transformers' own: every family whose config has a Mamba layer's settings is in it."""

from __future__ import annotations

import importlib.util
import inspect

import pytest

from betty_jupyter.errors import GpuEstimateError
from betty_jupyter.gpu import load_config
from betty_jupyter.gpu.architecture import EXACT_FAMILIES, STATE_SPACE_FAMILIES

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
SSM_SETTINGS = ("mamba", "ssm", "state_size", "conv_L_cache")
"""What a config's arguments are called when its layers keep a recurrent state (Mamba's ``state_size``, hybrids'
``mamba_d_state``/``ssm_state_size``, LFM2's short convolution cache)."""


@pytest.mark.parametrize("model_type", STATE_SPACE_FAMILIES)
def test_a_state_space_model_is_refused_by_name_in_one_line(model_type: str) -> None:
    config = {"model_type": model_type, "hidden_size": 1024, "num_hidden_layers": 24, "vocab_size": 65536,
              "num_attention_heads": 16, "intermediate_size": 4096}
    with pytest.raises(GpuEstimateError) as refused:
        load_config(config)
    message = str(refused.value)
    assert f"does not size '{model_type}' models" in message and "state-space" in message
    assert "\n" not in message and "measured-peaks" in message


def test_a_state_space_model_under_text_config_is_refused_too() -> None:
    with pytest.raises(GpuEstimateError, match="state-space"):
        load_config({"model_type": "llava", "text_config": {"model_type": "jamba", "hidden_size": 64}})


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_every_state_space_family_of_transformers_is_in_the_list() -> None:
    from transformers import CONFIG_MAPPING

    found = set()
    for model_type in CONFIG_MAPPING.keys():
        try:
            arguments = inspect.signature(CONFIG_MAPPING[model_type].__init__).parameters
        except (ImportError, ValueError, TypeError):
            continue
        if any(setting in argument for argument in arguments for setting in SSM_SETTINGS):
            found.add(model_type)
    assert {"mamba", "jamba", "falcon_h1", "zamba2"} <= found  # the detection itself works
    assert found == set(STATE_SPACE_FAMILIES), (found ^ set(STATE_SPACE_FAMILIES))
    assert not set(STATE_SPACE_FAMILIES) & set(EXACT_FAMILIES)
