"""NVML adapter: one snapshot of the GPUs and their processes, as plain frozen dataclasses.

This is the only module that imports ``pynvml``. NVML is initialised lazily, on the first
``snapshot()``, never at import. Every NVML error is mapped to an ``Unavailable`` value here, once,
so every view above can show what is missing and why without knowing NVML.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .importguard import import_installed


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


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mib: int | None  # None when NVML cannot attribute memory (e.g. some MIG / vGPU setups)
    name: str | None = None  # from /proc, when visible
    user: str | None = None
    is_self: bool = False  # this Python process
    type: str = "C"  # one of PROCESS_TYPES; a "C+G" process's memory is its one figure, counted once


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
    # In MIG mode ``processes`` above is the union of the MIG devices' lists (see _mig_parent_processes).
    mig_mode: BoolOrNA | None = None
    mig_pending: BoolOrNA | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    mig_error: Unavailable | None = None


@dataclass(frozen=True)
class NvmlSnapshot:
    available: bool  # False: no NVML at all (no library, driver not loaded ...), see ``error``
    error: Unavailable | None = None
    driver_version: str | Unavailable | None = None
    cuda_driver_version: str | Unavailable | None = None  # like "12.4"
    gpus: tuple[Gpu, ...] = ()
    taken_at: float = field(default_factory=time.time)

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


# ---- reading NVML -----------------------------------------------------------------------------------

_MIB = 1 << 20
# NVML return codes from nvml.h. They are C ABI, fixed across drivers, so the mapping below needs no
# pynvml import (and can run where pynvml is missing).
_NVML_UNINITIALIZED = 1
_NVML_NOT_SUPPORTED = 3
_NVML_NO_PERMISSION = 4
_NVML_NOT_FOUND = 6
_NVML_DRIVER_NOT_LOADED = 9
_NVML_LIBRARY_NOT_FOUND = 12
_NVML_FUNCTION_NOT_FOUND = 13
_NVML_GPU_IS_LOST = 15
_NVML_LIB_RM_VERSION_MISMATCH = 18
_NVML_ARGUMENT_VERSION_MISMATCH = 25

_REASON_BY_CODE = {
    _NVML_NOT_SUPPORTED: "not_supported",
    _NVML_NO_PERMISSION: "no_permission",
    _NVML_GPU_IS_LOST: "gpu_lost",
    _NVML_FUNCTION_NOT_FOUND: "function_not_found",
}

# What nvmlInit failing means for the person reading the panel, and what to do about it.
_INIT_DETAIL = {
    _NVML_LIBRARY_NOT_FOUND: "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine "
    "(in a container, start it with GPU access, e.g. `docker run --gpus all`)",
    _NVML_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded (libnvidia-ml.so.1 is there but "
    "cannot reach the driver): check `nvidia-smi`, or load the driver / reboot",
    _NVML_NO_PERMISSION: "no permission to open the NVIDIA devices (/dev/nvidia*): check that this user "
    "may access them",
    _NVML_LIB_RM_VERSION_MISMATCH: "NVML library and kernel driver versions differ (driver upgraded "
    "without a reboot?): reboot or reload the nvidia kernel module",
}

# What NVML cannot say about a MIG device, stated once here rather than asked on every snapshot: nvml.h says
# "On MIG-enabled GPUs, querying device utilization rates is not currently supported" (the parent's call fails
# too), and temperature is a property of the whole board.
_MIG_UTILIZATION_NA = Unavailable("not_supported", "not reported per MIG device (NVML gives no utilization for a "
                                                   "GPU in MIG mode either)")
_MIG_TEMPERATURE_NA = Unavailable("not_supported", "not reported per MIG device (the parent GPU's temperature "
                                                   "covers the whole GPU)")
_MIG_PARENT_UTILIZATION_DETAIL = "utilization: NVML does not report it for a GPU in MIG mode"
_MIG_NAME = re.compile(r"(?:^|\s)MIG\s+(\S+)")

# How long a pid's name/user read from /proc is trusted before checking that the pid is still the
# same process. Reading /proc/<pid>/comm costs tens of µs, more than the whole NVML part of a snapshot.
_PROC_TTL_S = 2.0
_PROC_CACHE_MAX = 4096


def unavailable_from_error(exc: BaseException, what: str = "") -> Unavailable:
    """The one mapping of an error raised while reading NVML to an ``Unavailable`` (reason in REASONS).

    ``exc`` is normally a ``pynvml.NVMLError`` (its ``value`` is the NVML return code), or the
    ``UnicodeDecodeError`` pynvml raises when the driver hands back text that is not UTF-8; anything else
    is reason "error". ``what`` prefixes the detail, e.g. "power".
    """
    code = getattr(exc, "value", None)
    if type(exc).__name__ == "NVMLLibraryMismatchError":  # pynvml's FunctionNotFound for unversioned calls
        reason, message = "function_not_found", str(exc)
    elif isinstance(exc, UnicodeDecodeError):
        reason, message = "error", f"the driver returned bytes that are not valid UTF-8: {_short_repr(exc.object)}"
    elif isinstance(code, int) and not isinstance(code, bool):
        reason = _REASON_BY_CODE.get(code, "error")
        try:
            message = str(exc)  # pynvml asks nvmlErrorString; fine once the library is loaded
        except Exception:
            message = f"NVML error {code}"
    else:
        reason, message = "error", f"{type(exc).__name__}: {exc}"
    return Unavailable(reason, f"{what}: {message}" if what else message)


def _short_repr(raw: bytes, limit: int = 48) -> str:
    """The bytes as Python writes them, cut to ``limit`` bytes: enough to quote in a bug report."""
    return repr(bytes(raw[:limit])) + ("..." if len(raw) > limit else "")


def _init_failure(exc: BaseException) -> Unavailable:
    mapped = unavailable_from_error(exc)
    detail = _INIT_DETAIL.get(getattr(exc, "value", None))
    return Unavailable(mapped.reason, detail or f"nvmlInit failed: {mapped.detail}")


class _GpuLost(Exception):
    """Raised inside one GPU's reading when a call says the GPU is gone: the whole GPU is reported lost."""

    def __init__(self, unavailable: Unavailable):
        super().__init__(unavailable.detail)
        self.unavailable = unavailable


