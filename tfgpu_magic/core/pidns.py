"""Whose numbers NVML's PIDs are: the driver's namespace (the host's) against this process's.

The NVIDIA driver never translates PIDs: NVML lists host PIDs, whatever namespace asks. In a container (Docker,
Podman, a Kubernetes pod: a PID namespace of its own) the same number names another process, or none, so a GPU
process must never be matched to a local one by its number. What can be known instead:

- ``host``: this process is in the initial PID namespace (the host, Docker's ``--pid=host``, Kubernetes'
  ``hostPID: true``): NVML's numbers are ours; everything works as it always has.
- ``host_proc``: a host ``/proc`` is mounted here (its path in ``TFGPU_HOST_PROC``, or the server's
  ``TfgpuServer.host_proc``): ``<it>/<host pid>/status`` has ``NSpid:`` (the host's number, then each inner
  namespace's), and ``<it>/<pid>/ns/pid`` says which namespace that is, so a host PID maps to ours when it is
  one of ours, and to a name and a user when it is not.
- ``none``: nothing maps. A kernel learns its own host PID by a handshake (core/handshake.py) and says it in its
  report (core/reports.py); every other PID is memory this process cannot attribute, said as such.

Reading here is /proc only (no IPython, no NVML); the per-PID answers are cached as nvml_processes' names were.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .inputs import printable

INITIAL_PIDNS_INO = 0xEFFFFFFC  # PROC_PID_INIT_INO: the initial PID namespace's inode, fixed since Linux 3.8
HOST_PROC_ENV = "TFGPU_HOST_PROC"
HOST, HOST_PROC, NONE = "host", "host_proc", "none"

_TTL_S = 2.0  # how long a PID's identity is trusted before its /proc entry is checked again (pid reuse)
_CACHE_MAX = 4096


@dataclass(frozen=True)
class Identity:
    """A GPU process as this process can know it: its number here (None: not in our namespace, or not known),
    its command name and its user (None: not visible)."""

    local_pid: int | None
    name: str | None
    user: str | None


def namespace_inode(proc: str = "/proc") -> int | None:
    try:
        return os.stat(f"{proc}/self/ns/pid").st_ino
    except OSError:
        return None


def _status_fields(path: str) -> dict[str, str]:
    """``Name``, ``Uid`` and ``NSpid`` of a /proc status file ({} where it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return {}
    try:
        data = os.read(fd, 4096)
    except OSError:
        return {}
    finally:
        os.close(fd)
    fields = {}
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Uid", "NSpid"):
            fields[key] = value.strip()
    return fields


def _numbers(text: str | None) -> list[int]:
    try:
        return [int(word) for word in (text or "").split()]
    except ValueError:
        return []


class PidView:
    """How NVML's PIDs map to this process's namespace. ``mode``: ``host``, ``host_proc`` or ``none``;
    ``note``: why, in a sentence the views show beside the memory they cannot attribute."""

    def __init__(self, host_proc: str | os.PathLike | None = None, *, proc: str = "/proc",
                 initial_inode: int = INITIAL_PIDNS_INO):
        self._proc = proc
        self.inode = namespace_inode(proc)
        self.host_proc: Path | None = None
        self.learned_self: int | None = None  # this process's host PID, from the handshake (mode none)
        self._lock = threading.Lock()
        self._cache: dict[int, tuple[float, tuple | None, Identity]] = {}
        self._users: dict[int, str | None] = {}
        # No /proc to ask (not Linux): nothing says otherwise, so the numbers are taken as ours.
        if self.inode is None or self.inode == initial_inode:
            self.mode, self.note = HOST, ""
            return
        self.mode = NONE
        self.note = ("this process's PID namespace differs from the driver's (a container): NVML's PIDs are the "
                     "host's, so they are never matched to local processes by number")
        if host_proc:
            why = self._check_host_proc(str(host_proc))
            if why:
                self.note += f"; {HOST_PROC_ENV}={printable(str(host_proc))} is not used: {why}"
            else:
                self.mode, self.host_proc = HOST_PROC, Path(host_proc)
                self.note = (f"this process's PID namespace differs from the driver's; host PIDs are mapped through "
                             f"the host /proc at {printable(str(host_proc))}")

    def _check_host_proc(self, path: str) -> str:
        """'' when ``path`` is a /proc of an outer namespace that shows this process; else why not."""
        fields = _status_fields(f"{path}/self/status")
        if not fields:
            return "it has no readable self/status (is it a /proc mount?)"
        if namespace_inode(path) != self.inode:
            return "its self is not this process (a /proc of another mount?)"
        if len(_numbers(fields.get("NSpid"))) < 2:
            return "it is this namespace's own /proc, not the host's"
        return ""

    @property
    def comparable(self) -> bool:
        """NVML's PIDs are this namespace's numbers."""
        return self.mode == HOST

    def to_dict(self) -> dict:
        return {"comparable": self.comparable, "view": self.mode, "note": self.note}

    def self_host_pid(self) -> int | None:
        """This process's PID as NVML lists it, or None while not known (mode none, before the handshake)."""
        if self.mode == HOST:
            return os.getpid()
        if self.mode == HOST_PROC:
            numbers = _numbers(_status_fields(f"{self.host_proc}/self/status").get("NSpid"))
            return numbers[0] if numbers else None
        return self.learned_self

    def learn_self(self, host_pid: int) -> None:
        self.learned_self = host_pid
        with self._lock:
            self._cache.pop(host_pid, None)

    def identify(self, pid: int, now: float | None = None) -> Identity:
        """Who NVML's ``pid`` is here. Cached per PID for a couple of seconds, and re-read when the /proc entry
        behind it is a new one (the number was reused)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            cached = self._cache.get(pid)
        if cached is not None and now - cached[0] < _TTL_S:
            return cached[2]
        if self.mode == NONE:
            found = self._self_identity() if pid == self.learned_self else Identity(None, None, None)
            key = None
        else:
            key, found = self._read(pid, cached)
        with self._lock:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[pid] = (now, key, found)
        return found

    def _self_identity(self) -> Identity:
        fields = _status_fields(f"{self._proc}/self/status")
        return Identity(os.getpid(), fields.get("Name"), self._user_of(os.geteuid()))

    def _read(self, pid: int, cached) -> tuple[tuple | None, Identity]:
        where = self._proc if self.mode == HOST else str(self.host_proc)
        try:
            st = os.stat(f"{where}/{pid}")
            key: tuple | None = (st.st_ino, st.st_uid)
        except OSError:
            key = None
        if cached is not None and cached[1] == key and key is not None:
            return key, cached[2]
        if key is None:
            return None, Identity(pid if self.mode == HOST else None, None, None)
        user = self._user_of(key[1])
        if self.mode == HOST:
            try:
                with open(f"{where}/{pid}/comm", encoding="utf-8", errors="replace") as f:
                    name = f.read().rstrip("\n") or None
            except OSError:
                name = None
            return key, Identity(pid, name, user)
        fields = _status_fields(f"{where}/{pid}/status")
        numbers = _numbers(fields.get("NSpid"))
        local = None
        try:  # ours only when its innermost namespace is this one (another container's numbers are not ours)
            if numbers and os.stat(f"{where}/{pid}/ns/pid").st_ino == self.inode:
                local = numbers[-1]
        except OSError:  # another user's process: its namespace cannot be read, and it is no kernel of ours
            pass
        return key, Identity(local, fields.get("Name") or None, user)

    def _user_of(self, uid: int) -> str | None:
        if uid not in self._users:
            try:
                import pwd

                self._users[uid] = pwd.getpwuid(uid).pw_name
            except (ImportError, KeyError):
                self._users[uid] = str(uid)  # a uid with no passwd entry (containers): still say whose
        return self._users[uid]

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()
        self._users.clear()


_view: PidView | None = None
_view_lock = threading.Lock()


def view() -> PidView:
    """This process's view, made on first use from ``TFGPU_HOST_PROC``."""
    global _view
    with _view_lock:
        if _view is None:
            _view = PidView(os.environ.get(HOST_PROC_ENV) or None)
        return _view


def use_host_proc(path: str | None) -> PidView:
    """Make the view again with this host /proc (the server's option); kernels started later inherit it."""
    global _view
    with _view_lock:
        if path:
            os.environ[HOST_PROC_ENV] = path
        _view = PidView(path or os.environ.get(HOST_PROC_ENV) or None)
        return _view


__all__ = ["HOST", "HOST_PROC", "HOST_PROC_ENV", "NONE", "Identity", "PidView", "namespace_inode", "use_host_proc",
           "view"]
