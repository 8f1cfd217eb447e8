"""How a kernel in a container learns the PID NVML gives it, and keeps its report (reports.py) up to date.

NVML lists host PIDs; a process in a PID namespace of its own cannot ask for its host number. What it can see is
NVML's process list on its GPUs just before and just after its framework creates its GPU context: for TensorFlow,
around the creation of its runtime context (``Context.ensure_initialized``, where a GPU build creates its CUDA
context and allocator), whether or not the build sees a GPU. The PID is this kernel's only when exactly one new
PID appeared on its GPUs in that window and it holds memory there. Two new PIDs (another kernel started at the
same moment), or one holding nothing, is ambiguous, and is said so: never guessed, never swapped.

With a host /proc (pidns ``host_proc``) the number is read there and no window is needed. On the host nothing
here runs: NVML's numbers are ours.

``install`` is what ``%load_ext`` calls: it adds an import hook (no TensorFlow import, no NVML, no thread). The
window reads NVML twice in the thread that starts TensorFlow's runtime, once per process; then the live model's
refresher (live.py) keeps the report: a write only when a value changed, at most once a second.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any

from . import pidns

MIB = 1 << 20
_lock = threading.Lock()
_state: dict[str, Any] = {"installed": False, "learned": None, "reporter": None}


def install() -> bool:
    """Watch TensorFlow's runtime start where NVML's PIDs are not this namespace's, in a Jupyter kernel. True when
    watching (or when the runtime had started already: then the report says the host PID cannot be learned)."""
    if _state["installed"] or pidns.view().comparable:  # the host: one stat, nothing more is loaded
        return False
    from . import reports

    kernel = reports.kernel_id()
    if kernel is None:
        return False
    _state["installed"] = True
    _state["kernel"] = kernel
    tf = sys.modules.get("tensorflow")
    if tf is None:
        from .runtime import add_import_hook

        add_import_hook(_patch)
    else:
        _patch(tf)
    return True


def _patch(tf: Any) -> None:
    """Wrap what first creates TensorFlow's devices: the eager runtime context, and a TF1 ``Session`` (graph mode
    creates its devices without the eager context). The first of them to run reads the window; then both are
    TensorFlow's own again."""
    context = sys.modules.get("tensorflow.python.eager.context")
    ctx = context.context_safe() if context is not None and hasattr(context, "context_safe") else None
    if ctx is not None and (getattr(ctx, "_context_handle", None) is not None or getattr(ctx, "_initialized", False)):
        _learned(*_without_window("TensorFlow's runtime started before tfgpu was loaded"))
        return
    session = sys.modules.get("tensorflow.python.client.session")
    targets = [(getattr(context, "Context", None), "ensure_initialized"),
               (getattr(session, "BaseSession", None), "__init__")]
    originals = {(cls, name): getattr(cls, name) for cls, name in targets if getattr(cls, name, None) is not None}
    if not originals:
        _learned(None, None, "this TensorFlow has nothing tfgpu knows how to watch for its GPU context")
        return

    def restore() -> None:
        for (cls, name), original in originals.items():
            setattr(cls, name, original)

    def watched(original: Any) -> Any:
        def first_devices(self, *args, **kwargs):
            if getattr(self, "_initialized", False) or _state["learned"] is not None:
                return original(self, *args, **kwargs)
            with _lock:  # two threads starting the runtime at once: one window
                if _state["learned"] is not None:
                    return original(self, *args, **kwargs)
                before = _window_reading()
                try:
                    return original(self, *args, **kwargs)
                finally:
                    restore()  # once per process: every later call is TensorFlow's own
                    _learned(*_judge(before, _window_reading()))

        first_devices.__wrapped__ = original  # type: ignore[attr-defined]
        return first_devices

    for (cls, name), original in originals.items():
        setattr(cls, name, watched(original))


def _without_window(why: str) -> tuple[int | None, str | None, str]:
    """Where no window can be read: a host /proc still says the number."""
    view = pidns.view()
    if view.mode == pidns.HOST_PROC:
        pid = view.self_host_pid()
        if pid is not None:
            return pid, "host_proc", ""
    return None, None, f"{why}: its host PID cannot be learned, so its GPU memory is not attributed to it"


