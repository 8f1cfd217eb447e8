"""NVML adapter: one snapshot of the GPUs and their processes, as plain frozen dataclasses.

This is the only module that imports ``pynvml``. NVML is initialised lazily, on the first
``snapshot()``, never at import. Every NVML error is mapped to an ``Unavailable`` value here, once,
so every view above can show what is missing and why without knowing NVML.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Unavailable:
    """A value NVML could not give. ``reason`` is one of REASONS; ``detail`` is for people."""

    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return "n/a" if not self.detail else f"n/a ({self.detail})"

    def to_dict(self) -> dict[str, str]:
        return {"unavailable": self.reason, "detail": self.detail}


# Why a field can be missing. Kept small so views and the JSON can rely on it.
REASONS = (
    "not_supported",  # the GPU or driver does not report this field
    "no_permission",  # e.g. the process list of other users
    "gpu_lost",  # the GPU fell off the bus
    "function_not_found",  # an older driver without this call
    "error",  # any other NVML error, with its message in detail
)

IntOrNA = Union[int, Unavailable]
FloatOrNA = Union[float, Unavailable]


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mib: int | None  # None when NVML cannot attribute memory (e.g. some MIG / vGPU setups)
    name: str | None = None  # from /proc, when visible
    user: str | None = None
    is_self: bool = False  # this Python process


@dataclass(frozen=True)
class Gpu:
    index: int  # physical index: NVML's, PCI bus order, as nvidia-smi numbers it
    name: str | Unavailable
    uuid: str | Unavailable
    pci_bus_id: str | Unavailable
    memory_total_mib: IntOrNA
    memory_used_mib: IntOrNA
    memory_free_mib: IntOrNA
    memory_reserved_mib: IntOrNA
    utilization_gpu_pct: IntOrNA
    utilization_memory_pct: IntOrNA
    temperature_c: IntOrNA
    power_w: FloatOrNA
    processes: tuple[GpuProcess, ...] | Unavailable = ()
    # Set when the whole GPU could not be read (lost, no handle): the fields above are Unavailable.
    error: Unavailable | None = None


@dataclass(frozen=True)
class NvmlSnapshot:
    available: bool  # False: no NVML at all (no library, driver not loaded ...), see ``error``
    error: Unavailable | None = None
    driver_version: str | Unavailable | None = None
    cuda_driver_version: str | Unavailable | None = None  # like "12.4"
    gpus: tuple[Gpu, ...] = ()
    taken_at: float = field(default_factory=time.time)

    def gpu(self, index: int) -> Gpu | None:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        return None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def to_jsonable(value: Any) -> Any:
    """Dataclasses to dicts, with every ``Unavailable`` as ``{"unavailable": reason, "detail": ...}``."""
    if isinstance(value, Unavailable):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def snapshot() -> NvmlSnapshot:
    """One reading of every GPU. Never raises: a failure is an ``available=False`` snapshot or
    ``Unavailable`` fields. An init failure is not cached: the next call tries again."""
    return NvmlSnapshot(
        available=False,
        error=Unavailable("error", "the NVML adapter is not implemented yet"),
    )
