"""What "idle" means for a kernel holding a GPU, defined once: the culler, the sidebar's line, the activity the
server publishes for JupyterHub and jupyter_server's own culler all read it from here.

A kernel is idle when no cell has run for the time asked (comm and output traffic do not count: the server's
execution clock, server/activity.py, reads only execute requests) and none of its GPU processes, children
included, computes: SM utilization above ``threshold`` % in NVML's per-process samples over the window. Where NVML
gives no per-process figure (MIG devices, older GPUs), the device's own utilization decides, and only when the
kernel's processes are the only ones on it; otherwise the kernel counts as busy. A device that computes for a
process nobody here can place (a container without a host view) makes every kernel holding memory on it busy:
it might be that kernel's child. Memory held at 0 % is idle. Counted busy on a guess is ``measured`` False: never
culled, but not published as activity either (JupyterHub is told only what was measured).

Plain data in, plain data out: ``uses`` come from the server's attribution of one reading (server/gpus.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .i18n import _, said

DEFAULT_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class Use:
    """One process on one device (a GPU, or a MIG device of it) as this server attributes it."""

    kernel: str | None  # the kernel id it belongs to (its own process or a child); None: not this server's
    pid: int | None
    child: bool
    used_mib: int | None
    sm_pct: int | None  # None: NVML gives no per-process figure here
    placed: bool = True  # False: a container's process that nothing here can place (no host view)


@dataclass(frozen=True)
class Device:
    gpu: Any  # the GPU's index as nvidia-smi numbers it (a MIG device: its parent's)
    util_pct: int | None  # the device's own utilization; None where NVML gives none (MIG)
    uses: tuple[Use, ...]


@dataclass(frozen=True)
class GpuWork:
    """What a kernel does on the GPUs in one reading."""

    busy: bool
    measured: bool  # busy from a figure (publish it as activity); False with busy: counted busy, unknown
    gpu: Any = None
    pid: int | None = None
    child: bool = False
    why: str = ""  # for a busy kernel: the sidebar's words ("busy on GPU 1 (child pid 4242)")
    held_mib: int = 0
    gpus: tuple = ()


def gpu_work(devices: list[Device], threshold: float = DEFAULT_THRESHOLD_PCT) -> dict[str, GpuWork]:
    """Every kernel with a process on any device: whether it computes there (see the module's rule)."""
    found: dict[str, GpuWork] = {}
    for device in devices:
        kernels = {u.kernel for u in device.uses if u.kernel is not None}
        for kernel in kernels:
            verdict = _on_device(kernel, device, threshold)
            before = found.get(kernel)
            held = (before.held_mib if before else 0) + sum(
                u.used_mib or 0 for u in device.uses if u.kernel == kernel)
            gpus = (before.gpus if before else ()) + (() if before and device.gpu in before.gpus else (device.gpu,))
            # A measured busy verdict wins over a guessed one, which wins over idle.
            keep = before if before is not None and _rank(before) >= _rank(verdict) else verdict
            found[kernel] = GpuWork(keep.busy, keep.measured, keep.gpu, keep.pid, keep.child, keep.why, held, gpus)
    return found


def _rank(work: GpuWork) -> int:
    return 2 if work.busy and work.measured else 1 if work.busy else 0


def _on_device(kernel: str, device: Device, threshold: float) -> GpuWork:
    mine = [u for u in device.uses if u.kernel == kernel]
    others = [u for u in device.uses if u.kernel != kernel]
    # The whys are said() (core/i18n.py): the server's shared answer is said again in each browser's language.
    gpu = device.gpu
    for use in sorted(mine, key=lambda u: -(u.sm_pct or 0)):
        if use.sm_pct is not None and use.sm_pct > threshold:
            why = said(lambda pid=use.pid, pct=use.sm_pct, child=use.child: (
                _("busy on GPU {gpu} (child pid {pid}, {pct}% SM)") if child else
                _("busy on GPU {gpu} (pid {pid}, {pct}% SM)")).format(gpu=gpu, pid=pid, pct=pct))
            return GpuWork(True, True, gpu, use.pid, use.child, why)
    if any(u.sm_pct is None for u in mine):
        if others:
            return GpuWork(True, False, gpu, why=said(lambda: _(
                "counted busy: NVML gives no per-process utilization on GPU {gpu}, which other processes "
                "share").format(gpu=gpu)))
        if device.util_pct is None:
            return GpuWork(True, False, gpu, why=said(lambda: _(
                "counted busy: NVML gives no utilization for GPU {gpu}").format(gpu=gpu)))
        if device.util_pct > threshold:
            return GpuWork(True, True, gpu, why=said(lambda: _(
                "busy on GPU {gpu} ({pct}% utilization)").format(gpu=gpu, pct=device.util_pct)))
    unplaced = [u for u in others if not u.placed]
    if unplaced:
        known = [u.sm_pct for u in unplaced if u.sm_pct is not None]
        unknown = len(known) < len(unplaced)
        if (known and max(known) > threshold) or (unknown and (device.util_pct is None
                                                               or device.util_pct > threshold)):
            return GpuWork(True, False, gpu, why=said(lambda: _(
                "counted busy: GPU {gpu} computes for a process that cannot be placed here (it may be this "
                "kernel's child)").format(gpu=gpu)))
    return GpuWork(False, True, gpu)


def size(mib: float) -> str:
    return f"{mib / 1024:,.1f} GiB" if mib >= 1024 else f"{mib:,.0f} MiB"


def duration(seconds: float) -> str:
    """A span as people say it: "42 s", "12 min", "3 h 5 min"."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    hours, rest = divmod(seconds, 3600)
    return f"{hours:.0f} h {rest // 60:.0f} min" if rest >= 60 else f"{hours:.0f} h"


def describe(*, running: bool, idle_s: float | None, work: GpuWork | None) -> dict[str, Any]:
    """A kernel's ``activity`` in the server's document: its state ("running" a cell, "gpu_busy", "idle" or
    "unknown"), seconds idle by this module's rule, and the sidebar's line."""
    held = work.held_mib if work else 0
    base = {"idle_s": None, "gpu": None, "pid": None, "child": False, "measured": True, "held_mib": held}
    if running:
        return {**base, "state": "running", "text": said(lambda: _("running a cell"))}
    if work is not None and work.busy:
        return {**base, "state": "gpu_busy", "text": work.why, "gpu": work.gpu, "pid": work.pid, "child": work.child,
                "measured": work.measured}
    if idle_s is None:
        return {**base, "state": "unknown", "text": ""}
    span = duration(idle_s)
    text = said(lambda: (_("idle {span} · holds {size}").format(span=span, size=size(held)) if held else
                         _("idle {span}").format(span=span)))
    return {**base, "state": "idle", "idle_s": round(idle_s, 1), "text": text}
