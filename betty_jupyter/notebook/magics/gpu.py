"""``%betty gpu``: GPU memory per GPU for one job, as ``betty gpu estimate`` says it, or sliders to try shapes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from ...errors import UsageError
from ..display import shown_as
from .base import Connected
from .parsing import MagicParser


class GpuCommands(Connected):
    """The GPU memory estimate and its calculator."""

    def gpu_commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        """The commands of this module."""
        return {"gpu": (self._gpu_parser, self._gpu)}

    @staticmethod
    def _gpu_parser() -> MagicParser:
        from ...gpu.estimate_options import job_options  # lazy: the GPU options; only `%betty gpu` needs them

        parser = MagicParser(prog="%betty gpu", parents=[job_options()], add_help=True,
                             description="GPU memory per GPU for one job (the options of `betty gpu estimate`); "
                             "`%betty gpu calculator` opens sliders instead")
        parser.add_argument("action", nargs="?", choices=["estimate", "calculator"], default="estimate")
        parser.add_argument("--gpu", metavar="TYPE", help="say whether it fits on this GPU type (e.g. a100-80gb)")
        parser.add_argument("--trace", action="store_true",
                            help="run the real step on meta tensors and count its memory (needs the trace extra)")
        for action in parser._actions:
            if action.dest in ("model", "method"):
                action.required = False
        return parser

    def _gpu(self, args: argparse.Namespace, cell: str | None) -> Any:
        # lazy: ipywidgets and the estimator; `%load_ext` never needs them
        from ...gpu import estimate, gpu_type
        from ...gpu.estimate_options import request_from
        from ..widgets.gpu import GpuCalculator

        if args.action == "calculator":
            shape = {"batch_size": args.batch_size, "seq_len": args.seq_len, "gpus": args.gpus}
            return GpuCalculator(model=args.model or "Llama-3.1-8B", method=args.method or "lora", **shape)
        if not args.model or not args.method:
            raise UsageError("%betty gpu: --model and --method are needed (or `%betty gpu calculator`)")
        result = estimate(args.model, request_from(args))
        gpus = [gpu_type(args.gpu)] if args.gpu else []
        if args.trace:
            return self._traced(args.model, result, gpus)
        measured = _measured_lines(result, gpus[0].name if gpus else None)
        if args.gpu or measured:
            from ..widgets.gpu import EstimateView  # lazy: ipywidgets; `%load_ext` never needs them

            return shown_as(result, EstimateView(result, gpus, measured))
        return result

    @staticmethod
    def _traced(model: str, formula: Any, gpus: list[Any]) -> Any:
        """The traced estimate, shown beside the formula's with its timeline; each phase told while it runs."""
        # lazy: ipywidgets, and the trace (torch itself is lazier still); only `%betty gpu --trace` needs them
        from ...gpu.trace import trace_estimate
        from ..widgets.gpu import TracedView
        from ..widgets.progress import stages

        with stages(f"tracing one step of {formula.model}") as tell:
            traced = trace_estimate(model, formula.request, gpus[0] if gpus else None, tell)
        return shown_as(traced, TracedView(traced, formula, gpus))


def _measured_lines(result: Any, gpu: str | None) -> list[str]:
    """What the person's measured jobs of the estimate's model and method say beside it, in the project holding the
    notebook's folder (``measured_beside``); none outside a project."""
    # lazy: the ledger and the measured peaks; only an estimate shown in a notebook reads them
    from ...experiments.gpu_peak import measured_records
    from ...experiments.workspace import project_holding
    from ...gpu.measured import measured_beside

    root = project_holding(Path.cwd())
    if root is None:
        return []
    lines: list[str] = measured_beside(measured_records(root), result.model, result.request.method, gpu,
                                       result.peak_gib)["lines"]
    return lines
