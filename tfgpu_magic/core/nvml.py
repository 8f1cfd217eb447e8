"""NVML adapter: one snapshot of the GPUs and their processes, as plain frozen dataclasses (nvml_values.py).

This is the only module that imports ``pynvml``. NVML is initialised lazily, on the first
``snapshot()``, never at import. Every NVML error is mapped to an ``Unavailable`` value once
(nvml_calls.py), so every view above can show what is missing and why without knowing NVML.
The reading is split by what it reads: this module the GPUs, nvml_processes.py their processes, nvml_mig.py
their MIG devices; ``shutdown()`` forgets what each of them cached.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Any

from . import nvml_calls, nvml_mig, nvml_processes, pidns
from .importguard import import_installed
from .nvml_calls import (
    NVML_DRIVER_NOT_LOADED,
    NVML_LIB_RM_VERSION_MISMATCH,
    NVML_LIBRARY_NOT_FOUND,
    NVML_NO_PERMISSION,
    NVML_UNINITIALIZED,
    GpuLost,
    call,
    memory,
    mib,
    unavailable_from_error,
)
from .nvml_mig import MIG_PARENT_UTILIZATION_DETAIL, mig_profile
from .nvml_values import (
    PROCESS_TYPES,
    REASONS,
    BoolOrNA,
    FloatOrNA,
    Gpu,
    GpuProcess,
    IntOrNA,
    MigDevice,
    NvmlSnapshot,
    Unavailable,
    combined_type,
    to_jsonable,
)

# The names every caller imports from here, wherever they are defined.
__all__ = [
    "PROCESS_TYPES", "REASONS", "BoolOrNA", "FloatOrNA", "Gpu", "GpuProcess", "IntOrNA", "MigDevice", "NvmlSnapshot",
    "Unavailable", "combined_type", "hint", "load_binding", "mig_profile", "normalise_bus_id", "shutdown", "snapshot",
    "to_jsonable", "unavailable_from_error",
]

# Said in every answer on a machine without a GPU, so short (issue 37); in a container, the views add CONTAINER_HINT.
LIBRARY_NOT_FOUND = "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver"
CONTAINER_HINT = "in a container, start it with GPU access, e.g. `docker run --gpus all`"
# What nvmlInit failing means for the person reading the panel, and what to do about it.
_INIT_DETAIL = {
    NVML_LIBRARY_NOT_FOUND: LIBRARY_NOT_FOUND,
    NVML_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded (libnvidia-ml.so.1 is there but "
    "cannot reach the driver): check `nvidia-smi`, or load the driver / reboot",
    NVML_NO_PERMISSION: "no permission to open the NVIDIA devices (/dev/nvidia*): check that this user "
    "may access them",
    NVML_LIB_RM_VERSION_MISMATCH: "NVML library and kernel driver versions differ (driver upgraded "
    "without a reboot?): reboot or reload the nvidia kernel module",
}


def in_container() -> bool:
    """Whether this process runs in a container (Docker's and Podman's marker files, the ``container`` variable
    systemd-nspawn and Podman set, or a Kubernetes pod)."""
    return (os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv") or bool(os.environ.get("container"))  # noqa: SIM112 (their lowercase name)
            or "KUBERNETES_SERVICE_HOST" in os.environ)


def hint(error) -> str | None:
    """What to do about NVML's ``error`` beyond its sentence, where it depends on where this runs: in a container
    without the driver's library, how to start one with the GPUs. None otherwise."""
    if getattr(error, "detail", None) == LIBRARY_NOT_FOUND and in_container():
        return CONTAINER_HINT
    return None


def _init_failure(exc: BaseException) -> Unavailable:
    mapped = unavailable_from_error(exc)
    detail = _INIT_DETAIL.get(getattr(exc, "value", None))
    return Unavailable(mapped.reason, detail or f"nvmlInit failed: {mapped.detail}")


# Module state. ``_nv`` is the pynvml module once nvmlInit succeeded; the caches live as long as it.
_init_lock = threading.Lock()
_nv: Any = None
_system: dict[str, str | Unavailable] = {}  # driver / CUDA versions: fixed while NVML is initialised
_identity_by_uuid: dict[str, tuple[str | Unavailable, str | Unavailable]] = {}  # uuid -> (name, bus id)


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
    global _nv
    with _init_lock:
        nv, _nv = _nv, None
        _system.clear()
        _identity_by_uuid.clear()
        for module in (nvml_calls, nvml_processes, nvml_mig):
            module.forget()
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
        view = pidns.view()
        self_pid = view.self_host_pid()  # in a container: the host's number, once learned (pidns)
        gpus = tuple(_read_gpu(nv, index, self_pid) for index in range(count))
        return NvmlSnapshot(available=True, gpus=gpus, pids=None if view.comparable else view.to_dict(),
                            **_versions(nv))
    except Exception as exc:  # a bug here or an unexpected binding: still never raise into a view
        return NvmlSnapshot(
            available=False, error=Unavailable("error", f"unexpected {type(exc).__name__} reading NVML: {exc}")
        )


