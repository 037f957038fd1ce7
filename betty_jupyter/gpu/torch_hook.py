"""PyTorch's own GPU peak, reported by a job that measures its peak (written into the job as ``sitecustomize.py``).

A measured job (``gpu/measured.py``) puts this file, as ``sitecustomize.py``, in a private folder first on its
``PYTHONPATH``, so every Python the job starts loads it. It imports nothing heavy: when the process ends with torch
already imported and CUDA started, it appends one line per GPU it used to ``$BETTY_TORCH_PEAK_FILE``
(``torch_device=0 allocated_mib=N reserved_mib=M``: ``torch.cuda.max_memory_allocated`` and
``max_memory_reserved``); when the process dies of a CUDA out-of-memory error it also appends
``torch_out_of_memory=1`` there and writes ``torch.cuda.memory_summary`` of each GPU, at most
:data:`MAX_SUMMARY_BYTES`, to ``$BETTY_TORCH_OOM_FILE``. A ``sitecustomize`` the job had already is imported after
it, as if this one were not there. Nothing it does can fail the job.

Standard library only, and no imports of Betty: the file runs alone in the job's Python.
"""

import atexit
import importlib
import os
import sys
import types

MAX_DEVICES = 64
"""The most GPUs one process reports."""

MAX_SUMMARY_BYTES = 65536
"""The most of the out-of-memory summary file the job's processes write, all together."""

MIB = 1024 * 1024


def report_peaks(path: str) -> None:
    """Append this process's PyTorch peaks, one line per GPU it used, to ``path``; nothing without torch or CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return
        lines = []
        for index in range(min(int(cuda.device_count()), MAX_DEVICES)):
            reserved = int(cuda.max_memory_reserved(index))
            if reserved > 0:
                allocated = int(cuda.max_memory_allocated(index))
                lines.append(f"torch_device={index} allocated_mib={allocated // MIB} reserved_mib={reserved // MIB}\n")
        _append(path, "".join(lines))
    except Exception:  # the job's own exit is never changed by its measurement
        pass


def report_out_of_memory(path: str, summary_path: "str | None") -> None:
    """Note in ``path`` that the process ran out of GPU memory, and write its GPUs' memory summary (bounded) to
    ``summary_path``."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        _append(path, "torch_out_of_memory=1\n")
        if not summary_path:
            return
        try:
            written = os.path.getsize(summary_path)
        except OSError:
            written = 0
        cuda = torch.cuda
        parts = []
        for index in range(min(int(cuda.device_count()), MAX_DEVICES)):
            if int(cuda.max_memory_reserved(index)) > 0:
                parts.append(f"== GPU {index} (pid {os.getpid()}) ==\n{cuda.memory_summary(index, abbreviated=True)}\n")
        text = "".join(parts).encode("utf-8", "replace")[:max(0, MAX_SUMMARY_BYTES - written)]
        _append(summary_path, text.decode("utf-8", "ignore"))
    except Exception:
        pass


def _append(path: str, text: str) -> None:
    """Append ``text`` to ``path`` in one write (the job's other processes append to the same file)."""
    if not text:
        return
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(handle, text.encode("utf-8"))
    finally:
        os.close(handle)


def _import_hidden() -> None:
    """Import the ``sitecustomize`` this file hides (the job's own, later on the path), if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as error:
        if error.name != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours


def _install() -> None:
    """Import the job's own ``sitecustomize``, then report at exit and on a CUDA out-of-memory error."""
    try:
        _import_hidden()
    finally:
        path = os.environ.get("BETTY_TORCH_PEAK_FILE")
        if path:
            atexit.register(report_peaks, path)
            before = sys.excepthook

            def on_error(kind: "type[BaseException]", error: BaseException,
                         trace: "types.TracebackType | None") -> None:
                if getattr(kind, "__name__", "") == "OutOfMemoryError":
                    report_out_of_memory(path, os.environ.get("BETTY_TORCH_OOM_FILE"))
                before(kind, error, trace)

            sys.excepthook = on_error


if __name__ == "sitecustomize":
    _install()