def _window_reading() -> dict[int, int | None] | str:
    """{host PID: MiB} on this kernel's GPUs (and their MIG devices), or why NVML cannot say."""
    if pidns.view().mode == pidns.HOST_PROC:
        return {}  # not needed: the number is read from the host /proc
    from . import nvml
    from .numbering import cuda_order

    snap = nvml.snapshot()
    if not snap.available or snap.error is not None:
        error = snap.error
        return f"NVML is unavailable ({getattr(error, 'detail', '') or getattr(error, 'reason', '') or 'no reason'})"
    order = cuda_order(os.environ, snap)
    spec = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    found: dict[int, int | None] = {}
    for gpu in snap.gpus:
        places = [m for m in gpu.mig_devices if order is None or gpu.index in order or
                  (isinstance(m.uuid, str) and m.uuid in spec)]
        if order is None or gpu.index in order:
            places.append(gpu)
        for place in places:
            for p in place.processes if isinstance(place.processes, tuple) else ():
                before = found.get(p.pid, 0)
                found[p.pid] = None if p.used_mib is None or before is None else max(before, p.used_mib)
    return found


def _judge(before: dict[int, int | None] | str, after: dict[int, int | None] | str
           ) -> tuple[int | None, str | None, str]:
    """(host PID, how, note) from the two readings around the runtime's start."""
    view = pidns.view()
    if view.mode == pidns.HOST_PROC:
        return _without_window("the host /proc does not show this process")
    if isinstance(before, str) or isinstance(after, str):
        return None, None, f"{before if isinstance(before, str) else after}: its host PID cannot be learned"
    new = {pid: used for pid, used in after.items() if pid not in before}
    if len(new) == 1:
        pid, used = next(iter(new.items()))
        if isinstance(used, int) and used > 0:
            return pid, "handshake", ""
        return None, None, ("ambiguous: the one process that appeared on its GPUs while its TensorFlow started holds "
                            "no memory there; its host PID is not guessed")
    if not new:
        return None, None, ("no process appeared on its GPUs while its TensorFlow started (this TensorFlow uses no "
                            "GPU, or NVML lists no processes): its host PID is not known")
    return None, None, (f"ambiguous: {len(new)} processes appeared on its GPUs while its TensorFlow started (another "
                        "process started at the same moment); which is this kernel's is not guessed")


def _learned(host_pid: int | None, how: str | None, note: str) -> None:
    """Keep what the window said, tell the PID view, and start keeping the report."""
    _state["learned"] = (host_pid, how, note)
    if host_pid is not None and how == "handshake":
        pidns.view().learn_self(host_pid)
    start_report()


def learned() -> tuple[int | None, str | None, str] | None:
    """(host PID, how, note) once the runtime started; None before."""
    return _state["learned"]


def report_values(state: dict[str, Any]) -> dict[str, Any]:
    """The report's values from the live model's state (live.py sections) and what the window learned."""
    host_pid, how, note = _state["learned"] or (None, None, "")
    gpus = (state.get("gpus") or {}).get("gpus") or []
    uuid_of = {g.get("index"): g.get("uuid") for g in gpus if isinstance(g.get("uuid"), str)}
    tensorflow = (state.get("kernel") or {}).get("tensorflow") or {}
    used = [d.get("physical_index") for d in tensorflow.get("physical_devices") or ()
            if d.get("device_type") == "GPU"]
    used_uuids = [uuid_of[i] for i in used if i in uuid_of]
    logical = [m for m in (state.get("memory") or {}).get("devices") or ()
               if str(m.get("device", "")).startswith("GPU:") and m.get("current_mib") is not None]
    memory: dict[str, dict[str, int]] = {}
    if used_uuids and len(logical) == len(used_uuids):  # one logical GPU per physical one: no virtual split
        for uuid, m in zip(used_uuids, logical, strict=True):
            memory[uuid] = {"current": int(m["current_mib"] * MIB), "peak": int((m.get("peak_mib") or 0) * MIB)}
    return {"pid": os.getpid(), "notebook": os.environ.get("JPY_SESSION_NAME") or None, "host_pid": host_pid,
            "how": how, "note": note, "gpus": tuple(used_uuids), "tf_memory": memory}


def start_report() -> None:
    """Write the report now, then let the live model's refresher keep it."""
    from . import reports

    kernel = _state.get("kernel") or reports.kernel_id()
    if kernel is None or _state["reporter"] is not None:
        return
    reporter = _state["reporter"] = reports.Reporter(kernel)
    reporter.update(report_values({}))
    atexit.register(reporter.remove)
    from .live import default_model

    # Every pass: a change kept back within the last second is written by the first pass after it.
    default_model().watch(lambda state: reporter.update(report_values(state)))


__all__ = ["install", "learned", "report_values", "start_report"]
