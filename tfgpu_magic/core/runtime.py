"""TensorFlow adapter: probe its state without changing it, run hooks at its import, and turn a plan
into the exact ``tf.config`` calls that apply it.

Nothing here imports TensorFlow. Functions that act on TensorFlow take the module as an argument, so
the GPU paths can be checked call by call on machines without a GPU (tests pass a recording stand-in
for ``tf.config``), while the CPU paths run against the real thing.
"""

from __future__ import annotations

import enum
import importlib.abc
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import words
from .no_gpu import cpu_only
from .plan import ALL, Plan, format_mib, resolve_size
from .warn import warn


class TFState(enum.IntEnum):
    NOT_INSTALLED = 0
    NOT_IMPORTED = 1
    IMPORTING = 2  # `import tensorflow` is running (in another thread): the module is half made, touch nothing
    IMPORTED = 3
    ENUMERATED = 4  # physical devices listed: CUDA read CUDA_VISIBLE_DEVICES, tf.config setters still work
    INITIALIZED = 5  # the runtime started (first op, list_logical_devices ...): most settings are frozen

    @property
    def label(self) -> str:
        return words.tf_state(self.name.lower())


@dataclass(frozen=True)
class Probe:
    state: TFState
    version: str | None = None

    @property
    def imported(self) -> bool:
        return self.state >= TFState.IMPORTED

    @property
    def enumerated(self) -> bool:
        return self.state >= TFState.ENUMERATED

    @property
    def initialized(self) -> bool:
        return self.state >= TFState.INITIALIZED


def probe() -> Probe:
    """TensorFlow's state, read from private attributes that TensorFlow 2.12 to 2.21 all have.

    It never imports TensorFlow and never creates its context: ``context_safe()`` returns None until
    something else has created one."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        installed = importlib.util.find_spec("tensorflow") is not None
        return Probe(TFState.NOT_IMPORTED if installed else TFState.NOT_INSTALLED)
    # importlib puts the module in sys.modules before running it and flags its spec until it is done.
    # Our own import hooks run at the end of that, with TensorFlow complete: they see it as imported.
    if getattr(getattr(tf, "__spec__", None), "_initializing", False) and not getattr(_in_hooks, "on", False):
        return Probe(TFState.IMPORTING)
    version = getattr(tf, "__version__", None)
    ctx_module = sys.modules.get("tensorflow.python.eager.context")
    ctx = None
    if ctx_module is not None and hasattr(ctx_module, "context_safe"):
        ctx = ctx_module.context_safe()
    if ctx is None:
        return Probe(TFState.IMPORTED, version)
    if getattr(ctx, "_context_handle", None) is not None or getattr(ctx, "_initialized", False):
        return Probe(TFState.INITIALIZED, version)
    if getattr(ctx, "_physical_devices", None) is not None:
        return Probe(TFState.ENUMERATED, version)
    return Probe(TFState.IMPORTED, version)


# --- hooks run at the moment ``import tensorflow`` completes ---------------------------------------

_import_hooks: list[Callable[[Any], None]] = []
_in_hooks = threading.local()  # set in the importing thread while the hooks run


class _HookedLoader(importlib.abc.Loader):
    """Wraps TensorFlow's own loader to run our hooks right after its package has executed: the
    settings land before the importing line returns, so no user op can run first."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        # TensorFlow and importlib.resources look at the loader: let them see the real one.
        module.__loader__ = self._inner
        if module.__spec__ is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        _run_import_hooks(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _ImportWatcher(importlib.abc.MetaPathFinder):
    _searching = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow" or self._searching:
            return None
        self._searching = True
        try:  # ask the finders after us; we are skipped through the flag
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HookedLoader(spec.loader)
        return spec


_watcher = _ImportWatcher()


def add_import_hook(hook: Callable[[Any], None]) -> None:
    """Call ``hook(tensorflow)`` as soon as TensorFlow has been imported. Only meaningful while it is
    not imported yet; the caller checks ``probe()`` first."""
    if hook not in _import_hooks:
        _import_hooks.append(hook)
    if _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)


def remove_import_hook(hook: Callable[[Any], None]) -> None:
    if hook in _import_hooks:
        _import_hooks.remove(hook)
    if not _import_hooks and _watcher in sys.meta_path:
        sys.meta_path.remove(_watcher)


def _run_import_hooks(tf) -> None:
    hooks = list(_import_hooks)
    _import_hooks.clear()
    if _watcher in sys.meta_path:
        sys.meta_path.remove(_watcher)
    _in_hooks.on = True
    try:
        for hook in hooks:
            try:
                hook(tf)
            except Exception as err:  # never break the user's `import tensorflow`
                warn(f"tfgpu: a setting could not be applied at TensorFlow import: {err}")
    finally:
        _in_hooks.on = False


