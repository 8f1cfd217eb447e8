"""A kernel's report: what a kernel says of itself, for a server that cannot match NVML's PIDs by number.

In a container NVML's PIDs are the host's (pidns.py). A kernel with tfgpu loaded keeps one small JSON file in the
user's secured runtime folder, beside the claims: its kernel id, its notebook (``JPY_SESSION_NAME``), its PID here,
its host PID once learned (handshake.py, or a host /proc) and how, the GPUs it uses by UUID, and TensorFlow's own
current and peak bytes per GPU. The server joins NVML's rows to its kernels through these.

The folder is another place other users may reach (the runtime folder is often under /tmp): the writer makes it
the user's own (private_files.private_folder); the reader trusts nothing it finds. A report is ignored, with one
log line per file and reason, when the folder is not the user's own or others may write it, when the file is not
a regular file of the user's, not JSON of the right shape, names a PID that is not alive, or claims a kernel whose
PID is another. A report whose PID has ended is removed.

No IPython, no tornado: the kernel's live model and the server's feed call these.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .inputs import printable
from .private_files import PrivateFileError, PrivateFolderError, open_private, private_folder, runtime_folder

FOLDER_NAME = "tfgpu-kernels"
SCHEMA = 1
MAX_BYTES = 16 * 1024  # a report is a few hundred bytes; a longer file is no report of ours
WRITE_EVERY_S = 1.0  # at most one write a second, and only when a value changed
_KERNEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
HOW = ("host_proc", "handshake")  # how a host PID was learned: read in a host /proc, or by the handshake


def folder() -> Path:
    return runtime_folder() / FOLDER_NAME


def kernel_id(argv: list[str] | None = None) -> str | None:
    """This kernel's id, from its connection file (``-f .../kernel-<id>.json``), or None outside a Jupyter kernel."""
    argv = sys.argv if argv is None else argv
    for k, arg in enumerate(argv[:-1]):
        if arg in ("-f", "--f"):
            name = Path(argv[k + 1]).name
            if name.startswith("kernel-") and name.endswith(".json"):
                found = name[len("kernel-"):-len(".json")]
                return found if _KERNEL_ID.fullmatch(found) else None
    return None


@dataclass(frozen=True)
class Report:
    kernel_id: str
    pid: int  # the kernel's PID in its own namespace (the server's, when they share one)
    notebook: str | None
    host_pid: int | None  # as NVML lists it; None: not learned
    how: str | None  # one of HOW, or None while not learned
    note: str  # why not learned, or why ambiguous ("" when learned)
    gpus: tuple[str, ...] = ()
    tf_memory: dict[str, dict[str, int]] = field(default_factory=dict)  # GPU UUID -> {"current", "peak"} bytes
    written_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "kernel_id": self.kernel_id, "pid": self.pid, "notebook": self.notebook,
                "host_pid": self.host_pid, "how": self.how, "note": self.note, "gpus": list(self.gpus),
                "tf_memory": self.tf_memory, "written_at": self.written_at}

    def summary(self) -> dict[str, Any]:
        """What the server's document says of it, per kernel."""
        return {"host_pid": self.host_pid, "how": self.how, "note": self.note}


# -- the kernel's side ------------------------------------------------------------------------------------------
class Reporter:
    """Writes this kernel's report: only when a value changed, at most once per ``every`` seconds (a change within
    that waits for the next ``update`` or ``flush``), atomically (a reader never sees half a file)."""

    def __init__(self, kernel: str, where: Path | None = None, *, every: float = WRITE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.kernel = kernel
        self._where = where
        self.every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, Any] | None = None
        self._last_at = -float("inf")
        self._pending: dict[str, Any] | None = None
        self.writes = 0
        self.off: str | None = None  # why reports cannot be written here

    @property
    def path(self) -> Path:
        if self._where is None:
            self._where = folder()
        return self._where / f"{self.kernel}.json"

    def update(self, values: dict[str, Any]) -> bool:
        """Keep ``values`` (Report fields but kernel_id and written_at); written now if due. True when written."""
        with self._lock:
            if values == self._last and self._pending is None:
                return False
            self._pending = values
            return self._flush_locked()

    def flush(self) -> bool:
        with self._lock:
            return self._flush_locked()

    def _flush_locked(self) -> bool:
        values = self._pending
        if values is None or self.off is not None or self._clock() - self._last_at < self.every:
            return False
        self._pending = None
        if values == self._last:
            return False
        report = Report(kernel_id=self.kernel, written_at=round(time.time(), 3), **values)
        try:
            self._write(json.dumps(report.to_dict(), separators=(",", ":")).encode())
        except (PrivateFolderError, PrivateFileError, OSError) as err:
            self.off = f"tfgpu: this kernel's report cannot be written: {err}"
            return False
        self._last, self._last_at = values, self._clock()
        self.writes += 1
        return True

    def _write(self, data: bytes) -> None:
        where = private_folder(self.path.parent)
        temporary = where / f".{self.kernel}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        fd = open_private(temporary, os.O_WRONLY | os.O_TRUNC, create=True)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)

    def remove(self) -> None:
        """The kernel is going: its report with it (a kill leaves it for the server to remove)."""
        # Gone already, or something that is no file of ours (a link planted there): left alone, and no traceback at
        # the kernel's exit.
        with contextlib.suppress(OSError, PrivateFileError):
            fd = open_private(self.path, os.O_RDONLY)
            os.close(fd)
            os.unlink(self.path)


