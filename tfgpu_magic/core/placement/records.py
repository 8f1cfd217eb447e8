"""Placement records: TensorFlow's device-placement lines parsed into records, kept in a ring buffer, one cell
at a time; and TensorFlow's own state read lazily (never imported here).

TensorFlow reports where ops run on three channels, all from C++:

``"placer"``
    ``placer.cc`` writes each placed graph node twice: a C ``printf`` to fd 1
    (``mul: (Mul): /job:localhost/replica:0/task:0/device:CPU:1``) and a log line to fd 2 with a
    version-dependent prefix. Both copies are the same fact; :class:`CellRecorder` keeps one record.
    It fires when an op kernel is instantiated or a ``tf.function`` is traced, not on re-execution.
``"eager"``
    ``execute.cc``: ``Executing op MatMul in device /job:.../device:CPU:0``, once per eager
    execution. Inside IPython TensorFlow hands it to a listener that writes Python's ``sys.stdout``;
    elsewhere it is a log line on fd 2.
``"run_metadata"``
    Not a log: the nodes of the partition graphs in ``context().export_run_metadata()``, the only
    route left once the runtime started without the log (newly compiled kernels and functions only).

This module imports neither IPython nor TensorFlow; TensorFlow objects it reads are passed in.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..inputs import whole_number

CHANNELS = ("placer", "eager", "run_metadata")

#: Graph plumbing the placer also reports; kept as records, left out of the per-cell summary.
PLUMBING_OPS = frozenset(
    {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "_Send", "_Recv", "_HostSend", "_HostRecv"}
)

DEFAULT_MAXLEN = 10_000


# --- devices ----------------------------------------------------------------------------------------

_DEVICE_SPEC = re.compile(
    r"^(?:/job:[A-Za-z0-9_-]+/replica:\d+/task:\d+)?(?:/device:|/|device:)?(?P<type>CPU|GPU|TPU):(?P<index>\d+)$",
    re.IGNORECASE,
)

DEVICE_FORMS = "/CPU:1, /GPU:0, CPU:0 or /job:localhost/replica:0/task:0/device:CPU:0"


@dataclass(frozen=True)
class DeviceSpec:
    """A concrete device, as ``tf.device`` accepts it: type and index."""

    type: str
    index: int

    @property
    def short(self) -> str:
        return f"{self.type}:{self.index}"

    def __str__(self) -> str:
        return self.short


def parse_device(spec: str) -> DeviceSpec | None:
    """``/CPU:1``, ``cpu:1``, ``/device:GPU:0``, ``/job:localhost/replica:0/task:0/device:CPU:0``
    -> DeviceSpec; anything else (a partial spec like ``/GPU``, a typo) -> None."""
    m = _DEVICE_SPEC.match(spec.strip())
    if m is None:
        return None
    # TensorFlow rejects an index past 32 bits with a traceback of its own: such a spec names no device.
    index = whole_number(m["index"])
    return None if index is None else DeviceSpec(m["type"].upper(), index)


_ONEDNN_PREFIX = re.compile(r"^_Mkl(?:Native)?(?=[A-Z])")


def base_op_type(op_type: str) -> str:
    """The op a user wrote for TensorFlow's oneDNN rewrite of it on CPU: ``_MklMatMul`` -> ``MatMul``."""
    return _ONEDNN_PREFIX.sub("", op_type)


