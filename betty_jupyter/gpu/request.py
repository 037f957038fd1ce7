"""What a researcher asks Betty to size: one job's method, precision, batch, parallelism.

An :class:`EstimateRequest` is plain, immutable data; :meth:`EstimateRequest.checked`
refuses impossible combinations with one line that names the option to change, using
the CLI's spelling of it so the message reads the same from a notebook or a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from ..errors import GpuEstimateError
from .architecture import ATTENTION_MODULES, MLP_MODULES, Architecture
from .frameworks import FrameworkProfile, framework_profile

Method = Literal["inference", "full", "lora", "qlora"]
Precision = Literal["fp32", "bf16-mixed", "bf16", "fp16", "int8", "nf4"]
Optimizer = Literal["adamw", "adamw8bit", "paged-adamw", "paged-adamw8bit", "sgd", "adafactor"]
Checkpointing = Literal["none", "selective", "op", "layer", "full"]
Sharding = Literal["none", "ddp", "fsdp", "zero1", "zero2", "zero3"]
Offload = Literal["none", "optimizer", "params"]
KvDtype = Literal["auto", "fp32", "bf16", "fp16", "fp8"]
Attention = Literal["flash", "eager"]

METHODS: tuple[str, ...] = get_args(Method)
PRECISIONS: tuple[str, ...] = get_args(Precision)
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
CHECKPOINTING: tuple[str, ...] = get_args(Checkpointing)
SHARDING: tuple[str, ...] = get_args(Sharding)
OFFLOAD: tuple[str, ...] = get_args(Offload)
KV_DTYPES: tuple[str, ...] = get_args(KvDtype)
ATTENTION: tuple[str, ...] = get_args(Attention)
LORA_MODULES: tuple[str, ...] = ATTENTION_MODULES + MLP_MODULES
ALL_LINEAR = "all-linear"

# Storage bytes of one weight for each precision (the base model's weights for int8/nf4).
WEIGHT_BYTES: dict[str, float] = {"fp32": 4, "bf16-mixed": 2, "bf16": 2, "fp16": 2, "int8": 1, "nf4": 0.5}
KV_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class EstimateRequest:
    """One job to size. Defaults describe a plain single-GPU run; ``None`` means "the framework's default".

    ``batch_size`` is the micro-batch per GPU; ``seq_len`` is the training sequence length
    or, for inference, the full context (prompt plus generated tokens) of each sequence.
    The last group of options are stack-specific switches (``torch.compile``, a chunked
    loss, torchtune's activation offloading and optimizer-in-backward, eager attention,
    FSDP2's mixed-precision policy). ``grad_ckpt`` ``op`` and ``layer`` are torchtitan's
    selective checkpointing (``selective_ac_option = "op"`` or an int): ``layer`` checkpoints
    every ``ckpt_every``-th layer.
    """

    method: Method = "inference"
    precision: Precision | None = None
    optimizer: Optimizer = "adamw"
    batch_size: int = 1
    seq_len: int = 2048
    grad_ckpt: Checkpointing = "none"
    gpus: int = 1
    sharding: Sharding = "none"
    offload: Offload = "none"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    framework: str = "hf"
    kv_dtype: KvDtype = "auto"
    grad_accum: int = 1
    double_quant: bool = True
    compiled: bool = False
    chunked_loss: bool = False
    activation_offload: bool = False
    optimizer_in_backward: bool = False
    attention: Attention = "flash"
    ckpt_every: int = 2
    fsdp_mixed_precision: bool = False

    @property
    def training(self) -> bool:
        """Whether this is a training job (anything but inference)."""
        return self.method != "inference"

    @property
    def profile(self) -> FrameworkProfile:
        """The framework profile this request runs under."""
        return framework_profile(self.framework)

    @property
    def resolved_precision(self) -> str:
        """The precision in effect: the given one, nf4 for QLoRA, else the framework's default."""
        if self.precision is not None:
            return self.precision
        return "nf4" if self.method == "qlora" else self.profile.default_precision

    @property
    def adapters(self) -> bool:
        """Whether only LoRA adapters are trained (LoRA or QLoRA)."""
        return self.method in ("lora", "qlora")

    @property
    def sharded(self) -> bool:
        """Whether model states are split across GPUs (FSDP or ZeRO)."""
        return self.sharding in ("fsdp", "zero1", "zero2", "zero3")

    def changed(self, **changes: object) -> EstimateRequest:
        """A copy with some options changed, checked again."""
        return replace(self, **changes).checked()  # type: ignore[arg-type]

    def checked(self) -> EstimateRequest:
        """This request if it is possible; a :class:`GpuEstimateError` naming the bad option if not."""
        self._check_choices()
        self._check_sizes()
        self._check_method()
        self._check_parallelism()
        return self

    def _check_choices(self) -> None:
        for option, value, allowed in (
            ("--method", self.method, METHODS),
            ("--precision", self.precision or PRECISIONS[0], PRECISIONS),
            ("--optimizer", self.optimizer, OPTIMIZERS),
            ("--grad-ckpt", self.grad_ckpt, CHECKPOINTING),
            ("--sharding", self.sharding, SHARDING),
            ("--offload", self.offload, OFFLOAD),
            ("--kv-dtype", self.kv_dtype, KV_DTYPES),
            ("--attention", self.attention, ATTENTION),
        ):
            if value not in allowed:
                raise GpuEstimateError(f"{option} {value!r} is not one of {', '.join(allowed)}")
        unknown = [module for module in self.lora_targets if module not in LORA_MODULES]
        if unknown:
            raise GpuEstimateError(
                f"--lora-targets {','.join(unknown)} unknown; use {ALL_LINEAR} or some of {','.join(LORA_MODULES)}"
            )
        framework_profile(self.framework)  # an unknown framework is refused here

    def _check_sizes(self) -> None:
        for option, value in (
            ("--batch-size", self.batch_size), ("--seq-len", self.seq_len), ("--gpus", self.gpus),
            ("--lora-rank", self.lora_rank), ("--grad-accum", self.grad_accum), ("--ckpt-every", self.ckpt_every),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise GpuEstimateError(f"{option} must be a whole number of at least 1 (got {value!r})")

    def _check_method(self) -> None:
        precision = self.resolved_precision
        if self.method == "qlora" and precision != "nf4":
            raise GpuEstimateError(
                f"--method qlora stores the base model in nf4, not {precision}; drop --precision or use --method lora"
            )
        if self.method == "full" and precision in ("int8", "nf4"):
            raise GpuEstimateError(
                f"--precision {precision} cannot be used with --method full: quantized weights cannot be trained; "
                "use --method qlora (nf4) or --method lora (int8)"
            )
        if self.adapters and not self.lora_targets:
            raise GpuEstimateError("--lora-targets is empty; name at least one module, e.g. q_proj,v_proj")
        if self.training and not self.profile.training:
            raise GpuEstimateError(f"--framework {self.framework} only serves models; use hf, torchtune or litgpt")
        if not self.training and not self.profile.inference:
            raise GpuEstimateError(f"--framework {self.framework} does not serve models; use hf or vllm")
        if self.optimizer_in_backward and self.grad_accum > 1:
            raise GpuEstimateError("--optimizer-in-backward needs --grad-accum 1 (gradients are freed as they appear)")
        if self.grad_ckpt == "op" and self.adapters:
            raise GpuEstimateError("--grad-ckpt op counts full fine-tuning's matmuls; use --grad-ckpt full or layer "
                                   "with LoRA")
        if self.ckpt_every != 2 and self.grad_ckpt != "layer":
            raise GpuEstimateError("--ckpt-every is for --grad-ckpt layer (every Nth layer checkpointed)")
        if not self.training:
            self._check_inference()

    def _check_inference(self) -> None:
        training_only = (
            (self.optimizer != "adamw", f"--optimizer {self.optimizer}"),
            (self.optimizer_in_backward, "--optimizer-in-backward"),
            (self.chunked_loss, "--chunked-loss"),
            (self.grad_ckpt in ("op", "layer"), f"--grad-ckpt {self.grad_ckpt}"),
        )
        for given, spelt in training_only:
            if given:
                raise GpuEstimateError(f"{spelt} is for training; drop it for --method inference")

    def _check_parallelism(self) -> None:
        if not self.training:
            if self.sharding != "none" or self.offload != "none":
                raise GpuEstimateError(
                    "--sharding and --offload are for training; for inference on several GPUs pass --gpus N "
                    "(tensor parallel)"
                )
            return
        if self.sharding != "none" and self.gpus < 2:
            raise GpuEstimateError(
                f"--sharding {self.sharding} needs --gpus 2 or more (it splits or copies work across GPUs)"
            )
        if self.sharding == "none" and self.gpus > 1:
            raise GpuEstimateError(
                f"--gpus {self.gpus} needs --sharding (ddp, fsdp or zero1/zero2/zero3) to say how GPUs share the work"
            )
        if self.offload == "optimizer" and not self.sharded:
            raise GpuEstimateError("--offload optimizer needs --sharding fsdp or zero1/zero2/zero3 (ZeRO-Offload)")
        if self.offload == "params" and self.sharding not in ("fsdp", "zero3"):
            raise GpuEstimateError("--offload params needs --sharding zero3 or fsdp (parameters are sharded first)")
        if self.fsdp_mixed_precision:
            self._check_fsdp_mixed_precision()

    def _check_fsdp_mixed_precision(self) -> None:
        if self.sharding != "fsdp":
            raise GpuEstimateError("--fsdp-mixed-precision needs --sharding fsdp (it is FSDP2's MixedPrecisionPolicy)")
        if self.method != "full" or self.resolved_precision != "bf16-mixed":
            raise GpuEstimateError(
                "--fsdp-mixed-precision keeps float32 shards and computes in bf16: use it with --method full "
                "--precision bf16-mixed"
            )


def lora_targets(text: str) -> tuple[str, ...]:
    """LoRA target modules from ``q_proj,v_proj`` or ``all-linear``."""
    if text.strip().lower() == ALL_LINEAR:
        return LORA_MODULES
    return tuple(part.strip() for part in text.split(",") if part.strip())


SDPA_MATH_NOTE = ("attention counted with its seq × seq scores stored: in float32 with grouped key/value heads, "
                  "PyTorch's scaled-dot-product attention runs its math kernel (its flash kernel needs half "
                  "precision; its memory-efficient kernel takes no grouped heads)")
"""Why a float32 job with grouped-query attention is sized with eager attention (measured on an H200:
``tests/data/gpu_real_peaks.csv``, Llama-3.1-8B in float32 at 4,096 tokens)."""


def attention_that_runs(arch: Architecture, request: EstimateRequest) -> tuple[EstimateRequest, str]:
    """``request`` with the attention kernel the Hugging Face stack really runs, and the note that says why
    it differs from the one asked for ('' when it does not).

    transformers asks PyTorch's SDPA for grouped heads (``enable_gqa``) when there is no padding mask, and
    in float32 only SDPA's math kernel serves that call: its memory is eager attention's.
    """
    if (request.attention == "flash" and request.framework == "hf" and request.resolved_precision == "fp32"
            and arch.kv_heads < arch.heads):
        return request.changed(attention="eager"), SDPA_MATH_NOTE
    return request, ""