# --- applying a plan ------------------------------------------------------------------------------


class Status(enum.Enum):
    """What became of a setting; the value is its words (core/words.py), the name its key in the data."""

    APPLIED = words.setting_state("applied")
    PENDING = words.setting_state("pending")
    UNCHANGED = words.setting_state("unchanged")
    REFUSED = words.setting_state("refused")
    NO_DEVICE = words.setting_state("no_device")
    NO_GPU = words.setting_state("no_gpu")
    FAILED = words.setting_state("failed")
    NOTEBOOK = words.setting_state("notebook")  # what TensorFlow has, set by the notebook's own tf.config call


@dataclass(frozen=True)
class Outcome:
    """What happened to one setting. ``calls`` are the tf.config calls made, as text. ``per_gpu`` gives
    a per-GPU setting's detail for each physical GPU it names (a view shows each row its own)."""

    setting: str
    status: Status
    detail: str = ""
    calls: tuple[str, ...] = ()
    per_gpu: tuple[tuple[int, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "status": self.status.name.lower(), "detail": self.detail,
                "calls": list(self.calls)}

    def detail_for(self, gpu: int | str) -> str:
        return dict(self.per_gpu).get(gpu, self.detail)


@dataclass(frozen=True)
class _Call:
    """One tf.config call, planned before any is made so a refusal changes nothing."""

    fn: Callable
    text: str
    args: tuple = ()


@dataclass
class _Step:
    status: Status
    detail: str = ""
    calls: list[_Call] = field(default_factory=list)
    by_env: bool = False  # the environment did the work (CUDA_VISIBLE_DEVICES): applied with no call
    per_gpu: tuple[tuple[int, str], ...] = ()


def _name(device) -> str:
    return getattr(device, "name", str(device)).replace("/physical_device:", "")


def _ldc_text(limits: list[int] | None) -> str:
    if limits is None:
        return "None"
    if all(m is None for m in limits):
        return f"[LogicalDeviceConfiguration()] * {len(limits)}"
    return "[" + ", ".join(f"LogicalDeviceConfiguration(memory_limit={m})" for m in limits) + "]"


def _current_limits(tf, device) -> list[int | None] | None:
    current = tf.config.get_logical_device_configuration(device)
    return None if current is None else [c.memory_limit for c in current]


def _logical_call(tf, device, limits: list[int | None] | None) -> _Call:
    configs = None if limits is None else [tf.config.LogicalDeviceConfiguration(memory_limit=m) for m in limits]
    return _Call(lambda: tf.config.set_logical_device_configuration(device, configs),
                 f"tf.config.set_logical_device_configuration({_name(device)}, {_ldc_text(limits)})")


class Adapter:
    """Applies a Plan to one TensorFlow module.

    ``gpu_order`` lists the physical index (NVML / nvidia-smi numbering) of TensorFlow's physical
    ``GPU:k`` for each k, or is None when unknown (then GPU k is taken to be physical GPU k).
    ``totals_mib`` gives each physical GPU's total memory, for percentages.
    """

    def __init__(self, tf, state: TFState, gpu_order: list[int] | None = None,
                 totals_mib: dict[int, int] | None = None, environ=None):
        self.tf = tf
        self.environ = os.environ if environ is None else environ
        self.state = state
        self.gpu_order = gpu_order
        self.totals_mib = totals_mib or {}

    # -- what TensorFlow has -------------------------------------------------------------------
    def physical_gpus(self) -> list:
        return list(self.tf.config.list_physical_devices("GPU"))

    def physical_index(self, k: int) -> int:
        return self.gpu_order[k] if self.gpu_order is not None and k < len(self.gpu_order) else k

    def visible_gpus(self) -> list[tuple[int, Any]]:
        """(physical index, PhysicalDevice) of each GPU TensorFlow will use."""
        visible = {_name(d) for d in self.tf.config.get_visible_devices("GPU")}
        return [(self.physical_index(k), d) for k, d in enumerate(self.physical_gpus()) if _name(d) in visible]

    # -- one setting at a time -----------------------------------------------------------------
    def step(self, setting: str, plan: Plan) -> _Step:
        if setting == "visible":
            return self._visible(plan)
        if setting == "cpus":
            return self._cpus(plan)
        if setting == "growth":
            return self._growth(plan)
        if setting in ("limit", "virtual"):
            return self._logical(plan)
        if setting == "cpumem":
            return self._cpumem(plan)
        raise ValueError(f"unknown setting {setting!r}")  # a bug in the caller

    def apply(self, setting: str, plan: Plan) -> Outcome:
        """Plan the calls for ``setting``; refuse whole if the runtime is initialized and anything
        would change; else make them."""
        step = self.step(setting, plan)
        if step.status is Status.APPLIED and step.calls and self.state >= TFState.INITIALIZED:
            return Outcome(setting, Status.REFUSED, step.detail, tuple(c.text for c in step.calls), step.per_gpu)
        if step.status is Status.APPLIED and not step.calls and not step.by_env:
            step.status = Status.UNCHANGED
        made = []
        for call in step.calls if step.status is Status.APPLIED else ():
            try:
                call.fn()
            except (RuntimeError, ValueError) as err:
                return Outcome(setting, Status.FAILED, f"{call.text} raised: {err}", tuple(made), step.per_gpu)
            made.append(call.text)
        return Outcome(setting, step.status, step.detail, tuple(made) or tuple(c.text for c in step.calls),
                       step.per_gpu)

    def _visible(self, plan: Plan) -> _Step:
        spec = plan.visible
        if spec is None:
            return _Step(Status.APPLIED)
        if self.state < TFState.ENUMERATED:
            # CUDA_VISIBLE_DEVICES (set when the magic ran) decides: CUDA reads it at enumeration.
            return _Step(Status.APPLIED, "through CUDA_VISIBLE_DEVICES", by_env=True)
        if spec.mig:
            mig = spec.mig[0]
            return _Step(Status.NO_DEVICE, f"TensorFlow has listed its GPUs already, and a MIG device ({mig}) is "
                                           "chosen only through CUDA_VISIBLE_DEVICES, which CUDA reads once; restart "
                                           f"the kernel and run `%tfgpu visible {mig}` first")
        gpus = self.physical_gpus()
        if not gpus and cpu_only(self.tf):  # which GPUs are visible changes nothing a CPU-only build does
            return _Step(Status.NO_GPU, "TensorFlow sees no GPU (a CPU-only build); the setting applies where there "
                                        "is one")
        if spec.every:
            wanted = gpus
        else:
            by_physical = {self.physical_index(k): d for k, d in enumerate(gpus)}
            missing = [i for i in spec.indices if i not in by_physical]
            if missing:
                seen = ", ".join(str(i) for i in sorted(by_physical)) or "none"
                # NVML has it (the controller checked): CUDA left it out when TensorFlow listed its devices, once.
                variable = self.environ.get("CUDA_VISIBLE_DEVICES")
                read = f"CUDA_VISIBLE_DEVICES={variable}" if variable is not None else "the devices it found"
                return _Step(Status.NO_DEVICE, f"GPU {missing[0]} is not among TensorFlow's GPUs (physical: {seen}): "
                                               f"CUDA read {read} when TensorFlow listed its devices, and reads it "
                                               f"once; for GPU {missing[0]}, restart the kernel and run `%tfgpu "
                                               "visible` before TensorFlow lists its devices")
            wanted = [d for k, d in enumerate(gpus) if self.physical_index(k) in spec.indices]
        current = [_name(d) for d in self.tf.config.get_visible_devices("GPU")]
        if [_name(d) for d in wanted] == current:
            return _Step(Status.APPLIED)
        names = ", ".join(_name(d) for d in wanted)
        return _Step(Status.APPLIED, "through tf.config.set_visible_devices", [
            _Call(lambda: self.tf.config.set_visible_devices(wanted, "GPU"),
                  f"tf.config.set_visible_devices([{names}], 'GPU')")])

    def cpus_in_force(self) -> int:
        """How many logical CPU devices TensorFlow has configured (1: its default), whoever configured them."""
        current = _current_limits(self.tf, self.tf.config.list_physical_devices("CPU")[0])
        return len(current) if current else 1

    def _cpus(self, plan: Plan) -> _Step:
        count = plan.cpus or 1  # None after `cpus off`: TensorFlow's default of one CPU device
        cpu = self.tf.config.list_physical_devices("CPU")[0]
        detail = f"{count} logical CPU" + ("s" if count > 1 else "")
        if self.cpus_in_force() == count:
            return _Step(Status.APPLIED, detail)
        return _Step(Status.APPLIED, detail, [_logical_call(self.tf, cpu, None if count == 1 else [None] * count)])

    def _cpumem(self, plan: Plan) -> _Step:
        """TF_CPU_ALLOCATOR_USE_BFC is read when the runtime starts (measured: set after `import tensorflow`, before
        the first op, it works). The controller sets the variable; after the start only the effect can be read."""
        if plan.cpumem is None:
            return _Step(Status.APPLIED)
        word = "true" if plan.cpumem else "unset"
        if self.state < TFState.INITIALIZED:
            return _Step(Status.APPLIED, f"TF_CPU_ALLOCATOR_USE_BFC={word}; TensorFlow reads it when its runtime "
                         "starts", by_env=True)
        keeps = cpu_figures_available(self.tf)
        if plan.cpumem and not keeps:
            return _Step(Status.APPLIED, "", [_Call(lambda: None, "TF_CPU_ALLOCATOR_USE_BFC=true before it starts")])
        if not plan.cpumem and keeps and self.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() in ("true", "1"):
            return _Step(Status.APPLIED, "", [_Call(lambda: None, "TF_CPU_ALLOCATOR_USE_BFC unset before it starts")])
        if plan.cpumem:
            return _Step(Status.APPLIED, "TensorFlow's CPU allocator keeps figures")
        return _Step(Status.APPLIED, "TensorFlow's CPU allocator keeps figures anyway (oneDNN's, the default on x86)"
                     if keeps else "")

    def _growth(self, plan: Plan) -> _Step:
        if plan.growth is None:
            return _Step(Status.APPLIED)
        gpus = self.visible_gpus()
        if not gpus:
            return _Step(Status.NO_GPU, "TensorFlow sees no GPU; the setting applies where there is one")
        calls = []
        for _, device in gpus:
            if bool(self.tf.config.experimental.get_memory_growth(device)) != plan.growth:
                calls.append(_Call(lambda d=device: self.tf.config.experimental.set_memory_growth(d, plan.growth),
                                   f"tf.config.experimental.set_memory_growth({_name(device)}, {plan.growth})"))
        return _Step(Status.APPLIED, "", calls)

    def desired_limits(self, plan: Plan, physical: int) -> list[int] | None:
        """MiB per logical device for one physical GPU, or None for TensorFlow's default."""
        virtual, limits = plan.virtual_map, plan.limit_map
        sizes = virtual.get(physical, virtual.get(ALL))
        if sizes is None:
            size = limits.get(physical, limits.get(ALL))
            sizes = None if size is None else (size,)
        if sizes is None:
            return None
        resolved = [resolve_size(s, self.totals_mib.get(physical)) for s in sizes]
        if any(r is None for r in resolved):
            raise LookupError(f"GPU {physical}'s total memory is unknown, so a percentage cannot be turned into MiB")
        return resolved

    def _logical(self, plan: Plan) -> _Step:
        asked = {g for g, _ in plan.limits} | {g for g, _ in plan.virtual}
        gpus = self.visible_gpus()
        present = {p for p, _ in gpus}
        missing = sorted(g for g in asked if g != ALL and g not in present)
        if missing:
            seen = ", ".join(map(str, sorted(present))) or "none"
            per_gpu = tuple((g, f"GPU {g} is not visible to TensorFlow (visible: {seen})" if g in missing else
                             f"not applied: GPU {missing[0]} is not visible to TensorFlow")
                            for g in sorted(g for g in asked if g != ALL))
            return _Step(Status.NO_DEVICE, f"GPU {missing[0]} is not visible to TensorFlow (visible: {seen})",
                         per_gpu=per_gpu)
        if not gpus:
            return _Step(Status.NO_GPU if asked else Status.APPLIED,
                         "TensorFlow sees no GPU; the setting applies where there is one" if asked else "")
        try:
            wants = [(physical, device, self.desired_limits(plan, physical)) for physical, device in gpus]
        except LookupError as err:
            return _Step(Status.FAILED, str(err))
        calls = [_logical_call(self.tf, device, want) for _, device, want in wants
                 if _current_limits(self.tf, device) != want]
        shown = [(physical, "default" if want is None else ", ".join(map(format_mib, want)))
                 for physical, _, want in wants]
        detail = "; ".join(f"GPU {physical}: {text}" for physical, text in shown)
        return _Step(Status.APPLIED, detail, calls, per_gpu=tuple((p, f"GPU {p}: {t}") for p, t in shown))


def cpu_figures_available(tf) -> bool:
    """Whether TensorFlow's CPU allocator keeps figures (BFC, or oneDNN's). Only call once the runtime started:
    asking starts it."""
    try:
        tf.config.experimental.get_memory_info("CPU:0")
        return True
    except (ValueError, RuntimeError):
        return False


def asked_settings(plan: Plan) -> list[str]:
    """The settings a plan says something about, in the order they must be applied: visibility
    decides which GPUs the others touch."""
    asked = []
    if plan.visible is not None:
        asked.append("visible")
    if plan.cpus is not None:
        asked.append("cpus")
    if plan.cpumem is not None:
        asked.append("cpumem")
    if plan.growth is not None:
        asked.append("growth")
    if plan.limits:
        asked.append("limit")
    if plan.virtual:
        asked.append("virtual")
    return asked
