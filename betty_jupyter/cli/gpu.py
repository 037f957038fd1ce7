"""``betty gpu estimate|models|advise``: GPU memory before a job is sized.

Other tools script these commands, so their options and the ``--json`` fields are kept
stable: ``peak_gib`` (per GPU), ``breakdown`` (name → GiB), ``params`` and, with
``--gpu``, ``fits``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..gpu import advise, catalog, estimate, gpu_type, parse_partition, resolve_model, targets_from
from ..gpu.hardware import Partition, parse_gpu_type
from ..errors import UsageError
from ..gpu.estimate_options import job_options, request_from
from ..gpu.measured import MIN_PAIRS, calibrated_line, calibration_for, calibrations
from .parser import Parser


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty gpu`` and its actions."""
    gpu = commands.add_parser(
        "gpu", help="estimate GPU memory for a model and say where it fits",
        description="Estimate peak GPU memory per GPU for inference or fine-tuning, and advise on GPUs.",
    )
    gpu.set_defaults(run=run)
    actions = gpu.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    job = job_options()
    estimate = actions.add_parser("estimate", parents=[job], help="peak memory per GPU, as a breakdown")
    estimate.add_argument("--gpu", metavar="TYPE", help="say whether it fits on this GPU type (e.g. a100-80gb)")
    estimate.add_argument("--json", action="store_true", help="one JSON object for scripts")
    estimate.add_argument("--trace", action="store_true",
                          help="run the real step on meta tensors and count its memory (needs the trace extra)")
    estimate.add_argument("--calibrated", action="store_true",
                          help="also the peak corrected by your own measured jobs of this method on --gpu "
                               "(see `betty gpu calibrate`)")
    estimate.add_argument("--dir", type=Path, default=Path("."),
                          help="with --calibrated: the project whose experiments hold the measured peaks (default: here)")
    calibrate = actions.add_parser("calibrate", help="your correction per method and GPU type, from measured peaks")
    calibrate.add_argument("--dir", type=Path, default=Path("."),
                           help="the project whose experiments hold the measured peaks (default: here)")
    calibrate.add_argument("--json", action="store_true", help="one JSON array for scripts")
    models = actions.add_parser("models", help="list the built-in model catalog")
    models.add_argument("--json", action="store_true", help="one JSON array for scripts")
    advise = actions.add_parser("advise", parents=[job], help="where it fits, and what to change when it does not")
    advise.add_argument("--partitions", nargs="+", metavar="NAME=GRES", default=[],
                        help="partitions as name=gres, e.g. gpu=gpu:a100:4,gpu:h100:2 (as sinfo prints GRES)")
    advise.add_argument("--cluster", metavar="NAME", nargs="?", const="", default=None,
                        help="read the partitions from a configured cluster (no NAME: the default cluster)")
    advise.add_argument("--gpu-types", nargs="+", metavar="TYPE[=GIB]", default=[],
                        help="GPU types to consider, e.g. a100-80gb h100 mygpu=48")
    advise.add_argument("--gpu", metavar="TYPE", help="report the largest batch and context on this GPU type")
    advise.add_argument("--json", action="store_true", help="one JSON object for scripts")
    advise.add_argument("--trace", action="store_true",
                        help="place the job as asked by its traced peak (needs the trace extra)")


def run(args: argparse.Namespace) -> int:
    """Carry out one ``betty gpu`` action."""
    if args.action == "models":
        return _models(args.json)
    if args.action == "advise":
        return _advise(args)
    if args.action == "calibrate":
        return _calibrate(args)
    return _estimate(args)


def _estimate(args: argparse.Namespace) -> int:
    from ..gpu.report import render_estimate  # lazy: the report; only `betty gpu estimate` needs it

    if args.calibrated and not args.gpu:
        raise UsageError("--calibrated needs --gpu TYPE: the correction is per method and GPU type")
    result = estimate(args.model, request_from(args))
    gpu = gpu_type(args.gpu) if args.gpu else None
    if args.trace:
        return _traced(args, result, gpu)
    calibration = None
    if args.calibrated and gpu is not None:
        calibration = calibration_for(_calibrations(args.dir), result.request.method, gpu.name)
    if args.json:
        data = result.as_dict(gpu)
        if args.calibrated and gpu is not None:
            data["calibrated"] = _calibrated_record(result.peak_gib, calibration, result.request.method, gpu.name)
        print(json.dumps(data, indent=2))
    else:
        print(render_estimate(result, gpu))
        if args.calibrated and gpu is not None:
            print("  " + calibrated_line(result.peak_gib, calibration, result.request.method, gpu.name))
    return 0


def _calibrated_record(peak_gib: float, calibration: Any, method: str, gpu: str) -> dict[str, Any]:
    """``--json``'s ``calibrated``: the correction, ``peak_gib`` corrected (None when there is none) and the line."""
    record: dict[str, Any] = calibration.as_dict() if calibration is not None else {"method": method, "gpu": gpu, "factor": None,
                                                                     "pairs": 0}
    factor = record.get("factor")
    record["peak_gib"] = round(peak_gib * factor, 3) if factor else None
    record["line"] = calibrated_line(peak_gib, calibration, method, gpu)
    return record


