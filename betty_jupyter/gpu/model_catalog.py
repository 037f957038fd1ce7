"""Built-in model catalog: exact shapes from each model's published ``config.json``.

Every entry carries the parameter count its authors publish (model card or paper), and a
test checks that the count derived from the shape is within 1% of it. Names are looked up
forgivingly: ``meta-llama/Llama-2-7b-hf``, ``llama-2-7b`` and ``Llama 2 7B`` are one model, and
``mistralai/Mistral-7B-Instruct-v0.1`` is ``Mistral-7B-v0.1`` (the version stays: v0.3 is another shape).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import GpuEstimateError
from .architecture import Architecture, load_config


@dataclass(frozen=True)
class CatalogEntry:
    """A catalog model: its shape, its published size and where that size comes from."""

    architecture: Architecture
    published_params: float
    source: str
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The display name, e.g. ``Llama-3.1-8B``."""
        return self.architecture.name


def _llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int, vocab: int,
           **extra: Any) -> Architecture:
    head_dim = extra.pop("head_dim", hidden // heads)
    extra.setdefault("model_type", "llama")
    return Architecture(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                        head_dim=head_dim, intermediate=intermediate, vocab=vocab, **extra)


_ENTRIES: tuple[CatalogEntry, ...] = (
    CatalogEntry(_llama("Llama-2-7B", 32, 4096, 32, 32, 11008, 32000), 6.74e9,
                 "meta-llama/Llama-2-7b-hf model card (6.74B)", ("llama2-7b",)),
    CatalogEntry(_llama("Llama-2-13B", 40, 5120, 40, 40, 13824, 32000), 13.0e9,
                 "meta-llama/Llama-2-13b-hf model card (13.0B)", ("llama2-13b",)),
    CatalogEntry(_llama("Llama-2-70B", 80, 8192, 64, 8, 28672, 32000), 69.0e9,
                 "meta-llama/Llama-2-70b-hf model card (69.0B)", ("llama2-70b",)),
    CatalogEntry(_llama("CodeLlama-34B", 48, 8192, 64, 8, 22016, 32000, max_context=16384), 33.7e9,
                 "codellama/CodeLlama-34b-hf model card (33.7B)", ("code-llama-34b", "codellama-34b-python")),
    CatalogEntry(_llama("Llama-3-8B", 32, 4096, 32, 8, 14336, 128256, max_context=8192), 8.03e9,
                 "meta-llama/Meta-Llama-3-8B model card (8.03B)", ("llama3-8b",)),
    CatalogEntry(_llama("Llama-3-70B", 80, 8192, 64, 8, 28672, 128256, max_context=8192), 70.6e9,
                 "meta-llama/Meta-Llama-3-70B model card (70.6B)", ("llama3-70b",)),
    CatalogEntry(_llama("Llama-3.1-8B", 32, 4096, 32, 8, 14336, 128256, max_context=131072), 8.03e9,
                 "meta-llama/Llama-3.1-8B model card (8.03B)", ("llama3.1-8b",)),
    CatalogEntry(_llama("Llama-3.1-70B", 80, 8192, 64, 8, 28672, 128256, max_context=131072), 70.6e9,
                 "meta-llama/Llama-3.1-70B model card (70.6B)", ("llama3.1-70b", "llama-3.3-70b")),
    CatalogEntry(_llama("Llama-3.1-405B", 126, 16384, 128, 8, 53248, 128256, max_context=131072), 406e9,
                 "meta-llama/Llama-3.1-405B model card (406B)", ("llama3.1-405b",)),
    CatalogEntry(_llama("Llama-3.2-1B", 16, 2048, 32, 8, 8192, 128256, head_dim=64, tied_embeddings=True,
                        max_context=131072), 1.24e9,
                 "meta-llama/Llama-3.2-1B model card (1.24B)", ("llama3.2-1b",)),
    CatalogEntry(_llama("Llama-3.2-3B", 28, 3072, 24, 8, 8192, 128256, tied_embeddings=True,
                        max_context=131072), 3.21e9,
                 "meta-llama/Llama-3.2-3B model card (3.21B)", ("llama3.2-3b",)),
    CatalogEntry(_llama("Mistral-7B", 32, 4096, 32, 8, 14336, 32000, sliding_window=4096,
                        sliding_window_layers=32, max_context=32768, model_type="mistral"), 7.24e9,
                 "mistralai/Mistral-7B-v0.1 model card (7.24B)", ("mistral-7b-v0.1",)),
    CatalogEntry(_llama("Mixtral-8x7B", 32, 4096, 32, 8, 14336, 32000, experts=8, experts_per_token=2,
                        max_context=32768, model_type="mixtral"), 46.7e9,
                 "mistralai/Mixtral-8x7B-v0.1 model card (46.7B)", ("mixtral-8x7b-v0.1",)),
    CatalogEntry(_llama("Qwen2.5-7B", 28, 3584, 28, 4, 18944, 152064, qkv_bias=True, max_context=131072,
                        model_type="qwen2"), 7.61e9,
                 "Qwen/Qwen2.5-7B model card (7.61B)", ("qwen2.5-7b",)),
    CatalogEntry(_llama("Qwen2.5-72B", 80, 8192, 64, 8, 29568, 152064, qkv_bias=True, max_context=131072,
                        model_type="qwen2"), 72.7e9,
                 "Qwen/Qwen2.5-72B model card (72.7B)", ("qwen2.5-72b",)),
    CatalogEntry(_llama("Gemma-2-9B", 42, 3584, 16, 8, 14336, 256000, head_dim=256, tied_embeddings=True,
                        norms_per_layer=4, sliding_window=4096, sliding_window_layers=21, max_context=8192,
                        score_softcap=True, model_type="gemma2"), 9.24e9,
                 "google/gemma-2-9b model card (9.24B)", ("gemma2-9b",)),
    # Phi-3 fuses q, k, v (and gate, up) into one module each; the entry keeps them apart, Llama-shaped, as
    # the calibration grid traced it (the same parameters; a phi3 config.json is traced with its fused modules)
    CatalogEntry(_llama("Phi-3-mini", 32, 3072, 32, 32, 8192, 32064, max_context=4096), 3.82e9,
                 "microsoft/Phi-3-mini-4k-instruct model card (3.82B)", ("phi-3-mini-4k", "phi3-mini")),
    CatalogEntry(Architecture(name="BERT-large", kind="encoder", layers=24, hidden=1024, heads=16, kv_heads=16,
                              head_dim=64, intermediate=4096, vocab=30522, mlp="plain", layer_norm=True,
                              linear_bias=True, qkv_bias=True, position_embeddings=512, token_types=2,
                              dropout=True, max_context=512), 335e6,
                 "google-bert/bert-large-uncased model card (335M)", ("bert-large-uncased", "bert-large-cased")),
    CatalogEntry(Architecture(name="T5-3B", kind="encoder-decoder", layers=24, encoder_layers=24, hidden=1024,
                              heads=32, kv_heads=32, head_dim=128, intermediate=16384, vocab=32128,
                              tied_embeddings=True, mlp="plain", relative_attention_buckets=32, dropout=True,
                              max_context=512), 2.85e9,
                 "google-t5/t5-3b model card (2.85B); bigscience/T0_3B shares its shape", ("t0-3b", "t0")),
)

_SUFFIXES = ("-hf", "-instruct", "-chat", "-it", "-base", "-uncased", "-cased")


def catalog() -> tuple[CatalogEntry, ...]:
    """Every model in the catalog, in display order."""
    return _ENTRIES


def _normalize(name: str) -> str:
    key = name.strip().lower().rsplit("/", 1)[-1]
    key = re.sub(r"[\s_]+", "-", key)
    key = re.sub(r"^meta-llama-", "llama-", key)
    version = re.search(r"-v\d+(\.\d+)*$", key)  # Mistral-7B-Instruct-v0.1: the version names the shape
    tail = version.group(0) if version and version.start() > 0 else ""
    key = key[: len(key) - len(tail)]
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                key, changed = key[: -len(suffix)], True
    return key + tail


def _index() -> dict[str, CatalogEntry]:
    index: dict[str, CatalogEntry] = {}
    for entry in _ENTRIES:
        for alias in (entry.name, *entry.aliases):
            index[_normalize(alias)] = entry
    return index


def find_model(name: str) -> CatalogEntry:
    """The catalog entry called ``name``; an error listing the closest names when there is none."""
    index = _index()
    entry = index.get(_normalize(name))
    if entry is not None:
        return entry
    names = {key: candidate.name for key, candidate in index.items()}
    close = difflib.get_close_matches(_normalize(name), list(names), n=4, cutoff=0.4)
    suggestions = list(dict.fromkeys(names[key] for key in close))
    hint = f"closest catalog names: {', '.join(suggestions)}" if suggestions else "no catalog name is close"
    raise GpuEstimateError(
        f"unknown model {name!r}; {hint} (see `betty gpu models`, or pass the path to its config.json)"
    )


def resolve_model(model: str | Path | Mapping[str, Any] | Architecture) -> Architecture:
    """An architecture from a catalog name, a ``config.json`` path or dict, or an architecture."""
    if isinstance(model, Architecture):
        return model
    if isinstance(model, Mapping):
        return load_config(model)
    text = str(model)
    if text.endswith(".json") or Path(text).is_dir() or "\\" in text or text.startswith((".", "~")):
        return load_config(Path(text).expanduser())
    if Path(text).is_file():
        return load_config(Path(text))
    return find_model(text).architecture
