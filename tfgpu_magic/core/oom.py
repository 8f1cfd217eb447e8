"""Out of memory, explained: what TensorFlow asked for, where, who holds that memory, the likely cause and the next
steps, as the OOM card's data (MIME type ``application/vnd.tfgpu.oom+json``, schema 1).

Three parts, each usable alone:

- ``parse(text)``: TensorFlow's own OOM texts as an ``Asked`` (shape, dtype, bytes, device, allocator): the runtime's
  "OOM when allocating tensor with shape[...] and type float on .../device:GPU:0 by allocator GPU_0_bfc", XLA's
  "Out of memory while trying to allocate N bytes", and either inside a wrapper (Keras' "Exception encountered when
  calling ...", a graph's "Graph execution error: ..."). ``oom_error(exc)`` finds TensorFlow's ResourceExhaustedError
  in an exception or its ``__cause__``/``__context__`` chain by its classes' names, importing nothing.
- ``gather(...)``: the figures, from TensorFlow (passed in, never imported here), NVML's snapshot, the kernels'
  reports and the registry's settings, into ``Facts``. It never starts TensorFlow's runtime or enumerates its devices.
- ``diagnose(facts)``: pure; the cause in one sentence, two or three steps as magics, and the settings a Restart button
  would save. ``card(facts)`` is the contract's dict (render/oom.py draws it as text and HTML).

No IPython, ipywidgets, tornado or jupyter_server here, and no TensorFlow import.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

MIME = "application/vnd.tfgpu.oom+json"
SCHEMA = 1
GIB = 1 << 30
MIB = 1 << 20

# Bytes per element of TensorFlow's type names as its messages write them (DataTypeString). The quantized and 8-bit
# float types are one byte; string, resource and variant have no fixed size, and 4-bit ints no whole byte: None.
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "float16": 2, "float32": 4, "float64": 8,
    "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1,
    "complex64": 8, "complex128": 16, "qint8": 1, "quint8": 1, "qint16": 2, "quint16": 2, "qint32": 4,
    "float8_e5m2": 1, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e4m3b11fnuz": 1, "float8_e5m2fnuz": 1,
}

_TF_OOM = re.compile(
    r"OOM when allocating tensor (?:with|of) shape\s*\[(?P<shape>[^\]]*)\]\s*and type (?P<dtype>\w+)"
    r"(?: on (?P<device>\S+?))?(?: by allocator (?P<allocator>[\w.:-]+))?(?=[\s\[]|$)")
_XLA_OOM = re.compile(r"Out of memory while trying to allocate (?P<bytes>\d+) bytes")
_DEVICE = re.compile(r"(?:/device:|\b)(?P<kind>CPU|GPU):(?P<index>\d+)\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_OP_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\]\s*$")
_MAX_CHAIN = 32  # exceptions followed through __cause__ / __context__
_MAX_TEXT = 200_000  # a message longer than this is read only this far


@dataclass(frozen=True)
class Asked:
    """What one OOM text says TensorFlow asked for. Any part the text does not give is None."""

    message: str  # the OOM's own line, trimmed (no ANSI codes, no trailing "[Op:Fill]")
    form: str  # "tf" (the runtime's allocator) or "xla"
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    bytes: int | None = None
    device: str | None = None  # "CPU:0", "GPU:1"
    allocator: str | None = None  # "mklcpu", "GPU_0_bfc", "GPU_0_cuda_malloc_async" ...

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape) if self.shape is not None else None, "dtype": self.dtype,
                "bytes": self.bytes, "device": self.device, "allocator": self.allocator}


def short_device(text: str | None) -> str | None:
    """"/job:localhost/replica:0/task:0/device:GPU:0" (or "/GPU:0", "gpu:0") as "GPU:0"; None for no device."""
    if not text:
        return None
    found = _DEVICE.search(text.upper().replace("/DEVICE:", "/device:"))
    return f"{found['kind']}:{int(found['index'])}" if found else None


def element_bytes(dtype: str | None) -> int | None:
    return DTYPE_BYTES.get(dtype.lower()) if dtype else None


def parse(text: str) -> Asked | None:
    """The OOM in ``text`` (TensorFlow's runtime form first, then XLA's), or None when it says no OOM."""
    text = _ANSI.sub("", str(text)[:_MAX_TEXT])
    found = _TF_OOM.search(text)
    if found is not None:
        shape = _shape(found["shape"])
        size = element_bytes(found["dtype"])
        count = math.prod(shape) if shape is not None else None
        return Asked(message=" ".join(found.group(0).split()), form="tf", shape=shape, dtype=found["dtype"],
                     bytes=count * size if count is not None and size is not None else None,
                     device=short_device(found["device"]), allocator=found["allocator"])
    found = _XLA_OOM.search(text)
    if found is not None:
        return Asked(message=_line_of(text, found.start()), form="xla", bytes=int(found["bytes"]),
                     device=short_device(text))
    return None


def _shape(text: str) -> tuple[int, ...] | None:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):  # an unknown dimension ("?", -1): no size to compute
        return None
    return tuple(int(p) for p in parts)


def _line_of(text: str, at: int) -> str:
    """The OOM's own words: from where they start to the end of their line, without a trailing "[Op:Fill]"."""
    end = text.find("\n", at)
    return _OP_SUFFIX.sub("", " ".join(text[at:end if end >= 0 else len(text)].split()))


