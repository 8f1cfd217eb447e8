"""The snapshot: what the kernel knows now: TensorFlow's state and devices, the settings and what became of them,
the GPUs as NVML sees them (joined to TensorFlow's names), and allocator memory. One object, rendered
by every view (status text, HTML, CLI JSON, the panel and sidebar later); none re-queries on its own.
"""

from __future__ import annotations

import html
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .control import Controller, default_controller, environment_notes
from .numbering import cuda_order, tf_names
from .nvml import NvmlSnapshot, Unavailable, to_jsonable
from .runtime import TFState, probe

SCHEMA_VERSION = 1

_STATE_NOTES = {
    TFState.NOT_INSTALLED: "TensorFlow is not installed: pip install 'tfgpu_magic[tensorflow]' (or tensorflow-cpu)",
    TFState.NOT_IMPORTED: "not imported yet: settings wait and take effect at `import tensorflow`",
    TFState.IMPORTING: "being imported (in another thread): settings asked now wait until the import has finished",
    TFState.IMPORTED: "imported, runtime not started: every setting can still change",
    TFState.ENUMERATED: "devices listed, runtime not started: CUDA_VISIBLE_DEVICES is read, tf.config settings "
                        "can still change",
    TFState.INITIALIZED: "runtime initialized: visible devices, memory growth, limits and the CPU split are fixed "
                         "until the kernel restarts",
}


@dataclass(frozen=True)
class Device:
    name: str  # TensorFlow's, like "GPU:0" or "CPU:1"
    device_type: str
    kind: str  # physical | logical
    physical_index: int | None = None  # GPUs: nvidia-smi's number, when known


@dataclass(frozen=True)
class Memory:
    device: str
    current_mib: float
    peak_mib: float
    note: str = ""