# Module state. ``_nv`` is the pynvml module once nvmlInit succeeded; the caches live as long as it.
_init_lock = threading.Lock()
_nv: Any = None
_memory_v2 = True  # False once the driver lacks nvmlDeviceGetMemoryInfo_v2 (before R510)
# The process-list call per list ("Compute", "Graphics"): _v3, or _v2 once the driver lacked _v3 (before R510).
_process_fns: dict[str, Any] = {}
_system: dict[str, str | Unavailable] = {}  # driver / CUDA versions: fixed while NVML is initialised
_identity_by_uuid: dict[str, tuple[str | Unavailable, str | Unavailable]] = {}  # uuid -> (name, bus id)
_mig_calls = True  # False once the driver lacks the MIG calls (before R450): the miss costs once
_no_mig_uuids: set[str] = set()  # GPUs whose nvmlDeviceGetMigMode said NOT_SUPPORTED: never asked again
_mig_slots_by_uuid: dict[str, int] = {}  # parent uuid -> nvmlDeviceGetMaxMigDeviceCount (fixed by the GPU)
# MIG uuid -> (name, profile, GPU instance id, compute instance id): fixed for the MIG device's lifetime.
_mig_identity_by_uuid: dict[str, tuple[str, str, int, int]] = {}
_proc_cache: dict[int, tuple[float, tuple[int, int] | None, str | None, str | None]] = {}
_user_by_uid: dict[int, str | None] = {}


def _ensure_init() -> tuple[Any, Unavailable | None]:
    """pynvml, initialised; or (None, why). A failure is not remembered: the next call tries again."""
    global _nv
    if _nv is not None:
        return _nv, None
    with _init_lock:
        if _nv is not None:
            return _nv, None
        try:
            # The PyPI ``pynvml`` wrapper package warns on import; nvidia-ml-py (what we depend on) does not.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                pynvml = import_installed("pynvml")
        except ImportError as exc:
            return None, Unavailable("error", f"nvidia-ml-py is not installed ({exc}): pip install nvidia-ml-py")
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            return None, _init_failure(exc)
        _nv = pynvml
        return _nv, None


