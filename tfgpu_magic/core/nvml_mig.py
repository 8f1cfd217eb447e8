"""MIG: the mode of a GPU, and the MIG devices NVML lists under a GPU in MIG mode, each with its own memory and
processes; a GPU in MIG mode takes its process list from them.

What never changes for a GPU or a MIG device (no MIG on this GPU, its slot count, a MIG device's name and
instance ids) is asked once and kept until nvml.shutdown.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .nvml_calls import NVML_FUNCTION_NOT_FOUND, NVML_NOT_FOUND, NVML_NOT_SUPPORTED, call, field_error, memory, mib
from .nvml_processes import processes
from .nvml_values import BoolOrNA, GpuProcess, IntOrNA, MigDevice, Unavailable, combined_type

# What NVML cannot say about a MIG device, stated once here rather than asked on every snapshot: nvml.h says
# "On MIG-enabled GPUs, querying device utilization rates is not currently supported" (the parent's call fails
# too), and temperature is a property of the whole board.
_MIG_UTILIZATION_NA = Unavailable("not_supported", "not reported per MIG device (NVML gives no utilization for a "
                                                   "GPU in MIG mode either)")
_MIG_TEMPERATURE_NA = Unavailable("not_supported", "not reported per MIG device (the parent GPU's temperature "
                                                   "covers the whole GPU)")
MIG_PARENT_UTILIZATION_DETAIL = "utilization: NVML does not report it for a GPU in MIG mode"
_MIG_NAME = re.compile(r"(?:^|\s)MIG\s+(\S+)")

_mig_calls = True  # False once the driver lacks the MIG calls (before R450): the miss costs once
_no_mig_uuids: set[str] = set()  # GPUs whose nvmlDeviceGetMigMode said NOT_SUPPORTED: never asked again
_mig_slots_by_uuid: dict[str, int] = {}  # parent uuid -> nvmlDeviceGetMaxMigDeviceCount (fixed by the GPU)
# MIG uuid -> (name, profile, GPU instance id, compute instance id): fixed for the MIG device's lifetime.
_mig_identity_by_uuid: dict[str, tuple[str, str, int, int]] = {}


def forget() -> None:
    """Drop what was learnt of the driver and its GPUs (nvml.shutdown)."""
    global _mig_calls
    _mig_calls = True
    _no_mig_uuids.clear()
    _mig_slots_by_uuid.clear()
    _mig_identity_by_uuid.clear()


def mode(nv: Any, handle: Any, uuid: str | Unavailable) -> tuple[BoolOrNA | None, BoolOrNA | None]:
    """(current, pending) MIG mode; (None, None) for a GPU or driver without MIG. A GPU without MIG says so
    (NOT_SUPPORTED) once and is not asked again: that cannot change for a UUID."""
    global _mig_calls
    if not _mig_calls or (isinstance(uuid, str) and uuid in _no_mig_uuids):
        return None, None
    try:
        current, pending = nv.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == NVML_NOT_SUPPORTED:
            if isinstance(uuid, str):
                _no_mig_uuids.add(uuid)
            return None, None
        if code == NVML_FUNCTION_NOT_FOUND:  # a driver before R450: no GPU it drives has MIG
            _mig_calls = False
            return None, None
        why = field_error(exc, "MIG mode")
        return why, why
    return bool(current), bool(pending)  # NVML_DEVICE_MIG_ENABLE is 1


def devices(
    nv: Any, handle: Any, parent_index: int, parent_uuid: str | Unavailable, self_pid: int | None
) -> tuple[tuple[MigDevice, ...], Unavailable | None]:
    """The MIG devices of a GPU in MIG mode, and why the list is missing or incomplete (None: complete).
    Slots run from 0 to nvmlDeviceGetMaxMigDeviceCount; an empty slot answers NOT_FOUND and is skipped."""
    slots = _mig_slots_by_uuid.get(parent_uuid) if isinstance(parent_uuid, str) else None
    if slots is None:
        slots = call(nv, "MIG devices", nv.nvmlDeviceGetMaxMigDeviceCount, handle)
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
            if getattr(exc, "value", None) == NVML_NOT_FOUND:
                continue
            # Keep going: one slot refused need not hide the others.
            first_error = first_error or field_error(exc, f"MIG device {slot}")
            continue
        devices.append(_read_mig_device(nv, parent_index, slot, mig_handle, self_pid))
    return tuple(devices), first_error


def _read_mig_device(nv: Any, parent_index: int, slot: int, handle: Any, self_pid: int | None) -> MigDevice:
    uuid = call(nv, "uuid", nv.nvmlDeviceGetUUID, handle)
    name, profile, gi, ci = _mig_identity(nv, handle, uuid)
    total, used, free, reserved = memory(nv, handle)
    return MigDevice(
        parent_index=parent_index,
        index=slot,
        uuid=uuid,
        name=name,
        profile=profile,
        gpu_instance_id=gi,
        compute_instance_id=ci,
        memory_total_mib=mib(total),
        memory_used_mib=mib(used),
        memory_free_mib=mib(free),
        memory_reserved_mib=mib(reserved),
        utilization_gpu_pct=_MIG_UTILIZATION_NA,
        temperature_c=_MIG_TEMPERATURE_NA,
        processes=processes(nv, handle, self_pid),  # this instance's processes, for any user
        memory_total_bytes=total,
        memory_used_bytes=used,
        memory_free_bytes=free,
        memory_reserved_bytes=reserved,
    )


def _mig_identity(
    nv: Any, handle: Any, uuid: str | Unavailable
) -> tuple[str | Unavailable, str | Unavailable, IntOrNA, IntOrNA]:
    """Name, profile, GPU instance id and compute instance id: fixed for a MIG uuid, so read once."""
    if isinstance(uuid, str) and uuid in _mig_identity_by_uuid:
        return _mig_identity_by_uuid[uuid]
    name = call(nv, "name", nv.nvmlDeviceGetName, handle)
    gi = call(nv, "GPU instance id", nv.nvmlDeviceGetGpuInstanceId, handle)
    ci = call(nv, "compute instance id", nv.nvmlDeviceGetComputeInstanceId, handle)
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


def parent_processes(devices: tuple[MigDevice, ...]) -> tuple[GpuProcess, ...] | Unavailable:
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
                a, b = seen.used_bytes, proc.used_bytes
                total = None if a is None or b is None else a + b
                merged[proc.pid] = dataclasses.replace(seen, used_mib=mib(total), used_bytes=total,
                                                       type=combined_type(seen.type, proc.type))
    return tuple(merged.values())