@dataclass(frozen=True)
class Snapshot:
    taken_at: float
    pid: int
    tfgpu_version: str
    tf_state: TFState
    tf_version: str | None
    physical_devices: tuple[Device, ...] | None  # None: not listed (listing would enumerate devices)
    logical_devices: tuple[Device, ...] | None  # None: runtime not initialized (listing would start it)
    settings: tuple[dict, ...]
    nvml: NvmlSnapshot
    tf_gpu_names: dict[int, str] = field(default_factory=dict)  # physical index -> "GPU:N"
    memory: tuple[Memory, ...] | None = None
    placement: dict | None = None
    # The GPU memory this process holds: from its NVML process entry, else TensorFlow's allocator.
    kernel_gpu_memory: tuple[dict, ...] = ()
    # How physical indices map to CUDA ordinals here, and a warning when they may not match.
    numbering: dict = field(default_factory=dict)
    # Environment variables that change what the settings do (TF_FORCE_GPU_ALLOW_GROWTH ...), as sentences.
    notes: tuple[str, ...] = ()

    # -- data --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        gpus = []
        for gpu in self.nvml.gpus:
            row = to_jsonable(gpu)
            row["tf_name"] = self.tf_gpu_names.get(gpu.index)
            gpus.append(row)
        return {
            "schema": SCHEMA_VERSION,
            "taken_at": self.taken_at,
            "pid": self.pid,
            "tfgpu_version": self.tfgpu_version,
            "tensorflow": {
                "state": self.tf_state.name.lower(),
                "version": self.tf_version,
                "note": _STATE_NOTES[self.tf_state],
                "physical_devices": to_jsonable(self.physical_devices),
                "logical_devices": to_jsonable(self.logical_devices),
                "memory": to_jsonable(self.memory),
            },
            "settings": list(self.settings),
            "nvml": {
                "available": self.nvml.available,
                "error": to_jsonable(self.nvml.error),
                "driver_version": to_jsonable(self.nvml.driver_version),
                "cuda_driver_version": to_jsonable(self.nvml.cuda_driver_version),
            },
            "gpus": gpus,
            "kernel_gpu_memory": list(self.kernel_gpu_memory),
            "numbering": dict(self.numbering),
            "notes": list(self.notes),
            "placement": self.placement,
        }

    # -- text --------------------------------------------------------------------------------------
    def tf_line(self) -> str:
        version = f" {self.tf_version}" if self.tf_version else ""
        return f"TensorFlow{version}: {self.tf_state.label} ({_STATE_NOTES[self.tf_state]})"

    def settings_lines(self) -> list[str]:
        notes = [f"Note: {n}" for n in self.notes]
        if not self.settings:
            return ["Settings: none asked (`%tfgpu help` lists them)", *notes]
        rows = [(s["setting"], s["asked"], s["status"], s["detail"]) for s in self.settings]
        return ["Settings:", *_table(("setting", "asked", "status", "detail"), rows), *notes]

    def device_lines(self) -> list[str]:
        lines = []
        if self.physical_devices is None:
            lines.append("TensorFlow devices: not listed yet (`%tfgpu devices` lists them)")
        else:
            phys = ", ".join(_device_label(d) for d in self.physical_devices) or "none"
            lines.append(f"TensorFlow physical devices: {phys}")
        if self.logical_devices is None:
            if self.tf_state >= TFState.IMPORTED:
                lines.append("TensorFlow logical devices: appear when the runtime starts (its first operation)")
        else:
            lines.append("TensorFlow logical devices: " + (", ".join(d.name for d in self.logical_devices) or "none"))
        return lines

    def gpu_lines(self) -> list[str]:
        if not self.nvml.available:
            return [f"GPUs (NVML): unavailable: {_na(self.nvml.error)}"]

        def named(label: str, value) -> str:
            # The adapter's details name their field already ("driver version: ..."): no label twice.
            return value.detail if isinstance(value, Unavailable) and value.detail else f"{label} {_na(value)}"

        def figure(value, unit: str) -> str:
            # A unit belongs to a number; a missing figure reads as its reason alone.
            return f"{value}{unit}" if isinstance(value, int | float) else _na(value)

        versions = f"{named('driver', self.nvml.driver_version)}, {named('CUDA', self.nvml.cuda_driver_version)}"
        head = f"GPUs (NVML, {versions}):"
        if not self.nvml.gpus:
            if self.nvml.error is not None:  # no list because the count failed: "none" would be untrue
                return [head + f" unknown: the count could not be read ({_na(self.nvml.error)})"]
            return [head + " none"]
        rows = []
        for gpu in self.nvml.gpus:
            tf_name = self.tf_gpu_names.get(gpu.index, "-")
            if gpu.error is not None:
                name = gpu.name if isinstance(gpu.name, str) else "?"
                rows.append((str(gpu.index), tf_name, name, f"unavailable: {_na(gpu.error)}", "", ""))
                continue
            used, total = gpu.memory_used_mib, gpu.memory_total_mib
            if isinstance(used, int) and isinstance(total, int):
                memory = f"{used} / {total} MiB"
            elif used == total:  # both from one failed call: say why once
                memory = _na(used)
            else:
                memory = f"{figure(used, ' MiB')} / {figure(total, ' MiB')}"
            procs = gpu.processes
            if isinstance(procs, Unavailable):
                proc_text = _na(procs)  # the column says these are processes; the detail often does too
            else:
                proc_text = ", ".join(
                    f"{p.pid}{'*' if p.is_self else ''} {p.name or '?'} "
                    + ("? MiB" if p.used_mib is None else f"{p.used_mib} MiB") for p in procs) or "-"
            rows.append((str(gpu.index), tf_name, _na(gpu.name), memory, figure(gpu.utilization_gpu_pct, "%"),
                         proc_text))
        lines = [head, *_table(("gpu", "tf", "name", "memory used/total", "util", "processes (* = this kernel)"),
                               rows)]
        if self.numbering.get("note"):
            lines.append(f"Numbering: {self.numbering['note']}")
        for own in self.kernel_gpu_memory:
            where = f"GPU {own['physical_index']}" if own["physical_index"] is not None else ""
            lines.append(f"This kernel: {where} ({own['tf_name'] or 'not used by TensorFlow'}) "
                         f"{figure(own['used_mib'], ' MiB')}, from {own['source'].replace('_', ' ')}"
                         + (f" ({own['note']})" if own.get("note") else ""))
        return lines

    def memory_lines(self) -> list[str]:
        if self.memory is None:
            return ["TensorFlow memory: nothing allocated yet (the runtime has not started)"]
        rows = [(m.device, f"{m.current_mib:.1f}", f"{m.peak_mib:.1f}", m.note) for m in self.memory]
        return ["TensorFlow allocator memory (MiB):", *_table(("device", "current", "peak", "note"), rows)]

    def devices_text(self) -> str:
        return "\n".join([self.tf_line(), *self.device_lines(), *self.gpu_lines()])

    def to_text(self) -> str:
        lines = [self.tf_line(), *self.settings_lines(), *self.device_lines(), *self.gpu_lines()]
        if self.placement:
            lines.append("Placement capture: " + ", ".join(f"{k}={v}" for k, v in self.placement.items()))
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle):
        printer.text(self.to_text())

    def _repr_html_(self) -> str:
        return html_block(self.to_text())


def _na(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, Unavailable):
        return value.detail or value.reason.replace("_", " ")
    return str(value)


def _device_label(device: Device) -> str:
    if device.physical_index is not None:
        return f"{device.name} (physical GPU {device.physical_index})"
    return device.name


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header).rstrip(), *(fmt.format(*map(str, r)).rstrip() for r in rows)]


