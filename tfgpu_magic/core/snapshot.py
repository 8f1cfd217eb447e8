"""The snapshot: what the kernel knows now: TensorFlow's state and devices, the settings and what became of them,
the GPUs as NVML sees them (joined to TensorFlow's names), and allocator memory. One object, data only, rendered
by every view (render/text.py and render/views.py; the CLI's JSON; the live model, so the panel and the
sidebar); none re-queries on its own.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from . import words
from .assignment import gpus_text
from .control import Controller, default_controller
from .i18n import N_, _
from .no_gpu import reason as no_gpu_reason
from .no_gpu import will_list_none
from .numbering import cuda_order, tf_names
from .nvml import NvmlSnapshot, to_jsonable
from .runtime import TFState, probe
from .settings import environment_notes
from .settings.cpus import CPU_FIGURES
from .version import SNAPSHOT_SCHEMA, __version__
from .waiting import claims_by_index, gpu_key

STATE_NOTES = {
    TFState.NOT_INSTALLED: N_("GPUs, their processes and `visible` work without it; for the TensorFlow settings, "
                           "pip install 'tfgpu_magic[tensorflow]' (or tensorflow-cpu)"),
    TFState.NOT_IMPORTED: N_("not imported yet: settings wait and take effect at `import tensorflow`"),
    TFState.IMPORTING: N_("being imported (in another thread): settings asked now wait until the import has finished"),
    TFState.IMPORTED: N_("imported, runtime not started: every setting can still change"),
    TFState.ENUMERATED: N_("devices listed, runtime not started: CUDA_VISIBLE_DEVICES is read, tf.config settings "
                        "can still change"),
    TFState.INITIALIZED: N_("runtime initialized: visible devices, memory growth, limits and the CPU split are fixed "
                         "until the kernel restarts"),
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
    current_mib: float | None  # None: TensorFlow keeps no figures for this device's allocator (see note)
    peak_mib: float | None
    note: str = ""
    shared_with: str | None = None  # the device whose allocator this one uses: the same figures, counted once


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
    # The GPUs a scheduler gave this kernel at start (assignment.Given.to_dict()); restricted False: every GPU.
    assignment: dict = field(default_factory=dict)
    # physical index -> who claimed it while choosing by free memory and has not allocated there yet (waiting.py)
    claims: dict[int, str] = field(default_factory=dict)
    # Why TensorFlow lists no GPU while NVML lists some (no_gpu.reason), or None.
    no_gpu: str | None = None

    def given(self, index: int) -> bool:
        """Whether this kernel may use GPU ``index`` (its process was started with it among its GPUs)."""
        a = self.assignment
        return not a.get("restricted") or (a.get("error") is None and index in a.get("indices", ()))

    def given_mig(self, uuid, parent: int) -> bool:
        a = self.assignment
        if not a.get("restricted"):
            return True
        return a.get("error") is None and (uuid in a.get("mig", ()) or parent in a.get("indices", ()))

    def not_given_sentence(self) -> str | None:
        """One sentence on the GPUs NVML lists that this kernel was not given, or None."""
        a = self.assignment
        if not a.get("restricted"):
            return None
        if a.get("error"):
            return f"GPUs of this kernel: {words.MISSING}: {a['error']}"
        others = [g.index for g in self.nvml.gpus if not self.given(g.index)]
        if not others:
            return None
        verb = "are" if len(others) > 1 else "is"
        return (f"{gpus_text(others)} {verb} not available to this kernel: it was given {a['described']} "
                f"({a['source']})")

    # -- data --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        gpus = []
        for gpu in self.nvml.gpus:
            row = to_jsonable(gpu)
            row["tf_name"] = self.tf_gpu_names.get(gpu.index)
            row["given"] = self.given(gpu.index)
            for mig, mig_row in zip(gpu.mig_devices, row.get("mig_devices") or (), strict=False):
                mig_row["given"] = self.given_mig(mig.uuid, gpu.index)
            gpus.append(row)
        return {
            "schema": SNAPSHOT_SCHEMA,
            "taken_at": self.taken_at,
            "pid": self.pid,
            "tfgpu_version": self.tfgpu_version,
            "tensorflow": {
                "state": self.tf_state.name.lower(),
                "version": self.tf_version,
                "note": _(STATE_NOTES[self.tf_state]),  # a sentence for people: the sidebar shows it
                "physical_devices": to_jsonable(self.physical_devices),
                "logical_devices": to_jsonable(self.logical_devices),
                "memory": to_jsonable(self.memory),
                "no_gpu": self.no_gpu,
            },
            "settings": list(self.settings),
            "nvml": {
                "available": self.nvml.available,
                "error": to_jsonable(self.nvml.error),
                "driver_version": to_jsonable(self.nvml.driver_version),
                "cuda_driver_version": to_jsonable(self.nvml.cuda_driver_version),
                "pids": self.nvml.pids,  # None on the host; in a container, why PIDs are not matched by number
            },
            "gpus": gpus,
            "kernel_gpu_memory": list(self.kernel_gpu_memory),
            "numbering": dict(self.numbering),
            "assignment": dict(self.assignment),
            "claims": {str(k): v for k, v in self.claims.items()},
            "notes": list(self.notes),
            "placement": self.placement,
        }

    @property
    def state_note(self) -> str:
        return _(STATE_NOTES[self.tf_state])


def take(controller: Controller | None = None, *, list_devices: bool = False, nvml: NvmlSnapshot | None = None,
         placement: dict | None = None, peaks: dict[str, float] | None = None, kind: type[Snapshot] | None = None
         ) -> Snapshot:
    """Read everything once. ``list_devices`` lets it list TensorFlow's physical devices when TF is
    imported but has not listed them yet (it never starts the runtime). ``peaks``: the highest peak per
    device over the recent cells (the live model resets TensorFlow's own peak before each cell), so a
    peak shown is the peak since the runtime started or the last ``memory --reset``. ``kind``: the class to
    make, a Snapshot subclass that adds its views (render/snapshot.py)."""
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
    no_gpu = None
    if physical is not None and not any(d.device_type == "GPU" for d in physical) and snap.gpus:
        no_gpu = no_gpu_reason(tf, controller.environ, len(snap.gpus))
    # Without TensorFlow there is no GPU:N to name (a PyTorch or JAX kernel numbers devices its own way).
    names = tf_names(order, visible_physical) if state is not TFState.NOT_INSTALLED else {}
    if TFState.NOT_INSTALLED < state < TFState.IMPORTED and snap.gpus and controller.installed_cpu_only():
        # Its build says so before the import: it will name no GPU, whatever is visible.
        names = {}
        no_gpu = will_list_none(len(snap.gpus))
    if tf is not None and state >= TFState.INITIALIZED:
        logical = tuple(Device(d.name.replace("/device:", "").replace("/job:localhost/replica:0/task:0", ""),
                               d.device_type, "logical") for d in tf.config.list_logical_devices())
        memory = tuple(_with_peaks(_memory(tf, logical), peaks or {}))
    return (kind or Snapshot)(
        kernel_gpu_memory=_kernel_gpu_memory(snap, names, memory),
        numbering=_numbering(controller.environ, snap, order), notes=tuple(environment_notes(controller.environ)),
        assignment=_assignment(controller, snap), claims=_claims(controller, snap), no_gpu=no_gpu,
        taken_at=time.time(), pid=os.getpid(), tfgpu_version=__version__, tf_state=state,
        tf_version=state_probe.version, physical_devices=physical, logical_devices=logical,
        settings=tuple(controller.settings()), nvml=snap, tf_gpu_names=names, memory=memory, placement=placement)


def _claims(controller: Controller, snap: NvmlSnapshot) -> dict[int, str]:
    claims = getattr(controller, "claims", None)
    if claims is None or not snap.available:
        return {}
    found = {index: claim.describe() for index, claim in claims_by_index(claims, snap).items()}
    held = set(claims.held())
    for gpu in snap.gpus:
        procs = gpu.processes if isinstance(gpu.processes, tuple) else ()
        if gpu_key(gpu) in held and not any(p.is_self for p in procs):
            found[gpu.index] = "claimed by this kernel until TensorFlow allocates there"
    return found


def _assignment(controller: Controller, snap: NvmlSnapshot) -> dict:
    given = getattr(controller, "given", None)  # a stand-in controller of a test may have none
    return given(snap).to_dict() if given is not None else {}


def _numbering(environ, snap: NvmlSnapshot, order: list[int] | None) -> dict:
    device_order = environ.get("CUDA_DEVICE_ORDER")
    note = ""
    models = {g.name for g in snap.gpus if isinstance(g.name, str)}
    if device_order != "PCI_BUS_ID" and len(models) > 1:
        # Its fix as its own words: render/shell_words.py says it for a shell, in either language.
        note = _("CUDA_DEVICE_ORDER is {order}: with mixed GPU models CUDA, and so TensorFlow, may number them "
                 "differently from nvidia-smi; {fix}").format(order=device_order or _("unset (FASTEST_FIRST)"),
                                                             fix=_("`%tfgpu visible` sets PCI_BUS_ID"))
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
    why = _("NVML's process list does not show this process (in a container NVML reports host PIDs)") \
        if snap.available else _("NVML is unavailable")
    note = _("{why}; the CUDA context is not counted").format(why=why)
    return tuple({"physical_index": None, "tf_name": m.device, "used_mib": round(m.current_mib, 1),
                  "source": "tensorflow_allocator", "note": note}
                 for m in memory if m.device.startswith("GPU") and m.current_mib is not None)


def _memory(tf, logical: tuple[Device, ...]):
    """Allocator figures per logical device, every one listed. TensorFlow gives every logical CPU one allocator
    (ProcessState's, per NUMA node, and NUMA is off by default): CPU:1 and on report CPU:0's figures, which a
    view shows once. Where TensorFlow keeps no figures, none are made up: the note says why."""
    first_cpu: Memory | None = None
    for device in logical:
        if device.device_type not in ("CPU", "GPU"):
            continue
        try:
            info = tf.config.experimental.get_memory_info(device.name)
            current, peak, why = info["current"] / 2**20, info["peak"] / 2**20, ""
        except (ValueError, RuntimeError) as err:
            current = peak = None
            why = _no_figures(device, str(err))
        if device.device_type == "GPU":
            yield Memory(device.name, current, peak, why)
            continue
        if first_cpu is None:
            cpus = sum(d.device_type == "CPU" for d in logical)
            shared = "one allocator, shared by every logical CPU" if cpus > 1 and not why else ""
            first_cpu = Memory(device.name, current, peak, why or shared)
            yield first_cpu
        elif (current, peak) == (first_cpu.current_mib, first_cpu.peak_mib):
            note = f"shares {first_cpu.device}'s allocator" + (": no figures either" if current is None else "")
            yield Memory(device.name, current, peak, note, shared_with=first_cpu.device)
        else:  # figures of its own: an allocator of its own (a NUMA node of its own)
            yield Memory(device.name, current, peak, why)


def _with_peaks(memory, peaks: dict[str, float]):
    for m in memory:
        peak = peaks.get(m.shared_with or m.device, 0)  # a logical CPU sharing CPU:0's allocator has its figures
        if m.peak_mib is not None and peak > m.peak_mib:
            m = Memory(m.device, m.current_mib, peak, m.note, m.shared_with)
        yield m


def _no_figures(device: Device, error: str) -> str:
    if device.device_type == "CPU" and "not available" in error:
        # TensorFlow's plain CPU allocator keeps no statistics; its BFC allocator does (and so does oneDNN's,
        # the default in x86 builds): the setting that asks for it says how.
        fix = CPU_FIGURES.how_to_get_figures(os.environ)
        return f"no figures: TensorFlow's CPU allocator keeps none in this configuration; {fix}"
    return f"no figures: {error}"
