"""Waiting for a free GPU, and claims that keep two waiting kernels off the same one.

``visible auto --min-free 20GB --wait 10m`` re-reads NVML every ``POLL_S`` until enough GPUs qualify. The
kernel that gets a GPU claims it: a lock file per GPU under the user's Jupyter runtime folder, held with
``flock`` by the kernel's process, so it ends when the process ends. Another kernel skips a GPU claimed by a
live process until that process shows up in the GPU's NVML process list (its TensorFlow runtime has
allocated there, and the free memory says the rest). Claims are advisory and per user: the folder must be the
user's own (mode 0700) and each lock file a regular file of theirs (private_files.py); when the folder cannot be
used, claims are off and a choice is made without them, saying so.

No IPython and no TensorFlow: the faces pass a progress callback and turn PlanError into their own errors.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .i18n import N_, _
from .inputs import printable, shown
from .plan import PlanError
from .private_files import PrivateFileError, PrivateFolderError, open_private, private_folder, runtime_folder

POLL_S = 1.0  # how often NVML is read while waiting; a Ctrl-C is seen within this
MAX_WAIT_S = 7 * 24 * 3600
DURATION_FORMS = N_("a duration like 30s, 10m or 2h (a bare number is seconds)")  # translated where said
_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "m": 60, "min": 60, "mins": 60, "h": 3600, "hr": 3600, "hrs": 3600,
          "d": 86400}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: str, *, what: str = "") -> float:
    """``30s``, ``10m``, ``2h``, ``1.5h``, ``45`` (seconds) -> seconds; above 0 and at most 7 days."""
    what, value, forms = what or _("--wait duration"), shown(text), _(DURATION_FORMS)
    m = _DURATION_RE.match(text or "")
    if not m:
        raise PlanError(_("bad {what} {value}: expected {forms}").format(what=what, value=value, forms=forms))
    unit = m.group(2).lower()
    if unit not in _UNITS:
        raise PlanError(_("bad {what} {value}: unknown unit {unit}; use s, m or h").format(
            what=what, value=value, unit=shown(m.group(2))))
    too_long = _("bad {what} {value}: at most 7 days (7d); give {forms}").format(what=what, value=value, forms=forms)
    if len(m.group(1)) > 12:  # no float overflow, no thousand-digit int: nobody waits that long anyway
        raise PlanError(too_long)
    seconds = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(seconds) or seconds > MAX_WAIT_S:
        raise PlanError(too_long)
    if seconds <= 0:
        raise PlanError(_("bad {what} {value}: it must be more than 0 s; give {forms}").format(
            what=what, value=value, forms=forms))
    return seconds


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} m" if seconds % 60 == 0 else f"{seconds / 60:.1f} m"
    return f"{seconds / 3600:.1f} h"


# -- claims --------------------------------------------------------------------------------------------
def holder_name() -> str:
    """This process as a person knows it: "kernel 4f2c8a1e" (from its connection file), else "pid N"."""
    argv = sys.argv
    for k, arg in enumerate(argv[:-1]):
        if arg in ("-f", "--f"):
            name = Path(argv[k + 1]).name
            if name.startswith("kernel-") and name.endswith(".json"):
                return f"kernel {name[len('kernel-'):-len('.json')][:8]}"
    return f"pid {os.getpid()}"


@dataclass(frozen=True)
class Claim:
    key: str  # the GPU's UUID (or "gpu-N" without one)
    pid: int  # 0: a lock file whose record says nothing readable
    holder: str  # "kernel 4f2c8a1e"; as read from the lock file: shown escaped
    since: float

    def describe(self) -> str:
        holder = self.holder if _PLAIN_HOLDER.fullmatch(self.holder) else shown(self.holder)
        plain = self.pid <= 0 or self.holder == f"pid {self.pid}"  # no pid to add, or the holder is the pid
        who = holder if plain else f"{holder} (pid {self.pid})"
        return f"claimed by {who}, waiting for it to allocate"


# What a holder written by this package looks like ("kernel 4f2c8a1e", "pid 4242"): shown as it is; anything
# else in a lock file is quoted and escaped by shown() (a terminal escape or a newline must not reach a message).
_PLAIN_HOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}")
_RECORD_BYTES = 1024  # a record is ~100 bytes; a longer file is no record of ours
_HOLDER_CHARS = 64
NO_RECORD = "another process"  # the holder of a lock whose record cannot be read


class Claims:
    """This process's claims, and a look at everyone else's, in one folder of lock files.

    The folder is checked once, when first needed (private_files.private_folder: the user's own, mode 0700).
    When it cannot be used, claims are off (``off`` says why): nothing is claimed and nothing is refused, and
    the caller says so. A lock file that is not a regular file of the user's is never written or waited on:
    that GPU goes unclaimed (``why_off`` says why), rather than refused."""

    def __init__(self, folder: Path | None = None, holder: str | None = None):
        self._folder = folder
        self.holder = holder
        self._held: dict[str, tuple[int, int]] = {}  # key -> (the open, locked file descriptor, the pid that took it)
        self._checked = False
        self.off: str | None = None  # why claims are off (the folder cannot be used); None: they work
        self._unusable: dict[str, str] = {}  # key -> why its lock file was not used, the last time it was looked at

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = runtime_folder() / "tfgpu-claims"
        return self._folder

    def _ready(self, create: bool = True) -> bool:
        """Whether claims work: the folder is checked (and made) on the first call that may create it."""
        if not self._checked:
            if not create and not os.path.lexists(self.folder):
                return False  # nobody has claimed anything here yet: nothing to look at, nothing decided
            try:
                private_folder(self.folder)
            except PrivateFolderError as err:
                self.off = f"{err}; set JUPYTER_RUNTIME_DIR to a folder of your own to turn them on"
            self._checked = True
        return self.off is None

    def why_off(self, keys: Iterable[str] = ()) -> str | None:
        """Why claims are off, or off for one of these keys (its lock file was not used); None when they work."""
        return self.off or next((self._unusable[k] for k in keys if k in self._unusable), None)

    def _path(self, key: str) -> Path:
        return self.folder / (re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".lock")

    def held(self) -> tuple[str, ...]:
        return tuple(self._held)

    def claim(self, key: str) -> bool:
        """Take the claim on ``key``. False only when another live process holds it; True when taken, and also
        when it cannot be taken because claims are off (``why_off``): then it is used unclaimed."""
        if key in self._held:
            return True
        if not self._ready():
            return True
        taken = self._take(key)
        return taken if taken is not None else bool(self._take(key))  # None: released as we looked: once more

    def _take(self, key: str) -> bool | None:
        try:
            fd = open_private(self._path(key), os.O_RDWR, create=True)
        except (PrivateFileError, OSError) as err:
            self._unusable[key] = _unusable(self._path(key), err)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):  # no locks here (some network file systems)
                self._unusable[key] = _unusable(self._path(key), err)
                return True
            owner = self._read(key)
            if owner is None:
                return True if key in self._unusable else None  # replaced by no file of ours, or just released
            if owner.pid == os.getpid():  # another controller of this process holds it
                self._held[key] = (-1, os.getpid())
                return True
            return False
        self._unusable.pop(key, None)
        holder = (self.holder or holder_name())[:_HOLDER_CHARS]
        record = json.dumps({"pid": os.getpid(), "holder": holder, "since": time.time()})
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record.encode(), 0)
        except OSError:  # a full disk: the lock alone is the claim; others see it as "another process"
            pass
        self._held[key] = (fd, os.getpid())
        return True

    def release(self, keys: Iterable[str] | None = None) -> None:
        for key in list(self._held if keys is None else keys):
            fd, taker = self._held.pop(key, (-1, 0))
            if fd < 0:
                continue
            if taker == os.getpid():
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)  # an unlocked, empty file is no claim (emptied while still ours)
                # Unlock explicitly: a child forked meanwhile (a multiprocessing pool) shares this open file, and
                # closing our descriptor alone would leave the lock held for as long as the child lives.
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)  # in a forked child: only its copy of the descriptor, the parent's claim stays

    def others(self, keys: Iterable[str]) -> dict[str, Claim]:
        """The claims other live processes hold on these keys."""
        found: dict[str, Claim] = {}
        if not self._ready(create=False):
            return found
        for key in keys:
            if key in self._held:
                continue
            claim = self._read(key)
            if claim is not None:
                found[key] = claim
        return found

    def _read(self, key: str) -> Claim | None:
        path = self._path(key)
        try:
            fd = open_private(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except (PrivateFileError, OSError) as err:  # not a file of ours: no claim of anyone's, and never waited on
            self._unusable[key] = _unusable(path, err)
            return None
        self._unusable.pop(key, None)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return None
                return _record(key, os.pread(fd, _RECORD_BYTES + 1, 0))
            return None  # nobody holds it: a leftover of a process that ended
        finally:
            os.close(fd)


def _record(key: str, data: bytes) -> Claim:
    """A held lock file's record, checked: a pid above 0, a short holder text, a finite time; else a claim of
    "another process" (the lock is held all the same)."""
    unknown = Claim(key, 0, NO_RECORD, 0.0)
    if len(data) > _RECORD_BYTES:
        return unknown
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or 1,000 nested brackets
        return unknown
    if not isinstance(record, dict):
        return unknown
    pid, holder, since = record.get("pid"), record.get("holder"), record.get("since")
    if type(pid) is not int or not 0 < pid < 1 << 31:
        return unknown
    if not isinstance(holder, str) or not 0 < len(holder) <= _HOLDER_CHARS:
        holder = f"pid {pid}"
    if type(since) not in (int, float) or not math.isfinite(since):
        since = 0.0
    return Claim(key, pid, holder, float(since))


def _unusable(path: Path, err: Exception) -> str:
    if isinstance(err, PrivateFileError):
        return str(err)
    why = os.strerror(err.errno).lower() if isinstance(err, OSError) and err.errno else type(err).__name__
    return f"{printable(path)} cannot be used as a lock file: {why}"


def gpu_key(gpu) -> str:
    uuid = getattr(gpu, "uuid", None)
    return uuid if isinstance(uuid, str) and uuid else f"gpu-{gpu.index}"


_reports_reader = None


def _host_pids() -> dict[int, int]:
    """Local PID -> host PID, from the kernels' reports (a container: NVML's PIDs are the host's)."""
    global _reports_reader
    if _reports_reader is None:
        from .reports import ReportReader

        _reports_reader = ReportReader()
    return {r.pid: r.host_pid for r in _reports_reader.reports().values() if r.host_pid is not None}


def live_claims(claims: Claims, snap) -> dict[str, Claim]:
    """Device key (GPU or MIG UUID) -> another live process's claim on it that still counts: the claimer is
    not yet among the device's NVML processes (once it is, its allocation shows in the free memory). In a
    container the claimer is recognised by the host PID its report gives (NVML's numbers are the host's)."""
    if snap is None or not snap.available:
        return {}
    devices = {gpu_key(g): g for g in snap.gpus}
    devices.update({m.uuid: m for _parent, m in snap.mig_devices() if isinstance(m.uuid, str)})
    out = {}
    host_pids: dict[int, int] | None = None  # read once, and only in a container (snap.pids set)
    for key, claim in claims.others(devices).items():
        if claim.pid == os.getpid():  # another controller of this same process (a test's): the same kernel
            continue
        if snap.pids is None:
            listed_as: int | None = claim.pid  # the host: a claim's PID is NVML's number
        else:
            if host_pids is None:
                host_pids = _host_pids()
            listed_as = host_pids.get(claim.pid)
        procs = devices[key].processes if isinstance(devices[key].processes, tuple) else ()
        if listed_as is None or not any(p.pid == listed_as for p in procs):
            out[key] = claim
    return out


def claims_by_index(claims: Claims, snap) -> dict[int, Claim]:
    """Whole GPUs' live claims by physical index (live_claims)."""
    found = live_claims(claims, snap)
    return {g.index: found[gpu_key(g)] for g in (snap.gpus if snap is not None else ()) if gpu_key(g) in found}


# -- the wait ------------------------------------------------------------------------------------------
def wait_until(pick: Callable[[], tuple[object | None, str]], timeout_s: float, what: str,
               progress: Callable[[str], None] | None = None, poll_s: float = POLL_S,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> object:
    """Call ``pick()`` until it returns a result (not None), at most ``timeout_s``; ``pick`` also returns a
    line on the best candidates so far, shown through ``progress`` with the time waited. A timeout or a
    Ctrl-C is a PlanError: whatever ``pick`` claimed on the way it must have released (it claims only when
    it returns a result)."""
    started = clock()
    line = ""
    try:
        while True:
            result, line = pick()
            waited = clock() - started
            if result is not None:
                return result
            if waited >= timeout_s:
                raise PlanError(_("{what}: nothing qualified within {duration} ({line}); nothing changed; wait longer, "
                                  "ask for less, or name a GPU").format(what=what, duration=format_duration(timeout_s),
                                                                       line=line))
            if progress is not None:
                progress(f"tfgpu: {line}; {format_duration(waited)} of {format_duration(timeout_s)}")
            sleep(min(poll_s, max(0.0, timeout_s - waited)))
    except KeyboardInterrupt:
        raise PlanError(_("{what}: interrupted after {duration}; nothing changed").format(
            what=what, duration=format_duration(clock() - started))) from None
