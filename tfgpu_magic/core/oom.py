"""Out of memory, explained: what TensorFlow asked for, where, who holds that memory, the likely cause and the next
steps, as the OOM card's data (MIME type ``application/vnd.tfgpu.oom+json``, schema 1).

Three parts, each usable alone:

- ``parse(text)``: TensorFlow's own OOM texts as an ``Asked`` (shape, dtype, bytes, device, allocator): the runtime's
  "OOM when allocating tensor with shape[...] and type float on .../device:GPU:0 by allocator GPU_0_bfc", XLA's
  "Out of memory while trying to allocate N bytes", and either inside a wrapper (Keras' "Exception encountered when
  calling ...", a graph's "Graph execution error: ..."). ``oom_error(exc)`` finds TensorFlow's ResourceExhaustedError
  in an exception or its ``__cause__``/``__context__`` chain by its classes' names, importing nothing.
- ``oom_figures.gather(...)``: the figures, from TensorFlow (passed in, never imported), NVML's snapshot, the kernels'
  reports and the registry's settings, into ``Facts``. It never starts TensorFlow's runtime or enumerates its devices.
- ``diagnose(facts)``: pure; the cause in one sentence, two or three steps as magics, and the settings a Restart button
  would save, each setting found in the registry by what it is (never by its name). ``card(facts)`` is the contract's
  dict (render/oom.py draws it as text and HTML); ``oom_figures.report(exc, ...)`` gathers and makes it.

No IPython, ipywidgets, tornado or jupyter_server here, and no TensorFlow import.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .nvml_calls import MIB

MIME = "application/vnd.tfgpu.oom+json"
SCHEMA = 1
GIB = 1 << 30

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
    r"(?: on (?P<device>\S+?))?(?: by allocator (?P<alloc>[\w.:-]+))?(?=[\s\[]|$)")
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
        """The contract's ``asked``: every field but the message, a shape as a list."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "message"}
        out["shape"] = list(self.shape) if self.shape is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], message: str = "") -> Asked:
        known = {f.name: data.get(f.name) for f in fields(cls) if f.name not in ("message", "form")}
        known["shape"] = tuple(known["shape"]) if isinstance(known["shape"], list) else None
        return cls(message=message, form=str(data.get("form") or "unknown"), **known)


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
                     device=short_device(found["device"]), allocator=found["alloc"])
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
    memory_grows: bool | None = None  # memory growth on the failing GPU, where known
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


# What a step needs of a setting, found by what the setting is (core/settings/: peers find each other by these,
# never by name): the one that picks the GPUs (it sets CUDA_VISIBLE_DEVICES), the one that grows memory as needed,
# the memory split of one size (a cap), and the one that chooses TensorFlow's GPU allocator.
_ROLES = {
    "picks": lambda s: "CUDA_VISIBLE_DEVICES" in s.env_vars,
    "grows": lambda s: s.grows_memory,
    "caps": lambda s: s.splits_memory and s.value_name == "size",
    "pool": lambda s: "TF_GPU_ALLOCATOR" in s.env_vars,
}
SMALLER = "a smaller batch (or smaller tensors): fewer samples per step need proportionally less memory"


def _setting(facts: Facts, role: str, value: str) -> str | None:
    """The registered setting in ``role`` as ``name value``, when the registry has it and its parser takes value."""
    from . import settings as registry

    for setting in registry.settings():
        if _ROLES[role](setting) and setting.name in facts.registered and _parses(f"{setting.name} {value}"):
            return f"{setting.name} {value}"
    return None


def _steps(facts: Facts, *steps: tuple[str | None, str, str]) -> tuple[dict[str, str | None], ...]:
    """(role or None, value, why) as the card's steps: a role's setting as its magic (a role this installation has no
    setting for is no step), None a step without a magic, "view" a subcommand (``value`` is its words)."""
    made = []
    for role, value, why in steps:
        line = value if role == "view" else None if role is None else _setting(facts, role, value)
        if role is None or line is not None:
            made.append({"magic": f"%tfgpu {line}" if line else None, "why": why})
    return tuple(made[:3])


