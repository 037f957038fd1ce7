"""GPU memory: how much one job needs per GPU, where it fits, and what to change when it does not.

::

    from betty_jupyter.gpu import EstimateRequest, estimate

    result = estimate("Llama-3.1-8B", EstimateRequest(method="lora", batch_size=4, seq_len=4096))
    result.peak_gib, result.breakdown

This package imports nothing from Jupyter and nothing from the cluster or wiki layers:
partitions come in as plain data. matplotlib is imported by :mod:`.plots` only, on use; the
traced estimate (:mod:`.trace`, PyTorch and transformers: the optional ``trace`` extra) only
when one is asked for.
"""

from __future__ import annotations

from .advice import Advice, Change, Placement, Target, advise, largest_fitting, targets_from
from .architecture import Architecture, load_config
from .model_catalog import CatalogEntry, catalog, find_model, resolve_model
from .estimate import Estimate, estimate
from .hardware import GPU_TYPES, GpuType, Partition, gpu_type, parse_gres, parse_partition
from .frameworks import PROFILES, FrameworkProfile, framework_profile
from .request import EstimateRequest

__all__ = [
    "GPU_TYPES",
    "PROFILES",
    "Advice",
    "Architecture",
    "CatalogEntry",
    "Change",
    "Estimate",
    "EstimateRequest",
    "FrameworkProfile",
    "GpuType",
    "Partition",
    "Placement",
    "Target",
    "advise",
    "catalog",
    "estimate",
    "find_model",
    "framework_profile",
    "gpu_type",
    "largest_fitting",
    "load_config",
    "parse_gres",
    "parse_partition",
    "resolve_model",
    "targets_from",
]