def load_binding() -> None:
    """Import pynvml now, in the calling thread, without initialising NVML: a thread that reads NVML later then
    imports nothing (a first import in a thread can deadlock with `import tensorflow` in another)."""
    with contextlib.suppress(ImportError), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import_installed("pynvml")


def shutdown() -> None:
    """Shut NVML down if ``snapshot()`` initialised it and forget every cache; the next ``snapshot()``
    initialises again. For ``unload_ipython_extension`` and tests. Never raises."""
    global _nv, _memory_v2, _mig_calls
    with _init_lock:
        nv, _nv = _nv, None
        _memory_v2, _mig_calls = True, True
        _process_fns.clear()
        _system.clear()
        _identity_by_uuid.clear()
        _no_mig_uuids.clear()
        _mig_slots_by_uuid.clear()
        _mig_identity_by_uuid.clear()
        _proc_cache.clear()
        _user_by_uid.clear()
        if nv is not None:
            # Failing means someone else already shut it down: nothing left to release.
            with contextlib.suppress(Exception):
                nv.nvmlShutdown()


def snapshot() -> NvmlSnapshot:
    """One reading of every GPU. Never raises: a failure is an ``available=False`` snapshot or
    ``Unavailable`` fields. An init failure is not cached: the next call tries again."""
    try:
        nv, failure = _ensure_init()
        if nv is None:
            return NvmlSnapshot(available=False, error=failure)
        count = _gpu_count(nv)
        if count is None:
            # Someone shut NVML down under us (an unbalanced nvmlShutdown elsewhere in the process):
            # start again once.
            shutdown()
            nv, failure = _ensure_init()
            if nv is None:
                return NvmlSnapshot(available=False, error=failure)
            count = _gpu_count(nv)
            if count is None:
                count = Unavailable("error", "GPU count: NVML says it is not initialized even right after nvmlInit "
                                             "succeeded (another library in this process may be shutting it "
                                             "down); the next reading tries again")
        if isinstance(count, Unavailable):
            return NvmlSnapshot(available=True, error=count, **_versions(nv))
        self_pid = os.getpid()
        gpus = tuple(_read_gpu(nv, index, self_pid) for index in range(count))
        return NvmlSnapshot(available=True, gpus=gpus, **_versions(nv))
    except Exception as exc:  # a bug here or an unexpected binding: still never raise into a view
        return NvmlSnapshot(
            available=False, error=Unavailable("error", f"unexpected {type(exc).__name__} reading NVML: {exc}")
        )


def _gpu_count(nv: Any) -> int | Unavailable | None:
    """The GPU count; why not; or None when NVML says it is not initialized."""
    try:
        return nv.nvmlDeviceGetCount()
    except nv.NVMLError as exc:
        if getattr(exc, "value", None) == _NVML_UNINITIALIZED:
            return None
        return unavailable_from_error(exc, "GPU count")


def _versions(nv: Any) -> dict[str, str | Unavailable]:
    if "driver_version" not in _system:
        try:
            _system["driver_version"] = nv.nvmlSystemGetDriverVersion()
        except (nv.NVMLError, UnicodeDecodeError) as exc:
            return {"driver_version": unavailable_from_error(exc, "driver version"),
                    "cuda_driver_version": _cuda_version(nv)}
    if "cuda_driver_version" not in _system:
        cuda = _cuda_version(nv)
        if isinstance(cuda, Unavailable):
            return {"driver_version": _system["driver_version"], "cuda_driver_version": cuda}
        _system["cuda_driver_version"] = cuda
    return dict(_system)


def _cuda_version(nv: Any) -> str | Unavailable:
    try:
        try:
            version = nv.nvmlSystemGetCudaDriverVersion()
        except nv.NVMLError_FunctionNotFound:
            version = nv.nvmlSystemGetCudaDriverVersion_v2()
    except nv.NVMLError as exc:
        return unavailable_from_error(exc, "CUDA driver version")
    return f"{version // 1000}.{version % 1000 // 10}"  # 12040 -> "12.4", as nvidia-smi shows it