def _suggest(facts: Facts, role: str, value: str) -> dict[str, str]:
    """What the Restart button saves: {setting name: value}, or {} without such a setting."""
    line = _setting(facts, role, value)
    return dict([line.split(" ", 1)]) if line else {}


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
    smaller = (None, "", SMALLER)
    if asked.bytes is not None and total is not None and asked.bytes > total:
        return Diagnosis(
            f"TensorFlow asked for {what} on {where}, more than the GPU's whole memory ({size_text(total)}).",
            _steps(facts, smaller, (None, "", "mixed precision (keras.mixed_precision.set_global_policy("
                                              "'mixed_float16')) halves most activations")), {}, "too_big")
    if total is None or free is None:
        why = f" ({facts.gpu_why})" if facts.gpu_why else ""
        return Diagnosis(
            f"TensorFlow could not get {what} on {device}; the GPU's own figures are unavailable{why}.",
            _steps(facts, ("grows", "on", "reserve GPU memory as it is needed instead of nearly all at start (after "
                                          "a restart), so the kernels sharing it can be told apart"), smaller),
            {}, "unknown")
    biggest = max(others, key=lambda h: h.bytes or 0, default=None)
    reserved_unused = mine - facts.tf_current if mine is not None and facts.tf_current is not None else None
    if others and others_bytes > total / 2 and others_bytes > (mine or 0):
        floor = (asked.bytes or 0) + (facts.tf_current or 0)
        pick = f"auto --min-free {_gb(max(floor + floor // 4, GIB))}"
        alone = f"; {biggest.text} alone holds {size_text(biggest.bytes)}" if biggest and len(others) > 1 else \
            f", all of it {biggest.text}" if biggest else ""
        return Diagnosis(
            f"Other processes hold {size_text(others_bytes)} of the {size_text(total)} on {where}{alone}; "
            f"{size_text(free)} was free when TensorFlow asked for {what}.",
            _steps(facts, ("picks", pick, f"after a restart, use a GPU with at least {pick.split()[-1]} free"),
                   smaller), _suggest(facts, "picks", pick), "others")
    if (asked.allocator or "").endswith("_bfc") and asked.bytes is not None and reserved_unused is not None \
            and reserved_unused + free >= asked.bytes:
        return Diagnosis(
            f"{where} had {size_text(reserved_unused + free)} unused in all ({size_text(reserved_unused)} in "
            f"TensorFlow's pool, {size_text(free)} on the GPU) but not {need} in one piece: the BFC allocator's "
            "memory is fragmented.",
            _steps(facts, ("pool", "async", "CUDA's own pool (cuda_malloc_async) fragments far less; it applies "
                                            "after a restart"),
                   ("view", "free", "drop what the failed cell still holds"), smaller),
            _suggest(facts, "pool", "async"), "fragmented")
    if mine is not None and mine > total / 2 and facts.memory_grows is not True:
        return Diagnosis(
            f"This kernel's TensorFlow reserved {size_text(mine)} of the {size_text(total)} on {where} at its start "
            f"(memory growth is off, so the BFC allocator takes nearly the whole GPU), and the {need} it asked for "
            "did not fit in what was left of that pool.",
            _steps(facts, ("grows", "on", "reserve memory as it is needed, after a restart: the GPU shows what the "
                                          "kernel really uses, and other notebooks can share it"),
                   ("caps", "60%", "or cap this kernel's pool at 60% of the GPU"), smaller),
            _suggest(facts, "grows", "on"), "mine_reserved")
    if mine is not None and mine > total / 2:
        return Diagnosis(
            f"This kernel's TensorFlow already uses {size_text(facts.tf_current if facts.tf_current else mine)} "
            f"of the {size_text(total)} on {where}, and the {need} it asked for did not fit beside it.",
            _steps(facts, ("view", "free --keras", "drop the failed cell's tensors and old Keras models"),
                   ("pool", "async", "CUDA's own pool fragments less (after a restart)"), smaller),
            _suggest(facts, "pool", "async"), "mine_used")
    pick = f"auto --min-free {_gb(max((asked.bytes or 0) * 5 // 4, GIB))}"
    return Diagnosis(
        f"{where} had {size_text(free)} free of {size_text(total)} when TensorFlow asked for {what}.",
        _steps(facts, smaller, ("picks", pick, f"after a restart, use a GPU with at least {pick.split()[-1]} free")),
        _suggest(facts, "picks", pick), "short")


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
        _steps(facts, (None, "", SMALLER), ("view", "free", "drop what the failed cell still holds (its variables "
                                                            "stay alive through the error's traceback)")),
        {}, "cpu")


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
        "asked": {**facts.asked.to_dict(), "device": facts.device},
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


__all__ = ["DTYPE_BYTES", "MIME", "SCHEMA", "Asked", "Diagnosis", "Facts", "Holder", "asked_of", "card", "chain",
           "diagnose", "element_bytes", "is_resource_exhausted", "oom_error", "parse", "short_device",
           "size_text"]