# -- finding it in an exception -------------------------------------------------------------------------------------
def chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during (``__cause__`` before ``__context__``), each once."""
    seen: set[int] = set()
    todo = [exc] if exc is not None else []
    while todo and len(seen) < _MAX_CHAIN:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def is_resource_exhausted(exc: BaseException) -> bool:
    """Whether ``exc`` is TensorFlow's ResourceExhaustedError (or a subclass), by its classes' names and modules."""
    return any(cls.__name__ == "ResourceExhaustedError" and cls.__module__.startswith(("tensorflow", "tf_keras"))
               for cls in type(exc).__mro__)


def oom_error(exc: BaseException | None) -> BaseException | None:
    """TensorFlow's ResourceExhaustedError in ``exc``'s chain, or None. Costs a few attribute reads for an
    exception of any other kind, and imports nothing."""
    if exc is None or "tensorflow" not in sys.modules:
        return None
    for current in chain(exc):
        if is_resource_exhausted(current):
            return current
    return None


def message_of(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else str(exc)


def asked_of(exc: BaseException, found: BaseException | None = None) -> Asked:
    """What the error says was asked: from the ResourceExhaustedError's text, else any text in the chain (a wrapper
    may carry the only copy), else an Asked with only its first line."""
    for current in [found, *chain(exc)] if found is not None else chain(exc):
        if current is None:
            continue
        asked = parse(message_of(current))
        if asked is not None:
            return asked
    text = _ANSI.sub("", message_of(found or exc))
    first = next((" ".join(line.split()) for line in text.splitlines() if line.strip()), "")
    return Asked(message=_OP_SUFFIX.sub("", first), form="unknown")


# -- the figures ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Holder:
    pid: int | None
    bytes: int | None
    mine: bool = False
    notebook: str | None = None
    user: str | None = None
    command: str | None = None

    @property
    def text(self) -> str:
        if self.mine:
            return f"this kernel ({self.notebook})" if self.notebook else "this kernel"
        if self.notebook:
            return f"{self.notebook} (another kernel, pid {self.pid})"
        who = ", ".join(x for x in (self.user, self.command) if x)
        if self.pid is None:
            return who or "a process"
        return f"pid {self.pid} ({who})" if who else f"pid {self.pid} (not placeable from here)"

    def to_dict(self) -> dict[str, Any]:
        return {"notebook": self.notebook, "pid": self.pid, "user": self.user, "bytes": self.bytes,
                "mine": self.mine, "text": self.text, "command": self.command}


@dataclass(frozen=True)
class Facts:
    """Everything the card says, gathered once. ``registered``: the registry's setting names (a step or suggestion
    naming a setting that is not registered is left out)."""

    asked: Asked
    error: str = "ResourceExhaustedError"
    device: str | None = None
    physical_index: int | None = None
    tf_current: int | None = None
    tf_peak: int | None = None
    settings: tuple[tuple[str, str], ...] = ()
    gpu_name: str | None = None
    gpu_total: int | None = None
    gpu_free: int | None = None
    gpu_why: str = ""  # why there are no GPU figures
    holders: tuple[Holder, ...] = ()
    growth: bool | None = None  # memory growth on the failing GPU, where known
    host_total: int | None = None
    host_available: int | None = None
    execution_count: int | None = None
    registered: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kind(self) -> str:
        return "gpu" if (self.device or "").startswith("GPU") else "cpu"


# -- the cause and the steps: pure --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Diagnosis:
    cause: str
    steps: tuple[dict[str, str | None], ...]
    suggested: dict[str, str]
    case: str  # which rule decided: "cpu", "too_big", "others", "fragmented", "mine_reserved", "mine_used", "unknown"


def size_text(value: int | None) -> str:
    """Bytes as people read them: "4.0 TiB", "512.0 MiB"; exact figures stay in the data."""
    if value is None:
        return "an unknown amount"
    for unit, scale in (("TiB", 1 << 40), ("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value} bytes"


def _gb(value: int) -> str:
    """A whole number of GB (the magics' GB is GiB), rounded up, at least 1."""
    return f"{max(1, math.ceil(value / GIB))}GB"


def _step(magic: str | None, why: str) -> dict[str, str | None]:
    return {"magic": magic, "why": why}


SMALLER = "a smaller batch (or smaller tensors): fewer samples per step need proportionally less memory"


def diagnose(facts: Facts) -> Diagnosis:
    """The likely cause and what to do, from the figures alone."""
    asked = facts.asked
    need = size_text(asked.bytes)
    what = f"{need} for a {asked.dtype} tensor of shape {list(asked.shape)}" if asked.shape is not None \
        and asked.dtype else need
    device = facts.device or "its device"
    if facts.kind == "cpu":
        return _cpu(facts, what)
    total, free = facts.gpu_total, facts.gpu_free
    where = f"GPU {facts.physical_index} (TensorFlow's {device})" if facts.physical_index is not None else device
    mine = sum(h.bytes or 0 for h in facts.holders if h.mine) or None
    others = [h for h in facts.holders if not h.mine]
    others_bytes = sum(h.bytes or 0 for h in others)
    if asked.bytes is not None and total is not None and asked.bytes > total:
        return Diagnosis(
            f"TensorFlow asked for {what} on {where}, more than the GPU's whole memory ({size_text(total)}).",
            _keep(facts, [_step(None, SMALLER), _step(None, "mixed precision "
                  "(keras.mixed_precision.set_global_policy('mixed_float16')) halves most activations")]),
            {}, "too_big")
    if total is None or free is None:
        why = f" ({facts.gpu_why})" if facts.gpu_why else ""
        return Diagnosis(
            f"TensorFlow could not get {what} on {device}; the GPU's own figures are unavailable{why}.",
            _keep(facts, [_step("%tfgpu growth on", "reserve GPU memory as it is needed instead of nearly all at "
                                "start (after a restart), so the kernels sharing it can be told apart"),
                          _step(None, SMALLER)]),
            {}, "unknown")
    biggest = max(others, key=lambda h: h.bytes or 0, default=None)
    reserved_unused = mine - facts.tf_current if mine is not None and facts.tf_current is not None else None
    if others and others_bytes > total / 2 and others_bytes > (mine or 0):
        floor = (asked.bytes or 0) + (facts.tf_current or 0)
        floor = max(floor + floor // 4, GIB)
        alone = f"; {biggest.text} alone holds {size_text(biggest.bytes)}" if biggest and len(others) > 1 else \
            f", all of it {biggest.text}" if biggest else ""
        steps = [_step(f"%tfgpu visible auto --min-free {_gb(floor)}",
                       f"after a restart, use a GPU with at least {_gb(floor)} free"),
                 _step(None, SMALLER)]
        return Diagnosis(
            f"Other processes hold {size_text(others_bytes)} of the {size_text(total)} on {where}{alone}; "
            f"{size_text(free)} was free when TensorFlow asked for {what}.",
            _keep(facts, steps), _suggest(facts, {"visible": f"auto --min-free {_gb(floor)}"}), "others")
    bfc = (asked.allocator or "").endswith("_bfc")
    if bfc and asked.bytes is not None and reserved_unused is not None \
            and reserved_unused + free >= asked.bytes:
        return Diagnosis(
            f"{where} had {size_text(reserved_unused + free)} unused in all ({size_text(reserved_unused)} in "
            f"TensorFlow's pool, {size_text(free)} on the GPU) but not {need} in one piece: the BFC allocator's "
            "memory is fragmented.",
            _keep(facts, [_step("%tfgpu allocator async", "CUDA's own pool (cuda_malloc_async) fragments far less; "
                                "it applies after a restart"),
                          _step("%tfgpu free", "drop what the failed cell still holds"), _step(None, SMALLER)]),
            _suggest(facts, {"allocator": "async"}), "fragmented")
    if mine is not None and mine > total / 2 and facts.growth is not True:
        return Diagnosis(
            f"This kernel's TensorFlow reserved {size_text(mine)} of the {size_text(total)} on {where} at its start "
            f"(memory growth is off, so the BFC allocator takes nearly the whole GPU), and the {need} it asked for "
            "did not fit in what was left of that pool.",
            _keep(facts, [_step("%tfgpu growth on", "reserve memory as it is needed, after a restart: the GPU shows "
                                "what the kernel really uses, and other notebooks can share it"),
                          _step("%tfgpu limit 60%", "or cap this kernel's pool at 60% of the GPU"),
                          _step(None, SMALLER)]),
            _suggest(facts, {"growth": "on"}), "mine_reserved")
    if mine is not None and mine > total / 2:
        return Diagnosis(
            f"This kernel's TensorFlow already uses {size_text(facts.tf_current if facts.tf_current else mine)} "
            f"of the {size_text(total)} on {where}, and the {need} it asked for did not fit beside it.",
            _keep(facts, [_step("%tfgpu free --keras", "drop the failed cell's tensors and old Keras models"),
                          _step("%tfgpu allocator async", "CUDA's own pool fragments less (after a restart)"),
                          _step(None, SMALLER)]),
            _suggest(facts, {"allocator": "async"}), "mine_used")
    floor = max((asked.bytes or 0) + (asked.bytes or 0) // 4, GIB)
    return Diagnosis(
        f"{where} had {size_text(free)} free of {size_text(total)} when TensorFlow asked for {what}.",
        _keep(facts, [_step(None, SMALLER), _step(f"%tfgpu visible auto --min-free {_gb(floor)}",
                                                  f"after a restart, use a GPU with at least {_gb(floor)} free")]),
        _suggest(facts, {"visible": f"auto --min-free {_gb(floor)}"}), "short")


def _cpu(facts: Facts, what: str) -> Diagnosis:
    asked, total, available = facts.asked, facts.host_total, facts.host_available
    device = facts.device or "the CPU"
    if asked.bytes is not None and total is not None and asked.bytes > total:
        detail = f", more than this machine's {size_text(total)} of host memory in all"
    elif available is not None and total is not None:
        detail = f" of host memory; {size_text(available)} of the machine's {size_text(total)} was available"
    else:
        detail = " of host memory"
    return Diagnosis(
        f"TensorFlow could not get {what} on {device}{detail}.",
        _keep(facts, [_step(None, SMALLER), _step("%tfgpu free", "drop what the failed cell still holds (its "
                                                  "variables stay alive through the error's traceback)")]),
        {}, "cpu")


def _keep(facts: Facts, steps: list[dict[str, str | None]]) -> tuple[dict[str, str | None], ...]:
    """The steps whose magic this installation has: a setting not in the registry is no step."""
    kept = []
    for step in steps:
        magic = step["magic"]
        words = magic.split() if magic else []
        if len(words) >= 2 and words[1] not in facts.registered and words[1] not in _VIEWS:
            continue
        if len(words) >= 2 and words[1] in facts.registered and not _parses(" ".join(words[1:])):
            continue
        kept.append(step)
    return tuple(kept[:3])


_VIEWS = ("free", "oom", "memory", "status", "devices")


def _suggest(facts: Facts, wanted: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in wanted.items()
            if name in facts.registered and _parses(f"{name} {value}")}


def _parses(line: str) -> bool:
    """Whether a configuring line is one the magic takes (the registry's own parser, applying nothing)."""
    from .changes import parse_change
    from .plan import PlanError

    try:
        parse_change(line)
    except (PlanError, ValueError, KeyError):
        return False
    return True


def card(facts: Facts, diagnosis: Diagnosis | None = None) -> dict[str, Any]:
    """The card's data, as the contract has it (schema 1)."""
    diagnosis = diagnosis or diagnose(facts)
    gpu = None
    if facts.kind == "gpu" and (facts.gpu_total is not None or facts.gpu_name is not None):
        gpu = {"name": facts.gpu_name, "total_bytes": facts.gpu_total, "free_bytes": facts.gpu_free}
    host = None
    if facts.kind == "cpu" and (facts.host_total is not None or facts.host_available is not None):
        host = {"total_bytes": facts.host_total, "available_bytes": facts.host_available}
    return {
        "schema": SCHEMA,
        "kind": facts.kind,
        "error": facts.error,
        "message": facts.asked.message,
        "asked": {**facts.asked.to_dict(), "device": facts.device, "form": facts.asked.form},
        "physical_index": facts.physical_index if facts.kind == "gpu" else None,
        "tf_memory": {"current_bytes": facts.tf_current, "peak_bytes": facts.tf_peak},
        "settings": [list(row) for row in facts.settings],
        "gpu": gpu,
        "gpu_note": facts.gpu_why if facts.kind == "gpu" else "",
        "host": host,
        "holders": [h.to_dict() for h in facts.holders] if facts.kind == "gpu" else [],
        "cause": diagnosis.cause,
        "case": diagnosis.case,
        "steps": [dict(s) for s in diagnosis.steps],
        "suggested": dict(diagnosis.suggested),
        "execution_count": facts.execution_count,
    }


# -- gathering: TensorFlow and NVML are passed in -----------------------------------------------------------------
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
    base["growth"] = _growth(tf, state, device, environ)
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

    if tf is not None and state >= TFState.ENUMERATED:
        try:
            visible = tf.config.get_visible_devices("GPU")
            k = int(device.split(":")[1])
            if k < len(visible):
                return bool(tf.config.experimental.get_memory_growth(visible[k]))
        except Exception:
            pass
    forced = environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
    return {"true": True, "false": False}.get(forced) if forced else None


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


__all__ = ["DTYPE_BYTES", "MIME", "SCHEMA", "Asked", "Diagnosis", "Facts", "Holder", "asked_of", "card", "chain",
           "diagnose", "element_bytes", "gather", "host_memory", "is_resource_exhausted", "oom_error", "parse",
           "physical_index", "report", "short_device", "size_text"]
