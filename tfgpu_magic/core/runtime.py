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
from .plan import Plan
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
    """What became of a setting; the value is its English words (core/words.py), the name its key in the data;
    ``said`` is its words in the language in force (core/i18n.py), read when shown, never fixed at import."""

    APPLIED = words.SETTING_STATES["applied"][0]
    PENDING = words.SETTING_STATES["pending"][0]
    UNCHANGED = words.SETTING_STATES["unchanged"][0]
    REFUSED = words.SETTING_STATES["refused"][0]
    NO_DEVICE = words.SETTING_STATES["no_device"][0]
    NO_GPU = words.SETTING_STATES["no_gpu"][0]
    FAILED = words.SETTING_STATES["failed"][0]
    NOTEBOOK = words.SETTING_STATES["notebook"][0]  # what TensorFlow has, set by the notebook's own tf.config call

    @property
    def said(self) -> str:
        return words.setting_state(self.name.lower())


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
class Call:
    """One tf.config call, planned before any is made so a refusal changes nothing."""

    fn: Callable
    text: str
    args: tuple = ()


@dataclass
class Step:
    status: Status
    detail: str = ""
    calls: list[Call] = field(default_factory=list)
    by_env: bool = False  # the environment did the work (CUDA_VISIBLE_DEVICES): applied with no call
    per_gpu: tuple[tuple[int, str], ...] = ()


def device_name(device) -> str:
    return getattr(device, "name", str(device)).replace("/physical_device:", "")


def _ldc_text(limits: list[int] | None) -> str:
    if limits is None:
        return "None"
    if all(m is None for m in limits):
        return f"[LogicalDeviceConfiguration()] * {len(limits)}"
    return "[" + ", ".join(f"LogicalDeviceConfiguration(memory_limit={m})" for m in limits) + "]"


def current_limits(tf, device) -> list[int | None] | None:
    current = tf.config.get_logical_device_configuration(device)
    return None if current is None else [c.memory_limit for c in current]


def _unset_logical(tf, device) -> None:
    """Back to TensorFlow's default for ``device`` (one logical device, no limit): its setter iterates what it is
    given, so None raises TypeError (2.21), and [] would leave no device. Its context keeps the map privately."""
    if tf.config.get_logical_device_configuration(device) is None:
        return
    context = sys.modules.get("tensorflow.python.eager.context")
    ctx = context.context() if context is not None else None
    mapping = getattr(ctx, "_virtual_device_map", None)
    if not isinstance(mapping, dict):  # no such map (a stand-in for tf.config): its setter as it is
        tf.config.set_logical_device_configuration(device, None)
        return
    if getattr(ctx, "_context_handle", None) is not None:
        raise RuntimeError("Virtual devices cannot be modified after being initialized")
    mapping.pop(device, None)


def logical_call(tf, device, limits: list[int | None] | None) -> Call:
    if limits is None:
        return Call(lambda: _unset_logical(tf, device),
                    f"tf.config.set_logical_device_configuration({device_name(device)}, None)")
    configs = [tf.config.LogicalDeviceConfiguration(memory_limit=m) for m in limits]
    return Call(lambda: tf.config.set_logical_device_configuration(device, configs),
                f"tf.config.set_logical_device_configuration({device_name(device)}, {_ldc_text(limits)})")


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
        visible = {device_name(d) for d in self.tf.config.get_visible_devices("GPU")}
        return [(self.physical_index(k), d) for k, d in enumerate(self.physical_gpus()) if device_name(d) in visible]

    def apply(self, setting, plan: Plan) -> Outcome:
        """Plan the calls for ``setting`` (a core/settings Setting: its ``step``); refuse whole if the runtime is
        initialized and anything would change; else make them."""
        step = setting.step(self, plan)
        name = setting.name
        if step.status is Status.APPLIED and step.calls and self.state >= TFState.INITIALIZED:
            return Outcome(name, Status.REFUSED, step.detail, tuple(c.text for c in step.calls), step.per_gpu)
        if step.status is Status.APPLIED and not step.calls and not step.by_env:
            step.status = Status.UNCHANGED
        made = []
        for call in step.calls if step.status is Status.APPLIED else ():
            try:
                call.fn()
            except (RuntimeError, ValueError) as err:
                return Outcome(name, Status.FAILED, f"{call.text} raised: {err}", tuple(made), step.per_gpu)
            made.append(call.text)
        return Outcome(name, step.status, step.detail, tuple(made) or tuple(c.text for c in step.calls),
                       step.per_gpu)


def cpu_figures_available(tf) -> bool:
    """Whether TensorFlow's CPU allocator keeps figures (BFC, or oneDNN's). Only call once the runtime started:
    asking starts it."""
    try:
        tf.config.experimental.get_memory_info("CPU:0")
        return True
    except (ValueError, RuntimeError):
        return False
