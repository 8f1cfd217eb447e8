"""TensorFlow's own log, one cell at a time: recognised, kept, and shown as one compact block.

TensorFlow talks on two channels a notebook cannot silence once it has started: its C++ log on fd 2
(``I0000 00:00:1796027613.34 13837 cpu_feature_guard.cc:227] ...`` in 2.21, a dated prefix in 2.16,
and ``WARNING: All log messages before absl::InitializeLog() ...``), and its Python logger
``tensorflow`` (``WARNING:tensorflow:...``). The placement capture's fd-2 reader hands lines to
:func:`classify`; the Python logger is read through a logger filter. Nothing is dropped: every line is
kept per cell, warnings and errors stay visible, information is folded with a count.

This module imports neither IPython nor TensorFlow.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass, field

from .i18n import _, ngettext

MODES = ("quiet", "all", "raw")  # quiet: fold information; all: show every line; raw: TensorFlow's own way
SEVERITIES = {"I": "info", "W": "warning", "E": "error", "F": "fatal"}
_RANK = {"I": 0, "W": 1, "E": 2, "F": 3}
RECENT_CELLS = 50
MAX_LINES_PER_CELL = 2000

# 2.21 (absl):  I0000 00:00:1796027613.340116   13837 cpu_feature_guard.cc:227] message
# 2.16 (tsl):   2026-11-30 03:29:57.481204: I tensorflow/core/util/port.cc:113] message
_CPP = re.compile(
    r"^(?:(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ (?P<where>[\w/.-]+:\d+)\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<sev2>[IWEF]) (?P<where2>[\w/.-]+:\d+)\] )(?P<message>.*)$"
)
# absl's notice about itself, printed once per library that loads it: information, whatever it says.
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# Lines TensorFlow writes as the rest of a multi-line message (cpu_feature_guard's second line).
_CONTINUATIONS = ("To enable the following instructions:",)
# Harmless notices, whatever severity TensorFlow gives them: information (issue 37). oneDNN's and the CPU features'
# notices at every import; in 2.14-2.16 a CUDA build logs its plugins' double registration as errors on every import
# (tensorflow#62075), and TF-TRT's missing library as a warning.
_HARMLESS = ("oneDNN custom operations are on", "This TensorFlow binary is optimized",
             "Unable to register cuDNN factory", "Unable to register cuFFT factory",
             "Unable to register cuBLAS factory", "TF-TRT Warning: Could not find TensorRT",
             "computation placer already registered")
# Information TensorFlow's own guides tell the reader to look for: shown under the cell, never folded.
_POINTED_AT = re.compile(r"^Using \w*Strategy with ")


def _severity(severity: str, message: str) -> str:
    return "I" if severity != "I" and any(notice in message for notice in _HARMLESS) else severity


def pointed_at(line: LogLine) -> bool:
    """Information TensorFlow's guides point at ("Using MirroredStrategy with devices ..."): shown, never folded."""
    return line.severity == "I" and _POINTED_AT.match(line.message) is not None


def _count(name: str, n: int) -> str:
    """"1 warning", "2 errors", "6 info": one severity's count in a log block's heading."""
    if name == "fatal":
        return ngettext("{n} fatal", "{n} fatals", n).format(n=n)
    if name == "error":
        return ngettext("{n} error", "{n} errors", n).format(n=n)
    if name == "warning":
        return ngettext("{n} warning", "{n} warnings", n).format(n=n)
    return _("{n} info").format(n=n)


@dataclass(frozen=True)
class LogLine:
    severity: str  # I, W, E or F
    text: str  # the line as TensorFlow wrote it
    message: str  # without its prefix
    where: str  # "cpu_feature_guard.cc:227", or "tensorflow" for the Python logger


def classify(line: str, previous: LogLine | None = None) -> LogLine | None:
    """A line of fd 2 -> LogLine when TensorFlow's C++ log wrote it, else None. ``previous``: the log
    line just before it, for the known continuation lines."""
    if line == _ABSL_NOTICE:
        return LogLine("I", line, line, "absl")
    if "] " in line[:120]:
        m = _CPP.match(line)
        if m is not None:
            return LogLine(_severity(m["sev"] or m["sev2"], m["message"]), line, m["message"],
                           (m["where"] or m["where2"]).rsplit("/", 1)[-1])
    if previous is not None and line.startswith(_CONTINUATIONS):
        return LogLine(previous.severity, line, line, previous.where)
    return None


