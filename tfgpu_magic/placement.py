"""Placement capture: TensorFlow's device-placement log, parsed into records, one cell at a time.

TensorFlow reports where ops run on three channels, all from C++ (see TF_FACTS.md):

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

Capture (:class:`Capture`) is scoped to one cell: fd 1 and fd 2 are dup2'd onto pipes drained by two
reader threads, C stdio is flushed on entry and exit so block-buffered ``printf`` output lands in the
cell that caused it, and ``sys.stdout``/``sys.stderr`` get a filter for the eager lines. Placement
lines become records; every other byte goes, unchanged and in order per stream, where it would have
gone. No thread exists outside :meth:`Capture.start` ... :meth:`Capture.stop`.

This module imports neither IPython nor TensorFlow; TensorFlow objects it reads are passed in.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import dataclasses
import errno
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .inputs import whole_number

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


# --- capture --------------------------------------------------------------------------------------------

_libc = None


def flush_c_stdio() -> None:
    """``fflush(NULL)``: push C stdio buffers (TensorFlow's printf) to their descriptors now."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        _libc.fflush(None)
    except (OSError, AttributeError):  # no C library to talk to: nothing buffered we could reach
        pass


def _try_flush_c_stdout() -> bool:
    """From a reader thread: flush C's ``stdout`` only if no other thread holds its lock (a thread
    blocked in printf on a full pipe holds it, and we are the one who would drain that pipe)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        stream = ctypes.c_void_p.in_dll(_libc, "stdout")
        if _libc.ftrylockfile(stream) != 0:
            return False
        try:
            _libc.fflush_unlocked(stream)
        finally:
            _libc.funlockfile(stream)
        return True
    except (OSError, AttributeError, ValueError):  # not glibc: let the timeout pass the line through
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        except OSError as err:  # the destination went away (EPIPE, EBADF): nothing to deliver to
            if err.errno in (errno.EPIPE, errno.EBADF):
                return
            raise
        view = view[n:]


class _Orphan:
    """A capture pipe whose write end a child process still holds after its cell ended: kept open (so
    the child does not die of SIGPIPE) and drained into the original destination at each capture stop."""

    def __init__(self, read_fd: int, target_fd: int):
        self.read_fd = read_fd
        self.target_fd = target_fd

    def drain(self) -> bool:
        """Pass through what is waiting; True when the pipe reached EOF and was closed."""
        while True:
            try:
                ready, _, _ = select.select([self.read_fd], [], [], 0)
                if not ready:
                    return False
                data = os.read(self.read_fd, 65536)
            except OSError:
                data = b""
            if not data:
                self.close()
                return True
            _write_all(self.target_fd, data)

    def close(self) -> None:
        for fd in (self.read_fd, self.target_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


_orphans: list[_Orphan] = []


def drain_orphans(close: bool = False) -> None:
    for orphan in list(_orphans):
        if orphan.drain() or close:
            if close:
                orphan.close()
            _orphans.remove(orphan)


Sink = Callable[[LineFields], None]


class _FdRedirect:
    """fd ``fd`` dup2'd onto a pipe; a reader thread consumes placement lines and writes the rest to the
    saved original descriptor."""

    HOLD_S = 0.1  # how long a partial line that may be a placement line waits for its end
    # After a small read, let more lines gather before the next one: one wake-up (and one handoff of
    # the GIL) per batch instead of per line, which is what makes capture cheap for a log line per op.
    BATCH_S = 0.004
    CHUNK = 1 << 16

    def __init__(self, fd: int, sink: Sink, other_lines: Callable[[str], bool] | None = None):
        self.fd = fd
        self.sink = sink
        # Offered every whole line that is not a placement line; True keeps it off the output (the
        # TensorFlow log taming of tflog.py takes its own lines this way).
        self.other_lines = other_lines
        self._saved: int | None = None
        self._read: int | None = None
        self._wake: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._eof = False
        self.error: BaseException | None = None

    def start(self) -> None:
        saved = os.dup(self.fd)
        try:
            read, write = os.pipe()
            try:
                os.dup2(write, self.fd)
            finally:
                os.close(write)
        except BaseException:
            os.close(saved)
            raise
        self._saved, self._read = saved, read
        self._wake = os.pipe()
        self._eof = False
        self._thread = threading.Thread(target=self._run, name=f"tfgpu-placement-fd{self.fd}", daemon=True)
        self._thread.start()

    def restore(self) -> None:
        """Point the descriptor back at its original destination (the pipe's write end goes with it)."""
        if self._saved is not None:
            os.dup2(self._saved, self.fd)

    def finish(self) -> None:
        """After restore(): let the reader drain what is in the pipe, then end it and close the pipe."""
        if self._thread is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"x")
        self._thread.join()
        self._thread = None
        for fd in self._wake:
            os.close(fd)
        self._wake = None
        if self._eof:
            os.close(self._read)
            os.close(self._saved)
        else:  # a child still holds the write end
            _orphans.append(_Orphan(self._read, self._saved))
        self._read = self._saved = None

    # -- the reader thread --------------------------------------------------------------------------
    def _run(self) -> None:
        read, wake = self._read, self._wake[0]
        pending = b""
        flushed = False
        try:
            while True:
                timeout = self.HOLD_S if pending else None
                ready, _, _ = select.select([read, wake], [], [], timeout)
                if read in ready:
                    data = os.read(read, self.CHUNK)
                    if not data:
                        self._eof = True
                        break
                    pending = self._feed(pending + data)
                    flushed = False
                    if len(data) < self.CHUNK and wake not in ready:
                        time.sleep(self.BATCH_S)
                elif wake in ready:
                    while select.select([read], [], [], 0)[0]:
                        data = os.read(read, self.CHUNK)
                        if not data:
                            self._eof = True
                            break
                        pending = self._feed(pending + data)
                    break
                elif self.fd == 1 and not flushed:
                    # maybe a cut printf line whose rest is still in C's buffer
                    flushed = True
                    _try_flush_c_stdout()
                else:
                    _write_all(self._saved, pending)
                    pending = b""
        except BaseException as err:  # never lose output because of us
            self.error = err
        finally:
            if pending:
                text = pending.decode("utf-8", "replace")
                fields = parse_line(text)
                if fields is not None:
                    self.sink(fields)
                elif not (self.other_lines is not None and self._taken(text)):
                    _write_all(self._saved, pending)

    def _taken(self, text: str) -> bool:
        try:
            return bool(self.other_lines(text))
        except Exception:  # a bug in a taker must not cost the user a line
            return False

    def _feed(self, data: bytes) -> bytes:
        *lines, tail = data.split(b"\n")
        out = []
        for line in lines:
            if b"/device:" in line:
                fields = parse_line(line.decode("utf-8", "replace"))
                if fields is not None:
                    if out:
                        _write_all(self._saved, b"".join(out))
                        out = []
                    self.sink(fields)
                    continue
            if self.other_lines is not None and self._taken(line.decode("utf-8", "replace")):
                if out:  # what came before goes out first: order is kept
                    _write_all(self._saved, b"".join(out))
                    out = []
                continue
            out.append(line + b"\n")
        if tail and not maybe_placement_prefix(tail):
            out.append(tail)
            tail = b""
        if out:
            _write_all(self._saved, b"".join(out))
        return tail


_MISSING = object()


class _StreamFilter:
    """Drops the eager lines TensorFlow's IPython log listener writes to ``sys.stdout``.

    It patches ``write`` on the stream instance, as IPython's own output tee does (ipykernel checks the
    stream's class), or, for streams that refuse (``io.TextIOWrapper``), swaps in a proxy."""

    def __init__(self, name: str, sink: Sink):
        self.name = name
        self.sink = sink
        self.enabled = False
        self._stream: Any = None
        self._previous: Any = _MISSING
        self._proxy: _StreamProxy | None = None
        self._write: Callable | None = None

    def install(self) -> None:
        stream = getattr(sys, self.name, None)
        if stream is None:
            return
        original = stream.write
        self.enabled = True

        def write(text, *args, **kwargs):
            if self.enabled and isinstance(text, str) and "/device:" in text:
                if text.find("\n") in (-1, len(text) - 1):  # one line: what TensorFlow's listener writes
                    fields = parse_line(text)
                    if fields is None:
                        return original(text, *args, **kwargs)
                    self.sink(fields)
                    return len(text)
                kept = self._filter(text)
                if not kept:
                    return len(text)
                original(kept, *args, **kwargs)
                return len(text)
            return original(text, *args, **kwargs)

        self._stream = stream
        self._write = write
        try:
            self._previous = vars(stream).get("write", _MISSING)
            stream.write = write
        except (AttributeError, TypeError):
            self._previous = _MISSING
            self._proxy = _StreamProxy(stream, write)
            setattr(sys, self.name, self._proxy)

    def remove(self) -> None:
        self.enabled = False  # if someone wrapped us in turn, our wrapper stays but passes everything
        stream, self._stream = self._stream, None
        if stream is None:
            return
        if self._proxy is not None:
            if getattr(sys, self.name, None) is self._proxy:
                setattr(sys, self.name, stream)
            self._proxy = None
        elif vars(stream).get("write") is self._write:
            if self._previous is _MISSING:
                del stream.write
            else:
                stream.write = self._previous
        self._previous = _MISSING
        self._write = None

    def _filter(self, text: str) -> str:
        kept = []
        for line in text.splitlines(keepends=True):
            fields = parse_line(line.rstrip("\r\n")) if "/device:" in line else None
            if fields is None:
                kept.append(line)
            else:
                self.sink(fields)
        return "".join(kept)


class _StreamProxy:
    """Stands in for a stream whose ``write`` cannot be patched; everything else goes to the stream."""

    def __init__(self, stream: Any, write: Callable):
        object.__setattr__(self, "_stream", stream)
        object.__setattr__(self, "write", write)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._stream, name, value)

    def __iter__(self):
        return iter(self._stream)