def short_device(device: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``CPU:1`` (other strings unchanged)."""
    return device.rpartition("/device:")[2] if "/device:" in device else device


# --- records ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlacementRecord:
    """One placement fact. ``channel`` is one of CHANNELS (see the module docstring); ``device`` the full
    name TensorFlow printed; ``requested`` the device the cell asked for when it is known (cells run with
    ``%%tfgpu device``), else None; ``cell`` the execution count; ``time`` a Unix time."""

    cell: int | None
    op: str
    op_type: str | None
    requested: str | None
    device: str
    channel: str
    time: float

    @property
    def short_device(self) -> str:
        return short_device(self.device)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["short_device"] = self.short_device
        return d


class LineFields(NamedTuple):
    """What :func:`parse_line` reads off one line. ``logged`` is True for the log-prefixed (fd 2) form."""

    channel: str
    op: str
    op_type: str | None
    device: str
    logged: bool


_DEV = r"(?P<device>/job:[^/\s]+/replica:\d+/task:\d+/device:[A-Za-z_]+:\d+)"
# 2.21 (absl):   I0000 00:00:1796008971.656483   10030 placer.cc:162] ...
# 2.16 (tsl):    2026-11-30 03:29:57.481204: I tensorflow/core/common_runtime/placer.cc:125] ...
_PREFIX = (
    r"(?P<prefix>I\d{4} [\d:.]+\s+\d+ [\w/.-]+:\d+\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:[\d.]+: I [\w/.-]+:\d+\] )?"
)
PLACER_RE = re.compile(_PREFIX + r"(?P<op>[^\s:]+): \((?P<op_type>[\w>.-]+)\): " + _DEV + r"\s*$")
EAGER_RE = re.compile(_PREFIX + r"Executing op (?P<op>\S+) in device " + _DEV + r"\s*$")
_PREFIX_ONLY = re.compile(_PREFIX[len("(?P<prefix>"):-2])
_BODY_RE = re.compile(
    r"(?:Executing op (?P<eager>\S+) in device |(?P<op>[^\s:]+): \((?P<op_type>[\w>.-]+)\): )" + _DEV + r"\s*$"
)
_MISS = object()
_body_cache: dict[str, tuple[LineFields, LineFields] | None] = {}


def _parse_body(body: str) -> tuple[LineFields, LineFields] | None:
    """The line after any log prefix -> (its fields as printed, as logged). The eager channel repeats
    the very same line for every execution of an op, so answers are remembered."""
    hit = _body_cache.get(body, _MISS)
    if hit is not _MISS:
        return hit  # type: ignore[return-value]
    m = _BODY_RE.match(body)
    if m is None:
        result = None
    else:
        fields = (("eager", m["eager"], m["eager"]) if m["eager"] is not None
                  else ("placer", m["op"], m["op_type"]))
        result = (LineFields(*fields, m["device"], False), LineFields(*fields, m["device"], True))
    if len(_body_cache) >= 4096:
        _body_cache.clear()
    _body_cache[body] = result
    return result


def parse_line(line: str) -> LineFields | None:
    """One line of TensorFlow output -> LineFields, or None when it is not a placement line.
    (``PLACER_RE`` and ``EAGER_RE`` state the same grammar in one piece.)"""
    if "/device:" not in line:
        return None
    first = line[:1]
    prefix = _PREFIX_ONLY.match(line) if first == "I" or "0" <= first <= "9" else None
    if prefix is None:
        both = _parse_body(line)
        return None if both is None else both[0]
    both = _parse_body(line[prefix.end():])
    return None if both is None else both[1]


# A partial line that may still become a placement line once the rest arrives: C stdio flushes in 4 KiB
# blocks, so a printf line can be cut anywhere.
_MAYBE_PLACER = re.compile(r"^(?:\S*|\S+: (?:\([\w>.-]*(?:\)(?::(?: \S*)?)?)?)?)$")
_MAYBE_LOGGED = re.compile(r"^(?:I\d{0,4}|I\d{4} .*|\d{1,4}|\d{4}-.*)$")


def maybe_placement_prefix(tail: bytes) -> bool:
    if len(tail) > 4096:
        return False
    text = tail.decode("utf-8", "replace")
    if text.startswith("Executing op ") or "Executing op ".startswith(text):
        return True
    return bool(_MAYBE_PLACER.match(text) or _MAYBE_LOGGED.match(text))


# --- the ring buffer ----------------------------------------------------------------------------------


class PlacementLog:
    """A bounded, thread-safe ring buffer of PlacementRecords; ``dropped`` counts what fell off."""

    def __init__(self, maxlen: int = DEFAULT_MAXLEN):
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self._records: collections.deque[PlacementRecord] = collections.deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self.dropped = 0

    @property
    def maxlen(self) -> int:
        return self._records.maxlen or 0

    def __len__(self) -> int:
        return len(self._records)

    def append(self, record: PlacementRecord) -> None:
        with self._lock:
            if len(self._records) == self._records.maxlen:
                self.dropped += 1
            self._records.append(record)

    def extend(self, records: Iterable[PlacementRecord]) -> None:
        for record in records:
            self.append(record)

    def records(
        self, device: str | None = None, op: str | None = None, cell: int | None = None
    ) -> list[PlacementRecord]:
        """Records, oldest first. ``device``: ``CPU:1``/``/GPU:0``/full name, or a bare type (``GPU``) for
        all devices of that type; ``op``: an op type or op name, case-insensitive; ``cell``: a count."""
        with self._lock:
            out = list(self._records)
        if device is not None:
            match = device_matcher(device)
            out = [r for r in out if match(r.device)]
        if op is not None:
            want = op.lower()
            out = [r for r in out if want in (r.op.lower(), (r.op_type or "").lower(), base_op_type(r.op).lower(),
                                              base_op_type(r.op_type or "").lower())]
        if cell is not None:
            out = [r for r in out if r.cell == cell]
        return out

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self.dropped = 0


def device_matcher(device: str) -> Callable[[str], bool]:
    """A predicate on full device names. Raises ValueError for a string that names no device."""
    bare = device.strip().lstrip("/").upper()
    if bare.startswith("DEVICE:"):
        bare = bare[len("DEVICE:"):]
    if bare in ("CPU", "GPU", "TPU"):
        return lambda name: short_device(name).upper().startswith(bare + ":")
    spec = parse_device(device)
    if spec is None:
        raise ValueError(device)
    return lambda name: (parse_device(name) == spec)


# --- one cell's records -------------------------------------------------------------------------------


class CellRecorder:
    """Collects the records of one cell from every stream, thread-safely.

    The placer's printf (fd 1) and its log line (fd 2) are one fact: a placer line whose twin from the
    other stream was already recorded is dropped (a multiset per stream, so N genuine placements of the
    same node still give N records, and either copy alone, as under ``TF_CPP_MIN_LOG_LEVEL>=1``, counts)."""

    def __init__(self, cell: int | None = None, requested: str | None = None):
        self.cell = cell
        self.requested = requested
        self._lock = threading.Lock()
        self._items: list[PlacementRecord | tuple[LineFields, float]] = []
        self._unmatched: dict[bool, collections.Counter] = {
            True: collections.Counter(),
            False: collections.Counter(),
        }

    def add(self, fields: LineFields, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if fields.channel != "placer":
            self._items.append((fields, now))  # one list append: atomic, no lock needed
            return
        key = (fields.op, fields.op_type, fields.device)
        with self._lock:
            twins = self._unmatched[not fields.logged]
            if twins[key]:
                twins[key] -= 1
                return
            self._unmatched[fields.logged][key] += 1
            self._items.append((fields, now))

    def add_records(self, records: Iterable[PlacementRecord]) -> None:
        self._items.extend(records)

    def records(self) -> list[PlacementRecord]:
        """The cell's records, with the cell number and requested device as they are now (frozen
        records are built here, once, not on the per-op path)."""
        out = []
        for item in list(self._items):
            if isinstance(item, PlacementRecord):
                if (item.cell, item.requested) != (self.cell, self.requested or item.requested):
                    item = dataclasses.replace(item, cell=self.cell, requested=self.requested or item.requested)
                out.append(item)
            else:
                f, now = item
                out.append(PlacementRecord(self.cell, f.op, f.op_type, self.requested, f.device, f.channel, now))
        return out


def records_from_run_metadata(
    run_metadata: Any, cell: int | None = None, requested: str | None = None, now: float | None = None
) -> list[PlacementRecord]:
    """Records from a ``RunMetadata`` proto (``context().export_run_metadata()``): every node of every
    partition graph of every newly compiled function or op kernel, with the device it was placed on."""
    now = time.time() if now is None else now
    out = []
    for function_graph in getattr(run_metadata, "function_graphs", ()):
        for graph in function_graph.partition_graphs:
            for node in graph.node:
                if node.device:
                    out.append(PlacementRecord(cell, node.name, node.op, requested, node.device,
                                               "run_metadata", now))
    return out


# --- TensorFlow, read lazily (never imported here) ---------------------------------------------------------


def tf_context() -> Any | None:
    """TensorFlow's eager context if TensorFlow is imported and the context exists; never creates it."""
    module = sys.modules.get("tensorflow.python.eager.context")
    if module is None or not hasattr(module, "context_safe"):
        return None
    return module.context_safe()


def tf_log_flag() -> bool | None:
    """TensorFlow's Python-side log_device_placement flag (None when unknown). After the runtime started
    it says what was last *asked*, not what TensorFlow does: its log is fixed when the runtime starts."""
    ctx = tf_context()
    if ctx is None:
        tf = sys.modules.get("tensorflow")
        return False if tf is not None else None
    value = getattr(ctx, "_log_device_placement", None)
    return bool(value) if value is not None else False


def logical_devices() -> list[str] | None:
    """Short names of the logical devices, only when the runtime is already initialized (so asking
    starts nothing); else None."""
    ctx = tf_context()
    tf = sys.modules.get("tensorflow")
    if ctx is None or tf is None or getattr(ctx, "_context_handle", None) is None:
        return None
    try:
        return [short_device(d.name) for d in tf.config.list_logical_devices()]
    except Exception:
        return None