def maybe_log_start(tail: bytes) -> bool:
    """Could this partial line (no newline yet) be the start of a line :func:`classify` takes? Such a tail
    waits for its end instead of passing at once; other text (a progress bar's ``\r`` line) passes."""
    if not tail:
        return False
    first = tail[:1]
    if first in (b"I", b"W", b"E", b"F"):
        return len(tail) == 1 or tail[1:2].isdigit() or tail.startswith(_ABSL_NOTICE_BYTES[:len(tail)])
    if first.isdigit():  # 2.16's dated prefix
        return True
    return any(known.startswith(tail[:len(known)]) for known in _CONTINUATIONS_BYTES)


_ABSL_NOTICE_BYTES = _ABSL_NOTICE.encode()
_CONTINUATIONS_BYTES = tuple(text.encode() for text in _CONTINUATIONS)


def from_record(record: logging.LogRecord) -> LogLine:
    """A record of TensorFlow's Python logger, as its own handler would have printed it."""
    level = record.levelno
    severity = "F" if level >= logging.CRITICAL else "E" if level >= logging.ERROR else \
        "W" if level >= logging.WARNING else "I"
    message = record.getMessage()
    return LogLine(_severity(severity, message), f"{record.levelname}:{record.name}:{message}", message, record.name)


@dataclass
class LogBlock:
    """TensorFlow's log lines of one cell."""

    cell: int | None
    lines: list[LogLine] = field(default_factory=list)
    dropped: int = 0
    show_all: bool = False  # mode "all": information is listed, not folded

    @property
    def highest(self) -> str:
        return max((line.severity for line in self.lines), key=_RANK.__getitem__, default="I")

    def counts(self) -> dict[str, int]:
        counted = collections.Counter(SEVERITIES[line.severity] for line in self.lines)
        return {name: counted[name] for name in ("fatal", "error", "warning", "info") if counted[name]}

    def heading(self) -> str:
        """"TensorFlow log, cell 2: 1 warning, 6 info", in the language in force (core/i18n.py)."""
        where = _("cell {number}").format(number=self.cell) if self.cell is not None else _("this cell")
        counts = _(", ").join(_count(name, n) for name, n in self.counts().items())
        dropped = _(" ({n} more not kept)").format(n=self.dropped) if self.dropped else ""
        return _("TensorFlow log, {where}: {counts}{dropped}").format(where=where, counts=counts, dropped=dropped)

    def shown_lines(self) -> list[LogLine]:
        return list(self.lines) if self.show_all else [ln for ln in self.lines if ln.severity != "I" or pointed_at(ln)]

    def to_text(self) -> str:
        shown = self.shown_lines()
        folded = len(self.lines) - len(shown)
        lines = [f"{self.heading()} [{SEVERITIES[self.highest]}]"]
        lines += [f"  {line.severity} {line.where}] {line.message}" for line in shown]
        if folded:
            said = ngettext("{n} info line folded: `%tfgpu log` shows them",
                            "{n} info lines folded: `%tfgpu log` shows them", folded).format(n=folded)
            lines.append(f"  ({said})")
        return "\n".join(lines)

    def full_text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    def __repr__(self) -> str:
        return self.to_text()