class Capture:
    """Per-cell capture of the placement channels: fd 1, fd 2 and Python's sys.stdout/sys.stderr.

    ``sink(fields)`` is called for each placement line, from reader threads and the main thread. Every
    other byte is passed on. ``start()``/``stop()`` bracket one cell; ``stop()`` is safe to call twice
    and after a failed start, and always restores the descriptors and streams."""

    def __init__(self, sink: Sink, fds: Sequence[int] = (1, 2), streams: Sequence[str] = ("stdout", "stderr"),
                 stderr_lines: Callable[[str], bool] | None = None):
        self.sink = sink
        self.stderr_lines = stderr_lines  # offered fd 2's other lines (TensorFlow's log taming)
        self._fds = tuple(fds)
        self._stream_names = tuple(streams)
        self._redirects: list[_FdRedirect] = []
        self._filters: list[_StreamFilter] = []

    @property
    def active(self) -> bool:
        return bool(self._redirects or self._filters)

    @property
    def fds(self) -> tuple[int, ...]:
        return self._fds

    def start(self) -> None:
        if self.active:
            return
        self._flush_python()
        flush_c_stdio()  # what C buffered before the cell belongs before it
        try:
            for fd in self._fds:
                redirect = _FdRedirect(fd, self.sink, self.stderr_lines if fd == 2 else None)
                redirect.start()
                self._redirects.append(redirect)
            for name in self._stream_names:
                stream_filter = _StreamFilter(name, self.sink)
                stream_filter.install()
                self._filters.append(stream_filter)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Flush, restore every descriptor and stream, drain the pipes and end the reader threads."""
        if not self.active:
            return
        try:
            self._flush_python()
            flush_c_stdio()
        finally:
            filters, self._filters = self._filters, []
            for stream_filter in reversed(filters):
                stream_filter.remove()
            redirects, self._redirects = self._redirects, []
            for redirect in redirects:
                redirect.restore()
            for redirect in redirects:
                redirect.finish()
            drain_orphans()

    def _flush_python(self) -> None:
        for name in self._stream_names:
            stream = getattr(sys, name, None)
            try:
                if stream is not None:
                    stream.flush()
            except Exception:  # a closed or odd stream: nothing to flush
                pass

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --- summaries ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRow:
    device: str  # short name, e.g. "CPU:2"
    op_type: str
    executed: int | None  # eager executions ("Executing op" lines); None: not seen (run metadata only)
    placed: int  # graph nodes placed (placer lines, run metadata)


@dataclass(frozen=True)
class Fallback:
    """Ops that ran somewhere other than the device the cell asked for."""

    asked: str
    ran_on: tuple[str, ...]
    ops: tuple[str, ...]
    reason: str = ""

    def text(self) -> str:
        ran = ", ".join(self.ran_on) if self.ran_on else "another device"
        ops = f" ({', '.join(self.ops)})" if self.ops else ""
        reason = f"; {self.reason}" if self.reason else ""
        return f"fallback: asked {self.asked}, ran on {ran}{ops}{reason}"


def find_fallbacks(
    records: Sequence[PlacementRecord],
    requested: str | None = None,
    asked_in_source: Sequence[str] = (),
    existing: Iterable[str] | None = None,
) -> tuple[Fallback, ...]:
    """``requested``: the device a whole cell ran under (``%%tfgpu device``): every op elsewhere is a
    fallback. ``asked_in_source``: device strings of ``tf.device("...")`` literals in a plain cell; those
    ops cannot be told apart from the cell's others, so one is flagged only when no such device exists
    (``existing``: short names of the logical devices), which under soft placement means it fell back."""
    out = []
    ops = [r for r in records if r.op_type not in PLUMBING_OPS]
    want = parse_device(requested) if requested else None
    existing_specs = {parse_device(d) for d in existing} if existing is not None else None
    if want is not None:
        missing = (f"there is no {want.short}" if existing_specs is not None and want not in existing_specs
                   else "")
        elsewhere = [r for r in ops if parse_device(r.device) != want]
        if elsewhere:
            ran_on = tuple(dict.fromkeys(r.short_device for r in elsewhere))
            op_types = tuple(dict.fromkeys(r.op_type or r.op for r in elsewhere))
            out.append(Fallback(requested, ran_on, op_types, missing))
        elif missing:
            out.append(Fallback(requested, (), (), missing))
    for asked in dict.fromkeys(asked_in_source):
        spec = parse_device(asked)
        if spec is None or existing_specs is None or spec in existing_specs or spec == want:
            continue
        ran_on = tuple(dict.fromkeys(r.short_device for r in ops))
        # The literal may sit in a branch that never ran: say what is known, not more.
        out.append(Fallback(asked, ran_on, (), f"there is no {spec.short} here: ops placed under it, "
                                               "if that code ran, were moved by soft placement"))
    return tuple(out)


_TF_DEVICE_LITERAL = re.compile(r"""\bdevice\(\s*[rRbBuU]?(['"])([^'"\n]+)\1\s*\)""")


def devices_in_source(source: str) -> list[str]:
    """Device strings in ``tf.device("...")`` / ``device('...')`` literals of a cell's source."""
    return [m.group(2) for m in _TF_DEVICE_LITERAL.finditer(source)]


def _table_text(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]


def _table_html(header: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    from .views import table_html  # the one table style of every view (JupyterLab's colours, escaped cells)

    return table_html(header, rows, right)


@dataclass(frozen=True, repr=False)
class CellSummary:
    """Op types per device for one cell, with fallbacks flagged. Renders as text (``repr``) and HTML."""

    cell: int | None
    rows: tuple[SummaryRow, ...]
    fallbacks: tuple[Fallback, ...] = ()
    requested: str | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_records(
        cls,
        records: Sequence[PlacementRecord],
        cell: int | None = None,
        requested: str | None = None,
        fallbacks: Sequence[Fallback] = (),
        notes: Sequence[str] = (),
    ) -> CellSummary:
        executed: collections.Counter = collections.Counter()
        placed_as: collections.Counter = collections.Counter()
        for r in records:
            if r.op_type in PLUMBING_OPS:
                continue
            kind = r.op_type or r.op
            key = (r.short_device, base_op_type(kind))
            if r.channel == "eager":
                executed[key] += 1
            else:
                placed_as[(key, kind)] += 1
        # oneDNN rewrites MatMul into _MklMatMul and the placer reports the node once as each: one placement.
        placed: collections.Counter = collections.Counter()
        for (key, _), count in placed_as.items():
            placed[key] = max(placed[key], count)
        keys = sorted(set(executed) | set(placed), key=lambda k: (_device_sort_key(k[0]), k[1]))
        # Run metadata tells where ops were placed, never how often they ran: without one eager line the
        # executed column is unknown, not zero.
        blind = any(r.channel == "run_metadata" for r in records) and not any(r.channel == "eager" for r in records)
        rows = tuple(SummaryRow(d, t, None if blind else executed[(d, t)], placed[(d, t)]) for d, t in keys)
        if blind and rows:
            notes = (*notes, "executed is unknown (-): without TensorFlow's log only run metadata is seen, which "
                             "tells where newly compiled ops were placed, not how often they ran")
        return cls(cell, rows, tuple(fallbacks), requested, tuple(notes))

    @property
    def empty(self) -> bool:
        return not self.rows and not self.fallbacks

    def _title(self) -> str:
        where = f"cell {self.cell}" if self.cell is not None else "this cell"
        devices = len({r.device for r in self.rows})
        asked = f", asked {self.requested}" if self.requested else ""
        return f"tfgpu placement, {where}{asked}: {len(self.rows)} op type(s) on {devices} device(s)"

    def _cells(self) -> list[tuple]:
        return [(r.device, r.op_type, "-" if r.executed is None else r.executed, r.placed) for r in self.rows]

    def to_text(self) -> str:
        lines = [self._title()]
        lines += [f"  !! {f.text()}" for f in self.fallbacks]
        if self.rows:
            lines += _table_text(("device", "op type", "executed", "placed"), self._cells())
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_html(self) -> str:
        from .views import alert, box, caution, title

        parts = [title(self._title())]
        # A fallback in JupyterLab's error colour, readable (WCAG AA) in its light and dark themes.
        parts += [alert(f.text()) for f in self.fallbacks]
        if self.rows:
            parts.append(_table_html(("device", "op type", "executed", "placed"), self._cells(), right=(2, 3)))
        parts += [caution(f"note: {n}") for n in self.notes]
        return box("placement", *parts)

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _device_sort_key(short: str) -> tuple[str, int]:
    kind, _, index = short.partition(":")
    return (kind, int(index) if index.isdigit() else -1)


@dataclass(frozen=True, repr=False)
class RecordTable:
    """The ``show`` listing: records (already filtered and limited) with what the buffer dropped."""

    records: tuple[PlacementRecord, ...]
    matched: int
    total: int
    dropped: int
    maxlen: int

    def _title(self) -> str:
        shown = f"showing the last {len(self.records)} of {self.matched}" if len(self.records) < self.matched \
            else f"{self.matched}"
        return (f"tfgpu placement records: {shown} matching, {self.total} kept, "
                f"{self.dropped} dropped by the ring buffer (size {self.maxlen})")

    def _rows(self) -> list[tuple]:
        return [(r.cell if r.cell is not None else "", r.short_device, r.op_type or "", r.op, r.channel,
                 r.requested or "") for r in self.records]

    _HEADER = ("cell", "device", "op type", "op", "channel", "asked")

    def to_text(self) -> str:
        return "\n".join([self._title(), *(_table_text(self._HEADER, self._rows()) if self.records else [])])

    def to_html(self) -> str:
        from .views import box, title

        table = _table_html(self._HEADER, self._rows(), right=(0,)) if self.records else ""
        return box("placement", title(self._title()), table)

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return self.to_html()


# --- TensorFlow, read lazily (never imported here) ---------------------------------------------------------


def tf_context() -> Any | None:
    """TensorFlow's eager context if TensorFlow is imported and the context exists; never creates it."""
    module = sys.modules.get("tensorflow.python.eager.context")
    if module is None or not hasattr(module, "context_safe"):
        return None
    return module.context_safe()


def tf_log_flag() -> bool | None:
    """TensorFlow's Python-side log_device_placement flag (None when unknown). After the runtime started
    it says what was last *asked*, not what TensorFlow does (TF_FACTS)."""
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


__all__ = [
    "CHANNELS",
    "DEFAULT_MAXLEN",
    "DEVICE_FORMS",
    "PLUMBING_OPS",
    "Capture",
    "CellRecorder",
    "CellSummary",
    "DeviceSpec",
    "Fallback",
    "LineFields",
    "PlacementLog",
    "PlacementRecord",
    "RecordTable",
    "SummaryRow",
    "device_matcher",
    "devices_in_source",
    "find_fallbacks",
    "flush_c_stdio",
    "logical_devices",
    "parse_device",
    "parse_line",
    "records_from_run_metadata",
    "short_device",
]