def _call(nv: Any, what: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or the Unavailable it maps to; a lost GPU aborts the whole GPU's reading. pynvml
    decodes NVML's strings as UTF-8, so one bad byte from the driver is this field's error, not the GPU's."""
    try:
        return fn(*args)
    except (nv.NVMLError, UnicodeDecodeError) as exc:
        return _field_error(exc, what)


def _field_error(exc: BaseException, what: str) -> Unavailable:
    unavailable = unavailable_from_error(exc, what)
    if unavailable.reason == "gpu_lost":
        raise _GpuLost(unavailable) from None
    return unavailable


def _unreadable_gpu(index: int, why: Unavailable) -> Gpu:
    return Gpu(
        index=index,
        name=why,
        uuid=why,
        pci_bus_id=why,
        memory_total_mib=why,
        memory_used_mib=why,
        memory_free_mib=why,
        memory_reserved_mib=why,
        utilization_gpu_pct=why,
        utilization_memory_pct=why,
        temperature_c=why,
        power_w=why,
        processes=why,
        error=why,
        mig_mode=why,
        mig_pending=why,
        mig_error=why,
    )


def _read_gpu(nv: Any, index: int, self_pid: int) -> Gpu:
    # Handles are fetched on every snapshot (about 1 µs each): a GPU that fell off the bus or was
    # replaced shows up at once, with no stale handle to invalidate.
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except nv.NVMLError as exc:
        return _unreadable_gpu(index, unavailable_from_error(exc, f"GPU {index}"))
    try:
        uuid = _call(nv, "uuid", nv.nvmlDeviceGetUUID, handle)
        name, bus_id = _identity(nv, handle, uuid)
        mig_mode, mig_pending = _mig_mode(nv, handle, uuid)
        total, used, free, reserved = _memory(nv, handle)
        util = _call(nv, "utilization", nv.nvmlDeviceGetUtilizationRates, handle)
        if mig_mode is True and isinstance(util, Unavailable) and util.reason == "not_supported":
            util = Unavailable("not_supported", _MIG_PARENT_UTILIZATION_DETAIL)
        util_gpu, util_mem = (util, util) if isinstance(util, Unavailable) else (util.gpu, util.memory)
        temperature = _call(nv, "temperature", nv.nvmlDeviceGetTemperature, handle, 0)  # NVML_TEMPERATURE_GPU
        power_mw = _call(nv, "power", nv.nvmlDeviceGetPowerUsage, handle)
        mig_devices: tuple[MigDevice, ...] = ()
        mig_error = None
        if mig_mode is True:
            mig_devices, mig_error = _mig_devices(nv, handle, index, uuid, self_pid)
        # In MIG mode the parent's process list comes from its MIG devices: NVML documents the parent handle's
        # list (and its memory figures) as the aggregate over all instances "only if the caller has appropriate
        # privileges" (nvml.h, nvmlDeviceGetComputeRunningProcesses_v3), and per instance through the MIG
        # handles, which any user may read (what nvidia-smi and nvitop show). So a user without those privileges
        # still sees every process, each counted once, and the parent's call is saved. Only when the MIG
        # devices could not be listed is the parent asked, and its answer (list or error) shown as it is.
        if mig_mode is True and mig_error is None:
            processes = _mig_parent_processes(mig_devices)
        else:
            processes = _processes(nv, handle, self_pid)
    except _GpuLost as lost:
        return _unreadable_gpu(index, Unavailable("gpu_lost", f"GPU {index}: {lost.unavailable.detail}"))
    return Gpu(
        index=index,
        name=name,
        uuid=uuid,
        pci_bus_id=bus_id,
        memory_total_mib=total,
        memory_used_mib=used,
        memory_free_mib=free,
        memory_reserved_mib=reserved,
        utilization_gpu_pct=util_gpu,
        utilization_memory_pct=util_mem,
        temperature_c=temperature,
        power_w=power_mw if isinstance(power_mw, Unavailable) else power_mw / 1000.0,
        processes=processes,
        mig_mode=mig_mode,
        mig_pending=mig_pending,
        mig_devices=mig_devices,
        mig_error=mig_error,
    )


def _identity(nv: Any, handle: Any, uuid: str | Unavailable) -> tuple[str | Unavailable, str | Unavailable]:
    """Name and PCI bus id, which cannot change for a given UUID: read once per GPU, not per snapshot."""
    if isinstance(uuid, str) and uuid in _identity_by_uuid:
        return _identity_by_uuid[uuid]
    name = _call(nv, "name", nv.nvmlDeviceGetName, handle)
    bus_id = _call(nv, "PCI info", _bus_id, nv, handle)
    if isinstance(uuid, str) and isinstance(name, str) and isinstance(bus_id, str):
        _identity_by_uuid[uuid] = (name, bus_id)
    return name, bus_id


def _bus_id(nv: Any, handle: Any) -> str:
    # pynvml decodes a struct's text field when it is read, so reading busId belongs inside _call too.
    return normalise_bus_id(nv.nvmlDeviceGetPciInfo_v3(handle).busId)


def normalise_bus_id(bus_id: str | bytes) -> str:
    """A PCI bus id as nvidia-smi prints it: 8-digit domain, upper-case hex ("00000000:3B:00.0")."""
    text = bus_id.decode(errors="replace") if isinstance(bus_id, bytes) else bus_id
    text = text.strip().rstrip("\x00")
    try:
        domain, bus, rest = text.split(":")
        device, function = rest.split(".")
        return f"{int(domain, 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{int(function, 16):X}"
    except ValueError:
        return text.upper()  # not the usual shape: show it as NVML gave it


def _memory(nv: Any, handle: Any) -> tuple[IntOrNA, IntOrNA, IntOrNA, IntOrNA]:
    """(total, used, free, reserved) MiB. v2 reports reserved apart from used; v1 (drivers before R510)
    counts it in used and has no reserved figure."""
    global _memory_v2
    if _memory_v2:
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
            return mem.total // _MIB, mem.used // _MIB, mem.free // _MIB, mem.reserved // _MIB
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) not in (_NVML_FUNCTION_NOT_FOUND, _NVML_ARGUMENT_VERSION_MISMATCH):
                u = _field_error(exc, "memory")
                return u, u, u, u
            _memory_v2 = False
    mem = _call(nv, "memory", nv.nvmlDeviceGetMemoryInfo, handle)
    if isinstance(mem, Unavailable):
        return mem, mem, mem, mem
    no_reserved = Unavailable("function_not_found", "reserved memory: needs nvmlDeviceGetMemoryInfo_v2 (driver R510+)")
    return mem.total // _MIB, mem.used // _MIB, mem.free // _MIB, no_reserved


