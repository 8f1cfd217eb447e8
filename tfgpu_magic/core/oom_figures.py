"""The OOM card's figures (core/oom.py's ``Facts``): this kernel's TensorFlow memory on the failing device, the
registry's settings in force, NVML's reading of the GPU (physical index through numbering.py, total and free) and who
holds it: this kernel, another kernel named by its report (core/reports.py) or a process by pid, user and command.

TensorFlow is passed in, never imported, and read only where reading starts nothing: its memory once its runtime runs,
its devices once they are listed (an OOM raised before either gets the figures that need neither).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .oom import Facts, Holder, asked_of, card, oom_error, short_device


def gather(exc: BaseException, *, tf: Any = None, controller: Any = None, snapshot: Any = None,
           reports: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
           execution_count: int | None = None, self_pid: int | None = None) -> Facts:
    """The figures for ``exc`` (an exception holding TensorFlow's ResourceExhaustedError). ``tf``: the TensorFlow
    module, read only once its runtime runs (nothing here starts it); ``controller``: the extension's (its plan, its
    environment, its NVML); ``snapshot``: an NVML snapshot (None: the controller's, taken for a GPU only);
    ``reports``: kernel id -> core.reports.Report (None: read from the runtime folder when another process holds the
    GPU)."""
    from . import settings as registry
    from .runtime import TFState, probe

    found = oom_error(exc) or exc
    asked = asked_of(exc, found)
    environ = environ if environ is not None else getattr(controller, "environ", os.environ)
    state = probe().state if tf is not None else TFState.NOT_IMPORTED
    device = asked.device or _node_device(found) or _default_device(tf, state)
    rows = tuple(registry.describe(controller.plan)) if controller is not None else ()
    base: dict[str, Any] = {
        "asked": asked, "error": type(found).__name__, "device": device, "settings": rows,
        "execution_count": execution_count, "registered": registry.names(),
    }
    if tf is not None and state >= TFState.INITIALIZED and device:
        base["tf_current"], base["tf_peak"] = _tf_memory(tf, device)
    if not device or not device.startswith("GPU"):
        base["host_total"], base["host_available"] = host_memory()
        return Facts(**base)
    base["memory_grows"] = _growth(tf, state, device, environ)
    if snapshot is None and controller is not None:
        snapshot = controller.nvml()
    if snapshot is None or not getattr(snapshot, "available", False):
        why = getattr(getattr(snapshot, "error", None), "detail", "") or "NVML is not available"
        return Facts(**base, gpu_why=why)
    index = physical_index(device, tf, state, environ, snapshot)
    gpu = snapshot.gpu(index) if index is not None else None
    if gpu is None:
        return Facts(**base, physical_index=index, gpu_why=f"no GPU of NVML's is TensorFlow's {device} here")
    total, free = gpu.memory_total_bytes, gpu.memory_free_bytes
    processes = gpu.processes if isinstance(gpu.processes, tuple) else ()
    holders = _holders(processes, snapshot, reports, self_pid if self_pid is not None else os.getpid(), environ)
    return Facts(**base, physical_index=index, gpu_name=gpu.name if isinstance(gpu.name, str) else None,
                 gpu_total=total if isinstance(total, int) else None, gpu_free=free if isinstance(free, int) else None,
                 gpu_why="" if isinstance(total, int) and isinstance(free, int) else str(total),
                 holders=holders)


def report(exc: BaseException, **kwargs: Any) -> dict[str, Any]:
    """The card's data for ``exc``: ``card(gather(exc, ...))``."""
    return card(gather(exc, **kwargs))


def _node_device(exc: BaseException) -> str | None:
    """The failing node's device, where the error carries its NodeDef (graph-mode errors do)."""
    node = getattr(exc, "node_def", None)
    return short_device(getattr(node, "device", None) or None)


def _default_device(tf: Any, state: int) -> str | None:
    """Where an XLA computation ran when its text names no device: TensorFlow's first GPU if its runtime lists one."""
    from .runtime import TFState

    if tf is None or state < TFState.INITIALIZED:
        return None
    try:
        gpus = tf.config.list_logical_devices("GPU")
    except Exception:
        return None
    return short_device(gpus[0].name) if gpus else None


def _tf_memory(tf: Any, device: str) -> tuple[int | None, int | None]:
    try:
        info = tf.config.experimental.get_memory_info(device)
    except Exception:  # CPU without TF_CPU_ALLOCATOR_USE_BFC: "Allocator stats not available"
        return None, None
    current, peak = info.get("current"), info.get("peak")
    return (current if isinstance(current, int) else None, peak if isinstance(peak, int) else None)


def _growth(tf: Any, state: int, device: str, environ: Mapping[str, str]) -> bool | None:
    """Memory growth on TensorFlow's ``device``, as TensorFlow has it (reading it starts nothing), else what
    TF_FORCE_GPU_ALLOW_GROWTH says; None when neither says."""
    from .runtime import TFState
    from .settings.growth import forced_growth

    if tf is not None and state >= TFState.ENUMERATED:
        try:
            visible = tf.config.get_visible_devices("GPU")
            k = int(device.split(":")[1])
            if k < len(visible):
                return bool(tf.config.experimental.get_memory_growth(visible[k]))
        except Exception:
            pass
    forced = forced_growth(environ)
    return forced if isinstance(forced, bool) else None


def physical_index(device: str, tf: Any, state: int, environ: Mapping[str, str], snapshot: Any) -> int | None:
    """nvidia-smi's index of TensorFlow's logical ``device`` ("GPU:k"). With TensorFlow's devices listed: its visible
    physical GPUs in CUDA order, each counted as many times as it has logical GPUs (a virtual split); before that, or
    in a build without GPUs, TensorFlow's GPU:k is CUDA's k-th GPU."""
    from .numbering import cuda_order
    from .runtime import TFState

    try:
        k = int(device.split(":")[1])
    except (IndexError, ValueError):
        return None
    order = cuda_order(environ, snapshot)
    if order is None:
        return None
    if tf is not None and state >= TFState.ENUMERATED:
        try:
            physical = list(tf.config.list_physical_devices("GPU"))
            visible = tf.config.get_visible_devices("GPU")
            logical = 0
            for position, gpu in enumerate(physical):
                if gpu not in visible:
                    continue
                count = len(tf.config.get_logical_device_configuration(gpu) or [None])
                if logical <= k < logical + count:
                    return order[position] if position < len(order) else None
                logical += count
            if physical:
                return None
        except Exception:
            pass
    return order[k] if k < len(order) else None


def _holders(processes: tuple, snapshot: Any, reports: Mapping[str, Any] | None, self_pid: int,
             environ: Mapping[str, str]) -> tuple[Holder, ...]:
    """NVML's processes on the GPU, largest first, each named: this kernel ('mine'), another kernel's notebook where its
    report says (matched by the host PID it learned, or by its PID where NVML's numbers are ours), else pid, user and
    command."""
    comparable = getattr(snapshot, "pids", None) is None
    if reports is None and any(not p.is_self for p in processes):
        reports = read_reports()
    by_pid: dict[int, str] = {}
    for report in (reports or {}).values():
        notebook = getattr(report, "notebook", None)
        if not notebook:
            continue
        if isinstance(getattr(report, "host_pid", None), int):
            by_pid[report.host_pid] = notebook
        elif comparable and isinstance(getattr(report, "pid", None), int):
            by_pid.setdefault(report.pid, notebook)
    own = environ.get("JPY_SESSION_NAME") or os.environ.get("JPY_SESSION_NAME") or None
    held = []
    for p in processes:
        mine = bool(p.is_self) or (comparable and p.pid == self_pid)
        held.append(Holder(pid=p.pid, bytes=p.used_bytes, mine=mine,
                           notebook=own if mine else by_pid.get(p.pid), user=p.user, command=p.name))
    return tuple(sorted(held, key=lambda h: -(h.bytes or 0)))


def read_reports() -> dict[str, Any]:
    """The kernels' reports in this user's runtime folder (core/reports.py), or none when they cannot be read."""
    try:
        from .reports import ReportReader

        return ReportReader().reports()
    except Exception:
        return {}


def host_memory() -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in bytes, from /proc/meminfo; None each where it cannot be read."""
    found: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("MemTotal", "MemAvailable"):
                    found[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found.get("MemTotal"), found.get("MemAvailable")


__all__ = ["gather", "host_memory", "physical_index", "read_reports", "report"]
