"""Stands in for PyTorch where there is no GPU: ``torch.cuda`` says CUDA started on two GPUs whose peaks are set
numbers (GPU 0: 27 GiB allocated, 29.5 GiB reserved; GPU 1: 1 GiB and 2 GiB), as the real one reports them. With
FAKE_TORCH_CUDA=off in the environment CUDA never started, as in a job that used torch on the CPU only."""

import os

GIB = 1024 ** 3


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError: what a CUDA allocation that does not fit raises."""


class _Cuda:
    OutOfMemoryError = OutOfMemoryError

    def is_initialized(self):
        return os.environ.get("FAKE_TORCH_CUDA") != "off"

    def device_count(self):
        return 2

    def max_memory_allocated(self, device):
        return [27 * GIB, 1 * GIB][device]

    def max_memory_reserved(self, device):
        return [int(29.5 * GIB), 2 * GIB][device]

    def memory_summary(self, device, abbreviated=False):
        return f"|  Memory summary of GPU {device}  |\n" * 5000  # larger than Betty keeps


cuda = _Cuda()