def _processes(nv: Any, handle: Any, self_pid: int) -> tuple[GpuProcess, ...] | Unavailable:
    """NVML's compute and graphics lists as one list, each pid once: compute processes in NVML's order, then the
    graphics-only ones. A process on both lists ("C+G") has one memory figure, the same on both (its own use), so it
    is counted once. If either list cannot be read the whole list is missing, with that list named: half a list
    would leave memory unattributed without saying so."""
    compute = _process_list(nv, handle, "Compute", "processes")
    if isinstance(compute, Unavailable):
        return compute
    graphics = _process_list(nv, handle, "Graphics", "graphics processes")
    if isinstance(graphics, Unavailable):
        return graphics
    merged: dict[int, tuple[int | None, str]] = {}  # pid -> (bytes, type)
    for listed, entries in (("C", compute), ("G", graphics)):
        this_list: dict[int, int | None] = {}
        for entry in entries:  # a pid twice on one list: a MIG parent's aggregate, one entry per instance (added up)
            used = entry.usedGpuMemory  # pynvml gives None for NVML_VALUE_NOT_AVAILABLE
            if entry.pid in this_list:
                before = this_list[entry.pid]
                used = None if used is None or before is None else before + used
            this_list[entry.pid] = used
        for pid, used in this_list.items():
            seen = merged.get(pid)
            if seen is None:
                merged[pid] = (used, listed)
            else:  # on both lists: one process, one figure
                merged[pid] = (seen[0] if used is None else used if seen[0] is None else max(seen[0], used),
                               combined_type(seen[1], listed))
    now = time.monotonic()
    result = []
    for pid, (used, kind) in merged.items():
        name, user = _process_owner(pid, now)
        result.append(GpuProcess(pid, None if used is None else used // _MIB, name, user, pid == self_pid, kind))
    return tuple(result)


def _process_list(nv: Any, handle: Any, which: str, what: str) -> list[Any] | Unavailable:
    """One of NVML's process lists (``which``: "Compute" or "Graphics"), or why not. A driver before R510 has only
    the _v2 call: the miss costs once. A device that has no graphics list at all (NOT_SUPPORTED) runs no graphics
    processes: an empty list, not a missing one, so the compute list still stands."""
    fn = _process_fns.get(which)
    if fn is None:
        fn = _process_fns[which] = getattr(nv, f"nvmlDeviceGet{which}RunningProcesses_v3")
    try:
        return fn(handle)
    except nv.NVMLError_FunctionNotFound:
        fn = _process_fns[which] = getattr(nv, f"nvmlDeviceGet{which}RunningProcesses_v2")
        try:
            return fn(handle)
        except nv.NVMLError as exc:
            return _list_error(exc, which, what)
    except nv.NVMLError as exc:
        return _list_error(exc, which, what)


def _list_error(exc: BaseException, which: str, what: str) -> list[Any] | Unavailable:
    if which == "Graphics" and getattr(exc, "value", None) == _NVML_NOT_SUPPORTED:
        return []
    return _field_error(exc, what)


def combined_type(a: str, b: str) -> str:
    """The type of one process listed as ``a`` and as ``b`` (two lists, or two MIG devices): "C" and "G" make "C+G"."""
    return a if a == b else "C+G"


# ---- MIG ------------------------------------------------------------------------------------------------

def _mig_mode(nv: Any, handle: Any, uuid: str | Unavailable) -> tuple[BoolOrNA | None, BoolOrNA | None]:
    """(current, pending) MIG mode; (None, None) for a GPU or driver without MIG. A GPU without MIG says so
    (NOT_SUPPORTED) once and is not asked again: that cannot change for a UUID."""
    global _mig_calls
    if not _mig_calls or (isinstance(uuid, str) and uuid in _no_mig_uuids):
        return None, None
    try:
        current, pending = nv.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == _NVML_NOT_SUPPORTED:
            if isinstance(uuid, str):
                _no_mig_uuids.add(uuid)
            return None, None
        if code == _NVML_FUNCTION_NOT_FOUND:  # a driver before R450: no GPU it drives has MIG
            _mig_calls = False
            return None, None
        why = _field_error(exc, "MIG mode")
        return why, why
    return bool(current), bool(pending)  # NVML_DEVICE_MIG_ENABLE is 1


def _mig_devices(
    nv: Any, handle: Any, parent_index: int, parent_uuid: str | Unavailable, self_pid: int
) -> tuple[tuple[MigDevice, ...], Unavailable | None]:
    """The MIG devices of a GPU in MIG mode, and why the list is missing or incomplete (None: complete).
    Slots run from 0 to nvmlDeviceGetMaxMigDeviceCount; an empty slot answers NOT_FOUND and is skipped."""
    slots = _mig_slots_by_uuid.get(parent_uuid) if isinstance(parent_uuid, str) else None
    if slots is None:
        slots = _call(nv, "MIG devices", nv.nvmlDeviceGetMaxMigDeviceCount, handle)
        if isinstance(slots, Unavailable):
            return (), slots
        if isinstance(parent_uuid, str):
            _mig_slots_by_uuid[parent_uuid] = slots
    devices = []
    first_error = None
    for slot in range(slots):
        try:
            mig_handle = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == _NVML_NOT_FOUND:
                continue
            # Keep going: one slot refused need not hide the others.
            first_error = first_error or _field_error(exc, f"MIG device {slot}")
            continue
        devices.append(_read_mig_device(nv, parent_index, slot, mig_handle, self_pid))
    return tuple(devices), first_error


def _read_mig_device(nv: Any, parent_index: int, slot: int, handle: Any, self_pid: int) -> MigDevice:
    uuid = _call(nv, "uuid", nv.nvmlDeviceGetUUID, handle)
    name, profile, gi, ci = _mig_identity(nv, handle, uuid)
    total, used, free, reserved = _memory(nv, handle)
    return MigDevice(
        parent_index=parent_index,
        index=slot,
        uuid=uuid,
        name=name,
        profile=profile,
        gpu_instance_id=gi,
        compute_instance_id=ci,
        memory_total_mib=total,
        memory_used_mib=used,
        memory_free_mib=free,
        memory_reserved_mib=reserved,
        utilization_gpu_pct=_MIG_UTILIZATION_NA,
        temperature_c=_MIG_TEMPERATURE_NA,
        processes=_processes(nv, handle, self_pid),  # this instance's processes, for any user
    )


def _mig_identity(
    nv: Any, handle: Any, uuid: str | Unavailable
) -> tuple[str | Unavailable, str | Unavailable, IntOrNA, IntOrNA]:
    """Name, profile, GPU instance id and compute instance id: fixed for a MIG uuid, so read once."""
    if isinstance(uuid, str) and uuid in _mig_identity_by_uuid:
        return _mig_identity_by_uuid[uuid]
    name = _call(nv, "name", nv.nvmlDeviceGetName, handle)
    gi = _call(nv, "GPU instance id", nv.nvmlDeviceGetGpuInstanceId, handle)
    ci = _call(nv, "compute instance id", nv.nvmlDeviceGetComputeInstanceId, handle)
    profile = mig_profile(name) if isinstance(name, str) else name
    if profile is None:
        profile = Unavailable("error", f"profile: the MIG device's name {name!r} has no \"MIG <profile>\" part")
    if isinstance(uuid, str) and isinstance(name, str) and isinstance(profile, str) and isinstance(gi, int) \
            and isinstance(ci, int):
        _mig_identity_by_uuid[uuid] = (name, profile, gi, ci)
    return name, profile, gi, ci


def mig_profile(name: str) -> str | None:
    """The MIG profile in a MIG device's NVML name: "NVIDIA A100-SXM4-40GB MIG 3g.20gb" -> "3g.20gb",
    "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb" -> "1c.3g.40gb"; None when the name has none."""
    found = _MIG_NAME.findall(name)
    return found[-1] if found else None


def _mig_parent_processes(devices: tuple[MigDevice, ...]) -> tuple[GpuProcess, ...] | Unavailable:
    """A GPU in MIG mode: its MIG devices' processes, each pid once (memory added up if one process uses
    several instances). If one instance's list is missing, so is the whole, with that instance named."""
    merged: dict[int, GpuProcess] = {}
    for mig in devices:
        if isinstance(mig.processes, Unavailable):
            return Unavailable(mig.processes.reason, f"MIG device {mig.index}: {mig.processes.detail}")
        for proc in mig.processes:
            seen = merged.get(proc.pid)
            if seen is None:
                merged[proc.pid] = proc
            else:
                total = None if seen.used_mib is None or proc.used_mib is None else seen.used_mib + proc.used_mib
                merged[proc.pid] = dataclasses.replace(seen, used_mib=total, type=combined_type(seen.type, proc.type))
    return tuple(merged.values())


def _process_owner(pid: int, now: float) -> tuple[str | None, str | None]:
    """(command name, user name) of a pid from /proc, or None where not visible (another PID namespace,
    hidepid, a process that just ended). Cached per pid; rechecked after _PROC_TTL_S, and re-read when
    the /proc entry is a new one (pid reuse)."""
    cached = _proc_cache.get(pid)
    if cached is not None and now - cached[0] < _PROC_TTL_S:
        return cached[2], cached[3]
    try:
        st = os.stat(f"/proc/{pid}")
        key: tuple[int, int] | None = (st.st_ino, st.st_uid)
    except OSError:
        key = None
    if cached is not None and cached[1] == key:
        name, user = cached[2], cached[3]
    elif key is None:
        name = user = None
    else:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                name = f.read().rstrip("\n") or None
        except OSError:
            name = None
        user = _user_name(key[1])
    if len(_proc_cache) >= _PROC_CACHE_MAX:
        _proc_cache.clear()
    _proc_cache[pid] = (now, key, name, user)
    return name, user


def _user_name(uid: int) -> str | None:
    if uid not in _user_by_uid:
        try:
            import pwd

            _user_by_uid[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            _user_by_uid[uid] = str(uid)  # a uid with no passwd entry (containers): still say whose
    return _user_by_uid[uid]