class TfLog:
    """The log of the running cell and of the last RECENT_CELLS cells. Lines arrive from the fd reader
    thread and from the Python logger in any thread."""

    def __init__(self, mode: str = "quiet"):
        self.mode = mode
        self.recent: collections.deque[LogBlock] = collections.deque(maxlen=RECENT_CELLS)
        self._current: LogBlock | None = None
        self._previous: LogLine | None = None  # for continuation lines
        self._lock = threading.Lock()
        self._filter: _LoggerFilter | None = None

    @property
    def taming(self) -> bool:
        return self.mode != "raw"

    # -- one cell --------------------------------------------------------------------------------------
    def begin(self, cell: int | None) -> None:
        self._attach()
        with self._lock:
            self._current = LogBlock(cell, show_all=self.mode == "all")
            self._previous = None

    def end(self, cell: int | None = None) -> LogBlock | None:
        """Close the running cell's block; returns it when it holds lines."""
        with self._lock:
            block, self._current = self._current, None
            self._previous = None
        if block is None or not block.lines:
            return None
        if cell is not None:
            block.cell = cell
        self.recent.append(block)
        return block

    def take_line(self, line: str) -> bool:
        """Called by the fd-2 reader for each whole line: True when it was TensorFlow's log and is kept."""
        with self._lock:
            if self._current is None:
                return False
            found = classify(line, self._previous)
            self._previous = found
            if found is None:
                return False
            self._add(found)
            return True

    def _add(self, line: LogLine) -> None:
        block = self._current
        if len(block.lines) < MAX_LINES_PER_CELL:
            block.lines.append(line)
        else:
            block.dropped += 1

    def take_record(self, record: logging.LogRecord) -> bool:
        with self._lock:
            if self._current is None:
                return False
            self._add(from_record(record))
            return True

    # -- TensorFlow's Python logger ----------------------------------------------------------------------
    def watch_python_logger(self) -> None:
        """Keep TensorFlow's own records of a cell out of the cell's stderr and in its block. A filter on
        TensorFlow's own handler only (the one `tf.get_logger()` adds, which prints them), never on the logger:
        a handler the user adds to `tf.get_logger()`, or the root logger's, gets every record as it would
        without the extension, and a record the user's own code logs there is printed as TensorFlow would."""
        if self._filter is None:
            self._filter = _LoggerFilter(self)
        self._attach()

    def unwatch_python_logger(self) -> None:
        if self._filter is not None:
            for handler in logging.getLogger("tensorflow").handlers:
                handler.removeFilter(self._filter)
            self._filter = None

    def _attach(self) -> None:
        """TensorFlow adds its handler when it first logs (during its import, or later): looked for at each
        cell's start, so the filter is on it from the first cell after."""
        if self._filter is None:
            return
        handler = tensorflows_handler()
        if handler is not None and self._filter not in handler.filters:
            handler.addFilter(self._filter)

    def text_of_recent(self, cells: int | None = None) -> str:
        blocks = list(self.recent)[-cells:] if cells else list(self.recent)
        if not blocks:
            return f"tfgpu: no TensorFlow log lines kept yet (mode: {self.mode})"
        parts = []
        for block in blocks:
            parts.append(f"-- cell {block.cell if block.cell is not None else '?'}: {len(block.lines)} line(s)"
                         + (f", {block.dropped} more not kept" if block.dropped else ""))
            parts.append(block.full_text())
        return "\n".join(parts)


class _LoggerFilter(logging.Filter):
    def __init__(self, log: TfLog):
        super().__init__()
        self.log = log

    def filter(self, record: logging.LogRecord) -> bool:
        return not (from_tensorflow(record) and self.log.take_record(record))


def tensorflows_handler() -> logging.Handler | None:
    """The handler `tf.get_logger()` put on the `tensorflow` logger (a StreamHandler with logging's basic format,
    added only where the root logger had no handler); None before TensorFlow logged, or where it added none."""
    for handler in logging.getLogger("tensorflow").handlers:
        formatter = handler.formatter
        if (type(handler) is logging.StreamHandler and formatter is not None
                and getattr(formatter, "_fmt", None) == logging.BASIC_FORMAT):
            return handler
    return None


_PACKAGES = ("tensorflow", "keras", "tf_keras")  # whose records are TensorFlow's own


def _package_roots() -> tuple[str, ...]:
    roots = []
    for name in _PACKAGES:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if where:
            roots.append(os.path.dirname(os.path.abspath(where)) + os.sep)
    return tuple(roots)


def from_tensorflow(record: logging.LogRecord) -> bool:
    """Whether TensorFlow (or Keras) itself logged the record: the caller TensorFlow's logger found lies in its
    package. A user's `tf.get_logger().warning(...)` is the user's line, never folded."""
    path = os.path.abspath(record.pathname or "")
    return any(path.startswith(root) for root in _package_roots())