def html_block(text: str) -> str:
    return f"<pre class='tfgpu'>{html.escape(text)}</pre>"


def take(controller: Controller | None = None, *, list_devices: bool = False, nvml: NvmlSnapshot | None = None,
         placement: dict | None = None) -> Snapshot:
    """Read everything once. ``list_devices`` lets it list TensorFlow's physical devices when TF is
    imported but has not listed them yet (it never starts the runtime)."""
    controller = controller or default_controller()
    state_probe = probe()
    state = state_probe.state
    snap = nvml if nvml is not None else controller.nvml()
    order = cuda_order(controller.environ, snap)
    physical = logical = memory = None
    visible_physical = None
    tf = sys.modules.get("tensorflow")
    if tf is not None and (state >= TFState.ENUMERATED or (list_devices and state >= TFState.IMPORTED)):
        gpus = list(tf.config.list_physical_devices("GPU"))
        visible = {d.name for d in tf.config.get_visible_devices("GPU")}
        phys = []
        visible_physical = []
        for device in tf.config.list_physical_devices():
            index = None
            if device.device_type == "GPU":
                k = gpus.index(device)
                index = order[k] if order is not None and k < len(order) else None
                if device.name in visible and index is not None:
                    visible_physical.append(index)
            phys.append(Device(device.name.replace("/physical_device:", ""), device.device_type, "physical", index))
        physical = tuple(phys)
    state = probe().state  # listing devices above may have moved it to "enumerated"
    names = tf_names(order, visible_physical)
    if tf is not None and state >= TFState.INITIALIZED:
        logical = tuple(Device(d.name.replace("/device:", "").replace("/job:localhost/replica:0/task:0", ""),
                               d.device_type, "logical") for d in tf.config.list_logical_devices())
        memory = tuple(_memory(tf, logical))
    return Snapshot(
        kernel_gpu_memory=_kernel_gpu_memory(snap, names, memory),
        numbering=_numbering(controller.environ, snap, order), notes=tuple(environment_notes(controller.environ)),
        taken_at=time.time(), pid=os.getpid(), tfgpu_version=__version__, tf_state=state,
        tf_version=state_probe.version, physical_devices=physical, logical_devices=logical,
        settings=tuple(controller.settings()), nvml=snap, tf_gpu_names=names, memory=memory, placement=placement)


def _numbering(environ, snap: NvmlSnapshot, order: list[int] | None) -> dict:
    device_order = environ.get("CUDA_DEVICE_ORDER")
    note = ""
    models = {g.name for g in snap.gpus if isinstance(g.name, str)}
    if device_order != "PCI_BUS_ID" and len(models) > 1:
        note = (f"CUDA_DEVICE_ORDER is {device_order or 'unset (FASTEST_FIRST)'}: with mixed GPU models CUDA, and so "
                "TensorFlow, may number them differently from nvidia-smi; `%tfgpu visible` sets PCI_BUS_ID")
    return {"cuda_device_order": device_order, "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
            "cuda_order": order, "note": note}


def _kernel_gpu_memory(snap: NvmlSnapshot, names: dict[int, str], memory) -> tuple[dict, ...]:
    own = []
    for gpu in snap.gpus:
        if isinstance(gpu.processes, tuple):
            own += [{"physical_index": gpu.index, "tf_name": names.get(gpu.index), "used_mib": p.used_mib,
                     "source": "nvml_process", "note": ""} for p in gpu.processes if p.is_self]
    if own or not memory:
        return tuple(own)
    # NVML does not list this process (containers report host PIDs, or no NVML at all): fall back
    # to what TensorFlow's own allocator holds, which leaves out the CUDA context.
    why = "NVML's process list does not show this process (in a container NVML reports host PIDs)" \
        if snap.available else "NVML is unavailable"
    return tuple({"physical_index": None, "tf_name": m.device, "used_mib": round(m.current_mib, 1),
                  "source": "tensorflow_allocator", "note": f"{why}; the CUDA context is not counted"}
                 for m in memory if m.device.startswith("GPU"))


def _memory(tf, logical: tuple[Device, ...]):
    seen_cpu = False
    for device in logical:
        if device.device_type == "CPU":
            if seen_cpu:  # all logical CPUs share one allocator: report it once
                continue
            seen_cpu = True
        elif device.device_type != "GPU":
            continue
        try:
            info = tf.config.experimental.get_memory_info(device.name)
        except (ValueError, RuntimeError) as err:
            yield Memory(device.name, 0.0, 0.0, f"unavailable: {err}")
            continue
        note = "shared by every logical CPU" if device.device_type == "CPU" else ""
        yield Memory(device.name, info["current"] / 2**20, info["peak"] / 2**20, note)