def _gpu_count(nv: Any) -> int | Unavailable | None:
    """The GPU count; why not; or None when NVML says it is not initialized."""
    try:
        return nv.nvmlDeviceGetCount()
    except nv.NVMLError as exc:
        if getattr(exc, "value", None) == NVML_UNINITIALIZED:
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
        memory_total_bytes=why,
        memory_used_bytes=why,
        memory_free_bytes=why,
        memory_reserved_bytes=why,
    )


def _read_gpu(nv: Any, index: int, self_pid: int | None) -> Gpu:
    # Handles are fetched on every snapshot (about 1 µs each): a GPU that fell off the bus or was
    # replaced shows up at once, with no stale handle to invalidate.
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except nv.NVMLError as exc:
        return _unreadable_gpu(index, unavailable_from_error(exc, f"GPU {index}"))
    try:
        uuid = call(nv, "uuid", nv.nvmlDeviceGetUUID, handle)
        name, bus_id = _identity(nv, handle, uuid)
        mig_mode, mig_pending = nvml_mig.mode(nv, handle, uuid)
        total, used, free, reserved = memory(nv, handle)
        util = call(nv, "utilization", nv.nvmlDeviceGetUtilizationRates, handle)
        if mig_mode is True and isinstance(util, Unavailable) and util.reason == "not_supported":
            util = Unavailable("not_supported", MIG_PARENT_UTILIZATION_DETAIL)
        util_gpu, util_mem = (util, util) if isinstance(util, Unavailable) else (util.gpu, util.memory)
        temperature = call(nv, "temperature", nv.nvmlDeviceGetTemperature, handle, 0)  # NVML_TEMPERATURE_GPU
        power_mw = call(nv, "power", nv.nvmlDeviceGetPowerUsage, handle)
        mig_devices: tuple[MigDevice, ...] = ()
        mig_error = None
        if mig_mode is True:
            mig_devices, mig_error = nvml_mig.devices(nv, handle, index, uuid, self_pid)
        # In MIG mode the parent's process list comes from its MIG devices: NVML documents the parent handle's
        # list (and its memory figures) as the aggregate over all instances "only if the caller has appropriate
        # privileges" (nvml.h, nvmlDeviceGetComputeRunningProcesses_v3), and per instance through the MIG
        # handles, which any user may read (what nvidia-smi and nvitop show). So a user without those privileges
        # still sees every process, each counted once, and the parent's call is saved. Only when the MIG
        # devices could not be listed is the parent asked, and its answer (list or error) shown as it is.
        if mig_mode is True and mig_error is None:
            processes = nvml_mig.parent_processes(mig_devices)
        else:
            processes = nvml_processes.processes(nv, handle, self_pid)
    except GpuLost as lost:
        return _unreadable_gpu(index, Unavailable("gpu_lost", f"GPU {index}: {lost.unavailable.detail}"))
    return Gpu(
        index=index,
        name=name,
        uuid=uuid,
        pci_bus_id=bus_id,
        memory_total_mib=mib(total),
        memory_used_mib=mib(used),
        memory_free_mib=mib(free),
        memory_reserved_mib=mib(reserved),
        utilization_gpu_pct=util_gpu,
        utilization_memory_pct=util_mem,
        temperature_c=temperature,
        power_w=power_mw if isinstance(power_mw, Unavailable) else power_mw / 1000.0,
        processes=processes,
        mig_mode=mig_mode,
        mig_pending=mig_pending,
        mig_devices=mig_devices,
        mig_error=mig_error,
        memory_total_bytes=total,
        memory_used_bytes=used,
        memory_free_bytes=free,
        memory_reserved_bytes=reserved,
    )


def _identity(nv: Any, handle: Any, uuid: str | Unavailable) -> tuple[str | Unavailable, str | Unavailable]:
    """Name and PCI bus id, which cannot change for a given UUID: read once per GPU, not per snapshot."""
    if isinstance(uuid, str) and uuid in _identity_by_uuid:
        return _identity_by_uuid[uuid]
    name = call(nv, "name", nv.nvmlDeviceGetName, handle)
    bus_id = call(nv, "PCI info", _bus_id, nv, handle)
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
