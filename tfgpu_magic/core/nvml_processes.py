"""Who uses a device: NVML's compute and graphics process lists of one handle (a GPU or a MIG device) merged into
one list of ``GpuProcess``, each named with its command and user from /proc.

The /proc reads are cached per pid: a pid's name costs more to read than the whole NVML part of a snapshot.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .nvml_calls import MIB, NVML_NOT_SUPPORTED, field_error
from .nvml_values import GpuProcess, Unavailable, combined_type

# How long a pid's name/user read from /proc is trusted before checking that the pid is still the
# same process. Reading /proc/<pid>/comm costs tens of µs, more than the whole NVML part of a snapshot.
_PROC_TTL_S = 2.0
_PROC_CACHE_MAX = 4096

# The process-list call per list ("Compute", "Graphics"): _v3, or _v2 once the driver lacked _v3 (before R510).
_process_fns: dict[str, Any] = {}
_proc_cache: dict[int, tuple[float, tuple[int, int] | None, str | None, str | None]] = {}
_user_by_uid: dict[int, str | None] = {}


def forget() -> None:
    """Drop the calls chosen for this driver and every name read (nvml.shutdown)."""
    _process_fns.clear()
    _proc_cache.clear()
    _user_by_uid.clear()


def processes(nv: Any, handle: Any, self_pid: int) -> tuple[GpuProcess, ...] | Unavailable:
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
        result.append(GpuProcess(pid, None if used is None else used // MIB, name, user, pid == self_pid, kind))
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
    if which == "Graphics" and getattr(exc, "value", None) == NVML_NOT_SUPPORTED:
        return []
    return field_error(exc, what)



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