def _calibrations(folder: Path) -> list[Any]:
    """Every (method, GPU type) calibration the project's measured experiments give."""
    # lazy: the ledger; only `betty gpu calibrate` and `--calibrated` read it
    from ..experiments.gpu_peak import measured_records
    from ..experiments.workspace import Workspace

    workspace = Workspace.at(folder)
    if not workspace.ledger_path.exists():
        raise UsageError(f"no experiments are recorded in {workspace.root}, so there are no measured peaks; submit "
                         "with the GPU peak measured there first")
    return calibrations(measured_records(workspace.root))


def _calibrate(args: argparse.Namespace) -> int:
    found = _calibrations(args.dir)
    if args.json:
        print(json.dumps([item.as_dict() for item in found], indent=2))
        return 0
    if not found:
        print("no measured GPU peak has an estimate beside it yet: submit with the peak measured and the job's "
              "gpu_estimate, then calibrate")
        return 0
    print(f"measured / estimated GPU peak, per method and GPU type ({MIN_PAIRS} jobs needed for a correction):")
    for item in found:
        print(f"  {item.line()}")
    return 0


def _traced(args: argparse.Namespace, formula: Any, gpu: Any) -> int:
    """The traced estimate beside the formula one; progress on stderr; one line and exit 2 without the extra."""
    from ..gpu.report import render_traced  # lazy: the trace's report; only `betty gpu estimate --trace` needs it

    traced = _trace_or_say(args.model, formula.request, gpu)
    if traced is None:
        return 2
    print(json.dumps(traced.as_dict(formula), indent=2) if args.json else render_traced(traced, formula, gpu))
    return 0


def _trace_or_say(model: Any, request: Any, gpu: Any) -> Any:
    """The traced estimate, telling each phase on stderr; None, with the one line to install the extra, without it."""
    from ..gpu.trace import TraceUnavailableError, trace_estimate  # lazy: only --trace needs it (torch lazier still)

    def progress(phase: str) -> None:
        print(f"betty: tracing: {phase}…", file=sys.stderr, flush=True)

    try:
        return trace_estimate(model, request, gpu, progress)
    except TraceUnavailableError as error:
        print(f"betty: {error}", file=sys.stderr)
        return None


def _models(as_json: bool) -> int:
    rows = [_model_row(entry.architecture, entry.published_params) for entry in catalog()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'model':<16}{'params':>9}  {'layers':>6} {'hidden':>6} {'heads':>5} {'kv':>3} {'vocab':>7}  context")
    for row in rows:
        print(f"{row['name']:<16}{row['params'] / 1e9:>8.2f}B  {row['layers']:>6} {row['hidden']:>6} "
              f"{row['heads']:>5} {row['kv_heads']:>3} {row['vocab']:>7}  {row['max_context']}")
    return 0


def _model_row(arch: Any, published: float) -> dict[str, Any]:
    return {
        "name": arch.name, "params": arch.params(), "published_params": published, "layers": arch.layers,
        "hidden": arch.hidden, "heads": arch.heads, "kv_heads": arch.kv_heads, "head_dim": arch.head_dim,
        "intermediate": arch.intermediate, "vocab": arch.vocab, "experts": arch.experts,
        "tied_embeddings": arch.tied_embeddings, "max_context": arch.max_context,
    }


def _advise(args: argparse.Namespace) -> int:
    arch = resolve_model(args.model)
    partitions = [parse_partition(text) for text in args.partitions]
    if args.cluster is not None:
        partitions += _cluster_partitions(args.cluster or None)
    types = [parse_gpu_type(text) for text in args.gpu_types]
    limits_on = gpu_type(args.gpu) if args.gpu else None
    request = request_from(args).checked()
    traced = None
    if args.trace:
        traced = _trace_or_say(arch, request, limits_on)
        if traced is None:
            return 2
    advice = advise(arch, request, targets_from(partitions, types), limits_on, traced)
    print(json.dumps(advice.as_dict(), indent=2) if args.json else advice.summary())
    return 0


def _cluster_partitions(cluster: str | None) -> list[Any]:
    """The GPU partitions of a configured cluster, read with ``sinfo`` through its transport."""
    # lazy: the Slurm client and traitlets; only `betty gpu advise` needs them
    from ..cluster.slurm import SlurmClient
    from ..cluster.sync import run_sync
    from ..config import load_config

    transport = load_config().profile(cluster).open_transport()
    try:
        frame = run_sync(SlurmClient(transport).partitions())
    finally:
        run_sync(transport.close())
    return [Partition(str(row["partition"]), dict(row["gpu_types"])) for row in frame.to_dict("records") if row["gpu_types"]]
