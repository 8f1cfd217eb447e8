"""What one NVML reading is: the GPUs, their MIG devices and processes as frozen dataclasses, every figure NVML
could not give an ``Unavailable`` with its reason, and their JSON form.

Nothing here calls NVML (nvml.py reads it): the views, the server's JSON and the tests build and read these
values without the library.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


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

IntOrNA = int | Unavailable
FloatOrNA = float | Unavailable
BoolOrNA = bool | Unavailable


# A GPU process's type, in nvidia-smi's letters: "C" on NVML's compute list (CUDA, TensorFlow), "G" on its graphics
# list (a desktop session, an OpenGL or Vulkan application, EGL rendering), "C+G" on both (one process, one row).
PROCESS_TYPES = ("C", "G", "C+G")


def combined_type(a: str, b: str) -> str:
    """The type of one process listed as ``a`` and as ``b`` (two lists, or two MIG devices): "C" and "G" make "C+G"."""
    return a if a == b else "C+G"


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mib: int | None  # None when NVML cannot attribute memory (e.g. some MIG / vGPU setups)
    name: str | None = None  # from /proc, when visible
    user: str | None = None
    is_self: bool = False  # this Python process
    type: str = "C"  # one of PROCESS_TYPES; a "C+G" process's memory is its one figure, counted once
    # Its number in this process's PID namespace: ``pid`` on the host; in a container, through a host /proc, else
    # None (NVML's numbers are the host's: pidns.py). Only NvmlSnapshot.pids says which applies.
    local_pid: int | None = None
    # Its highest SM utilization (%) in NVML's per-process samples of the last ``nvml_processes.window_s``
    # seconds (0: no sample, it computed nothing); None where NVML gives no per-process figure (a MIG device,
    # an older GPU, a refused call): then only the GPU's own utilization says anything (core/idle.py).
    sm_pct: int | None = None
    used_bytes: int | None = None  # NVML's exact figure; used_mib is it in whole MiB


def placeable(process: Any) -> bool:
    """Whether a process (a GpuProcess, or its dict) can be placed in a PID namespace not the driver's: it is this
    process itself, or a host view names it."""
    get = process.get if isinstance(process, dict) else lambda k: getattr(process, k, None)
    return bool(get("is_self")) or get("name") is not None or get("user") is not None


def unattributed(processes: Any, pids: dict | None) -> tuple[int, int | None] | None:
    """(count, MiB or None) of the processes this process cannot place (not ``placeable``), in a PID namespace not
    the driver's (``pids``: NvmlSnapshot.pids). None when there are none, or on the host (every PID is ours to look
    at there)."""
    if pids is None or pids.get("comparable", True) or not isinstance(processes, (tuple, list)):
        return None
    count, used = 0, 0
    for p in processes:
        if placeable(p):
            continue
        count += 1
        mib = p.get("used_mib") if isinstance(p, dict) else getattr(p, "used_mib", None)
        used = None if used is None or not isinstance(mib, int) else used + mib
    return (count, used) if count else None


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a compute instance of a GPU in MIG mode), as NVML lists it under its parent GPU.

    ``uuid`` ("MIG-...") is what ``CUDA_VISIBLE_DEVICES`` takes to select it. ``profile`` is the end of
    ``name`` ("NVIDIA A100-SXM4-40GB MIG 3g.20gb" -> "3g.20gb"; "1c.3g.20gb" for a compute instance
    smaller than its GPU instance). NVML reports no utilization or temperature per MIG device."""

    parent_index: int  # the parent GPU's physical index (Gpu.index)
    index: int  # the slot within the parent (nvmlDeviceGetMigDeviceHandleByIndex; nvidia-smi's "MIG Dev")
    uuid: str | Unavailable
    name: str | Unavailable
    profile: str | Unavailable
    gpu_instance_id: IntOrNA  # nvidia-smi's "GI ID"
    compute_instance_id: IntOrNA  # nvidia-smi's "CI ID"
    memory_total_mib: IntOrNA
    memory_used_mib: IntOrNA
    memory_free_mib: IntOrNA
    memory_reserved_mib: IntOrNA
    utilization_gpu_pct: IntOrNA
    temperature_c: IntOrNA
    processes: tuple[GpuProcess, ...] | Unavailable = ()
    # NVML's exact figures (the *_mib ones are these in whole MiB): what the metrics expose.
    memory_total_bytes: IntOrNA | None = None
    memory_used_bytes: IntOrNA | None = None
    memory_free_bytes: IntOrNA | None = None
    memory_reserved_bytes: IntOrNA | None = None


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
    # MIG. mig_mode: True/False (current mode); None when the GPU (or the driver) has no MIG at all.
    # mig_pending: the mode after the next GPU reset, None likewise. mig_devices: the MIG devices when the
    # current mode is on (empty when no instance is created, and always for non-MIG GPUs); mig_error says why
    # the list is missing or incomplete (the list itself stays a tuple, so code iterating it never breaks).
    # In MIG mode ``processes`` above is the union of the MIG devices' lists (see nvml_mig.parent_processes).
    mig_mode: BoolOrNA | None = None
    mig_pending: BoolOrNA | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    mig_error: Unavailable | None = None
    # NVML's exact figures (the *_mib ones are these in whole MiB): what the metrics expose.
    memory_total_bytes: IntOrNA | None = None
    memory_used_bytes: IntOrNA | None = None
    memory_free_bytes: IntOrNA | None = None
    memory_reserved_bytes: IntOrNA | None = None