# -- the server's side ------------------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def parse(data: bytes, expected_id: str) -> Report | str:
    """The report in ``data``, or why it is not one (a short phrase)."""
    if len(data) > MAX_BYTES:
        return f"larger than {MAX_BYTES // 1024} KiB"
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return "not JSON"
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return f"not a report of schema {SCHEMA}"
    kernel, pid, host_pid = doc.get("kernel_id"), doc.get("pid"), doc.get("host_pid")
    if kernel != expected_id:
        return "its kernel id is not its file's name"
    if type(pid) is not int or not 0 < pid < 1 << 31:
        return "no valid pid"
    if host_pid is not None and (type(host_pid) is not int or not 0 < host_pid < 1 << 31):
        return "no valid host pid"
    how, note, notebook = doc.get("how"), doc.get("note"), doc.get("notebook")
    if (host_pid is None) != (how is None) or (how is not None and how not in HOW):
        return "a host pid without a known way it was learned"
    gpus, memory = doc.get("gpus"), doc.get("tf_memory")
    if not isinstance(gpus, list) or not all(isinstance(g, str) and len(g) <= 96 for g in gpus):
        return "no valid GPU list"
    if not isinstance(memory, dict) or not all(
            isinstance(v, dict) and all(type(b) is int and b >= 0 for b in v.values()) for v in memory.values()):
        return "no valid memory figures"
    return Report(kernel, pid, notebook if isinstance(notebook, str) else None, host_pid, how,
                  note if isinstance(note, str) else "", tuple(gpus), memory,
                  doc.get("written_at") if type(doc.get("written_at")) is float else 0.0)


class ReportReader:
    """The server's reading of the reports folder: at most once per ``max_age`` seconds (reports change at most
    once a second), each file parsed again only when it changed. Problems are logged once per file and reason."""

    def __init__(self, where: Path | None = None, *, log: Callable[[str], None] | None = None, max_age: float = 1.0,
                 alive: Callable[[int], bool] = _alive):
        self._where = where
        self._log = log or (lambda line: None)
        self.max_age = max_age
        self._alive = alive
        self._read_at = -float("inf")
        self._reports: dict[str, Report] = {}
        self._files: dict[str, tuple[tuple, Report | str]] = {}  # file name -> (stat key, what it held)
        self._said: set[tuple[str, str]] = set()
        self.readings = 0

    @property
    def where(self) -> Path:
        if self._where is None:
            self._where = folder()
        return self._where

    def _say(self, name: str, why: str) -> None:
        if (name, why) not in self._said:
            if len(self._said) > 4096:
                self._said.clear()
            self._said.add((name, why))
            self._log(f"tfgpu: kernel report {printable(str(self.where / name))} is ignored: {why}")

    def reports(self, now: float | None = None) -> dict[str, Report]:
        """Kernel id -> its report, for the reports that can be trusted; dead kernels' removed."""
        now = time.monotonic() if now is None else now
        if now - self._read_at < self.max_age:
            return self._reports
        self._read_at = now
        self.readings += 1
        self._reports = self._read()
        return self._reports

    def _read(self) -> dict[str, Report]:
        where = self.where
        try:
            info = os.lstat(where)
        except FileNotFoundError:
            return {}
        except OSError as err:
            self._say("", f"the folder cannot be read ({err.strerror})")
            return {}
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            self._say("", "the folder is not a folder of this user's")
            return {}
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            self._say("", f"the folder can be written by other users (mode {stat.S_IMODE(info.st_mode):o})")
            return {}
        found: dict[str, Report] = {}
        seen = set()
        try:
            names = os.listdir(where)
        except OSError as err:
            self._say("", f"the folder cannot be listed ({err.strerror})")
            return {}
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            seen.add(name)
            kernel = name[:-len(".json")]
            report = self._file(name, kernel)
            if isinstance(report, Report):
                found[kernel] = report
        for gone in set(self._files) - seen:
            del self._files[gone]
        return found

    def _file(self, name: str, kernel: str) -> Report | None:
        path = self.where / name
        if not _KERNEL_ID.fullmatch(kernel):
            self._say(name, "its name is no kernel id")
            return None
        try:
            info = os.lstat(path)
        except OSError:
            return None
        key = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_uid, info.st_mode, info.st_nlink)
        cached = self._files.get(name)
        if cached is not None and cached[0] == key:
            held = cached[1]
        else:
            held = self._load(path, kernel)
            self._files[name] = (key, held)
        if isinstance(held, str):
            self._say(name, held)
            return None
        if not self._alive(held.pid):
            self._say(name, f"its pid {held.pid} is not alive (a kernel that ended): removed")
            with contextlib.suppress(OSError):
                os.unlink(path)
            self._files.pop(name, None)
            return None
        return held

    def _load(self, path: Path, kernel: str) -> Report | str:
        try:
            fd = open_private(path, os.O_RDONLY)
        except PrivateFileError as err:
            return str(err).replace(printable(str(path)) + " ", "", 1)
        except OSError as err:
            return f"it cannot be read ({err.strerror})"
        try:
            data = os.read(fd, MAX_BYTES + 1)
        except OSError as err:
            return f"it cannot be read ({err.strerror})"
        finally:
            os.close(fd)
        return parse(data, kernel)

    def check(self, kernel_id: str, report: Report, kernel_pid: int | None) -> bool:
        """Whether the report may speak for the server's kernel ``kernel_id`` whose PID the server knows: the report
        must name that very PID (a report naming another process claims someone else's kernel)."""
        if kernel_pid is None or report.pid != kernel_pid:
            self._say(f"{kernel_id}.json", f"it names pid {report.pid}, but that kernel's pid is "
                      f"{kernel_pid if kernel_pid is not None else 'unknown'}")
            return False
        return True


__all__ = ["FOLDER_NAME", "HOW", "Report", "ReportReader", "Reporter", "folder", "kernel_id", "parse"]
