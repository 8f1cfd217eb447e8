"""Who uses a device: NVML's compute and graphics process lists of one handle (a GPU or a MIG device) merged into
one list of ``GpuProcess``, each named with its command and user through this process's PID view (pidns.py: in a
container NVML's numbers are the host's, never matched to a local process by number).

The /proc reads are cached per pid (pidns): a pid's name costs more to read than the whole NVML part of a snapshot.
"""

from __future__ import annotations

import time
from typing import Any

from . import pidns
from .nvml_calls import NVML_NOT_FOUND, NVML_NOT_SUPPORTED, field_error, mib
from .nvml_values import GpuProcess, Unavailable, combined_type

# How far back a reading looks in NVML's per-process utilization samples: the idle test's window (the server sets it
# to its activity interval, so consecutive readings cover all the time between them).
window_s = 10.0

# The process-list call per list ("Compute", "Graphics"): _v3, or _v2 once the driver lacked _v3 (before R510).
_process_fns: dict[str, Any] = {}


def forget() -> None:
    """Drop the calls chosen for this driver and every name read (nvml.shutdown)."""
    _process_fns.clear()
    pidns.view().forget()


def processes(nv: Any, handle: Any, self_pid: int | None) -> tuple[GpuProcess, ...] | Unavailable:
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
    view = pidns.view()
    busy = utilization(nv, handle) if merged else {}
    result = []
    for pid, (used, kind) in merged.items():
        who = view.identify(pid, now)
        result.append(GpuProcess(pid, mib(used), who.name, who.user, pid == self_pid, kind,
                                 who.local_pid, None if busy is None else busy.get(pid, 0), used))
    return tuple(result)


def utilization(nv: Any, handle: Any, window: float | None = None) -> dict[int, int] | None:
    """{pid: highest SM utilization %} over NVML's samples of the last ``window`` seconds (``window_s``); a process
    with no sample computed nothing. None where the device gives no per-process figure (MIG, older GPUs, vGPU) or
    the call fails: unknown, never read as 0."""
    since = int((time.time() - (window_s if window is None else window)) * 1e6)
    try:
        samples = nv.nvmlDeviceGetProcessUtilization(handle, max(0, since))
    except nv.NVMLError as exc:
        # No sample since the timestamp (nothing computed): NOT_FOUND, or pynvml's NVMLError(SUCCESS) when the
        # driver's size query finds none at all.
        return {} if getattr(exc, "value", None) in (0, NVML_NOT_FOUND) else None
    except AttributeError:  # a binding without the call
        return None
    highest: dict[int, int] = {}
    for sample in samples:
        highest[sample.pid] = max(highest.get(sample.pid, 0), int(sample.smUtil))
    return highest


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
    if which == "Graphics" and getattr(exc, "value", None) == NVML_NOT_SUPPORTED:
        return []
    return field_error(exc, what)