@dataclass(frozen=True)
class NvmlSnapshot:
    available: bool  # False: no NVML at all (no library, driver not loaded ...), see ``error``
    error: Unavailable | None = None
    driver_version: str | Unavailable | None = None
    cuda_driver_version: str | Unavailable | None = None  # like "12.4"
    gpus: tuple[Gpu, ...] = ()
    taken_at: float = field(default_factory=time.time)
    # Whose numbers the processes' PIDs are (pidns.PidView.to_dict): {"comparable", "view", "note"}; None: the host's.
    pids: dict | None = None

    def memory_totals_mib(self) -> dict[int, int]:
        """Physical index -> total MiB, for the GPUs that report it (percentages need it)."""
        return {g.index: g.memory_total_mib for g in self.gpus if isinstance(g.memory_total_mib, int)}

    def gpu(self, index: int) -> Gpu | None:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        return None

    def mig_devices(self) -> Iterator[tuple[Gpu, MigDevice]]:
        """Every MIG device NVML listed, with its parent GPU, in GPU order then slot order."""
        for gpu in self.gpus:
            for mig in gpu.mig_devices:
                yield gpu, mig

    def listed_processes(self) -> Iterator[tuple[Any, ...]]:
        """Each process list NVML gave, a GPU's then its MIG devices': the tuples only (an Unavailable list is
        skipped), so a caller walks every process without a branch for MIG."""
        for gpu in self.gpus:
            for procs in (gpu.processes, *(m.processes for m in gpu.mig_devices)):
                if isinstance(procs, tuple):
                    yield procs

    def mig_device(self, uuid_or_prefix: str) -> tuple[Gpu, MigDevice] | None:
        """(parent GPU, MIG device) for a full MIG UUID or a prefix of exactly one ("MIG-5e8b"), compared
        case-insensitively as CUDA_VISIBLE_DEVICES entries are; None when it names none or several."""
        key = uuid_or_prefix.strip().lower()
        if not key:
            return None
        known = [(m.uuid.lower(), (g, m)) for g, m in self.mig_devices() if isinstance(m.uuid, str)]
        exact = [pair for uuid, pair in known if uuid == key]
        found = exact or [pair for uuid, pair in known if uuid.startswith(key)]
        return found[0] if len(found) == 1 else None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


_SCALARS = (str, int, float, bool, type(None))
_field_names: dict[type, tuple[str, ...]] = {}  # dataclasses.fields() is slow; a JSON view calls this often


def to_jsonable(value: Any) -> Any:
    """Dataclasses to dicts, with every ``Unavailable`` as ``{"unavailable": reason, "detail": ...}``."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Unavailable):
        return value.to_dict()
    names = _field_names.get(type(value))
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _field_names.setdefault(type(value), tuple(f.name for f in dataclasses.fields(value)))
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value

