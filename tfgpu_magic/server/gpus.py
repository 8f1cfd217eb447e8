"""The sidebar's GPU document: one NVML snapshot with each GPU process matched to the server's kernels.

Pure data in, pure data out (no tornado, no jupyter_server): the handler gathers the kernels and their
sessions, this module decides what belongs to whom. A process is matched by PID: the kernel's own, or a
kernel's descendant (a kernel that runs its GPU work in a child process). Where a PID cannot be matched
(NVML gives no process list, a process in another PID namespace, a kernel with no known PID) the document
says so in a sentence instead of guessing.

In a container NVML's PIDs are the host's (core/pidns.py; the reading's ``pids`` says so): a number is then never
matched to a local process. A process is placed through a host /proc (its ``local_pid``), or as a kernel's own by
that kernel's report (core/reports.py: its host PID, learned by the handshake); the rest is one line per device,
its processes and memory this server cannot attribute, never rows charged to whoever has the same number here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..core import idle, words
from ..core.i18n import _, ngettext, said
from ..core.inputs import MAX_INDEX, shown, whole_number
from ..core.nvml_values import placeable
from ..core.settings import wire_words
from ..core.version import GPUS_SCHEMA as SCHEMA

MAX_ANCESTRY = 64  # deeper than any real process tree; stops a loop in a corrupt /proc read

# NVML's exact memory figures, for the metrics (the *_mib ones are these in whole MiB, for people).
MEMORY_BYTES = ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes")
# The schema-1 GPU fields the sidebar gets, in order; ``processes`` is rebuilt with the kernel each belongs to.
_GPU_FIELDS = (
    "index", "name", "uuid", "pci_bus_id", "memory_total_mib", "memory_used_mib", "memory_free_mib",
    "memory_reserved_mib", "utilization_gpu_pct", "utilization_memory_pct", "temperature_c", "power_w", "error",
    *MEMORY_BYTES,
)


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid`` from /proc, or None where it cannot be read (ended, another namespace)."""
    try:  # os.open/os.read: half the cost of open() for a file read whole, and this runs per process
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


class ParentCache:
    """``parent_pid`` remembered for ``ttl`` seconds across readings. A process's parent changes only when its parent
    exits (it is then reparented to init): for at most ``ttl`` the process still counts as the old parent's
    kernel's, which is where its GPU memory came from anyway. Bounded: cleared when full."""

    def __init__(self, ttl: float = 2.0, read: Callable[[int], int | None] = parent_pid, limit: int = 16384):
        self.ttl = ttl
        self._read = read
        self._limit = limit
        self._parents: dict[int, tuple[float, int | None]] = {}

    def __call__(self, pid: int) -> int | None:
        now = time.monotonic()
        cached = self._parents.get(pid)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        parent = self._read(pid)
        if len(self._parents) >= self._limit:
            self._parents.clear()
        self._parents[pid] = (now, parent)
        return parent


class Ancestry:
    """Which of this server's kernels a PID runs under, for one reading: every parent read once (a kernel's
    children, and the shells and daemons above other processes, are shared by many GPU processes)."""

    def __init__(self, kernel_by_pid: dict[int, dict], parent_of: Callable[[int], int | None]):
        self._kernel_by_pid = kernel_by_pid
        self._parent_of = parent_of
        self._parents: dict[int, int | None] = {}
        self._owners: dict[int, tuple[dict, str] | None] = {}

    def owner(self, pid: int, *, parents: bool = True) -> tuple[dict, str] | None:
        """(kernel, "kernel" | "child") for a GPU process that is a kernel or runs under one, else None.
        ``parents`` False: the PID has no /proc entry to read, so only a kernel's own PID can match."""
        if pid in self._kernel_by_pid:
            return self._kernel_by_pid[pid], "kernel"
        if not parents:
            return None
        if pid in self._owners:
            return self._owners[pid]
        chain = [pid]
        found: tuple[dict, str] | None = None
        current: int | None = pid
        for _step in range(MAX_ANCESTRY):
            if current not in self._parents:
                self._parents[current] = self._parent_of(current)
            current = self._parents[current]
            if current is None or current <= 1 or current in chain:
                break
            if current in self._kernel_by_pid:
                found = (self._kernel_by_pid[current], "child")
                break
            if current in self._owners:  # met a chain already walked: its answer is this one's
                found = self._owners[current]
                break
            chain.append(current)
        for seen in chain:
            self._owners[seen] = found
        return found


def _is_unavailable(value: Any) -> bool:
    return isinstance(value, dict) and "unavailable" in value


_MIG_FIELDS = ("uuid", "index", "name", "profile", "gpu_instance_id", "compute_instance_id", "memory_total_mib",
               "memory_used_mib", "memory_free_mib", "memory_reserved_mib", "utilization_gpu_pct", "temperature_c",
               *MEMORY_BYTES)

# Whose processes are this user's: "user", every process of the server's OS user; "server", this server's kernels
# and their children only (under JupyterHub every user's server may run as one OS user).
OWN_PROCESSES = ("user", "server")


HOST_PIDS = {"comparable": True, "view": "host", "note": ""}


def gpu_document(
    nvml_snapshot: dict[str, Any],
    kernels: Iterable[dict[str, Any]],
    *,
    user: str | None,
    show_other_users: bool = True,
    own_processes: str = "user",
    parent_of: Callable[[int], int | None] = parent_pid,
    now: float | None = None,
    reports: dict[str, dict[str, Any]] | None = None,
    busy_threshold: float = idle.DEFAULT_THRESHOLD_PCT,
    culler: dict[str, Any] | None = None,
    dead_kernels: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The response of ``GET tfgpu/api/gpus``.

    ``nvml_snapshot`` is ``nvml.snapshot().to_dict()``; ``kernels`` is one dict per kernel of the server:
    ``{"id", "name", "pid" (or None), "execution_state", "last_activity" (Unix time or None), "sessions":
    [{"path", "name", "type"}]}``; the document's ``kernels`` adds ``idle_s``, and each process that is a kernel
    or runs under one has ``kernel: {"id", "relation": "kernel" | "child"}``; ``type`` is nvidia-smi's "C", "G" or "C+G"
    (a graphics process belongs to a kernel as a compute one does). ``user`` is the server's user: with
    ``show_other_users`` off, processes that are not this user's (``own_processes``) are counted, not listed.
    ``reports``: kernel id -> its checked report's summary (reports.Report.summary), read where PIDs are not
    comparable; a kernel's ``report`` in the document is that, or None. A kernel dict may carry ``running`` (a cell
    runs) and ``idle_since`` (Unix time, server/activity.py): its ``activity`` (core/idle.py) then says whether it
    is idle, by ``busy_threshold`` % of SM utilization. ``culler``: the culler's warnings and shutdowns, as is.
    ``dead_kernels``: the kernels that died holding GPU memory, newest first (server/deaths.py), as is."""
    now = time.time() if now is None else now
    reports = reports or {}
    kernels = [_with_idle(k, now, reports.get(k.get("id"))) for k in kernels]
    kernel_by_pid = {k["pid"]: k for k in kernels if isinstance(k.get("pid"), int)}
    pids = nvml_snapshot.get("pids") or HOST_PIDS
    by_host_pid = {}
    if not pids.get("comparable", True):
        for k in kernels:
            report = k["report"]
            if report is not None and isinstance(report.get("host_pid"), int):
                by_host_pid[report["host_pid"]] = (k, "handshake" if report.get("how") == "handshake" else "host_view")
    whose = _Whose(Ancestry(kernel_by_pid, parent_of), user, own_processes, show_other_users, pids, by_host_pid)
    gpus = []
    for gpu in nvml_snapshot.get("gpus", ()):
        out = {name: gpu.get(name) for name in _GPU_FIELDS}
        out["mig_mode"] = gpu.get("mig_mode")
        out["mig_devices"] = []
        migs = gpu.get("mig_devices") or ()
        for mig in migs:
            row = {name: mig.get(name) for name in _MIG_FIELDS}
            row["processes"], row["hidden_processes"], row["kernel_note"], row["unattributed"] = whose.processes(
                mig.get("processes"), (gpu.get("index"), None))
            out["mig_devices"].append(row)
        # In MIG mode the GPU's list is its devices' again: the idle test reads each device once.
        out["processes"], out["hidden_processes"], out["kernel_note"], out["unattributed"] = whose.processes(
            gpu.get("processes"), None if migs else (gpu.get("index"), gpu.get("utilization_gpu_pct")))
        gpus.append(out)
    work = idle.gpu_work(whose.devices, busy_threshold)
    for kernel in kernels:
        clocked = "idle_since" in kernel  # the server's execution clock (server/activity.py) knows this kernel
        since = kernel.pop("idle_since", None)
        running = bool(kernel.pop("running", False))
        idle_s = max(0.0, now - since) if isinstance(since, (int, float)) else None
        kernel["activity"] = idle.describe(running=running, idle_s=idle_s, work=work.get(kernel.get("id")))
        if clocked:  # one definition of idle: the kernel's idle_s (and the metric) is the activity's
            kernel["idle_s"] = kernel["activity"]["idle_s"]
    no_pid = [k for k in kernels if not isinstance(k.get("pid"), int)]
    kernel_note = ""
    if no_pid:
        count = len(no_pid)
        kernel_note = said(lambda: ngettext(
            "{count} kernel has no known PID (started elsewhere than this server's local provisioner, or still "
            "starting): its GPU memory cannot be matched",
            "{count} kernels have no known PID (started elsewhere than this server's local provisioner, or still "
            "starting): their GPU memory cannot be matched", count).format(count=count))
    return {
        "schema": SCHEMA,
        "taken_at": nvml_snapshot.get("taken_at"),
        "nvml": {key: nvml_snapshot.get(key) for key in ("available", "error", "driver_version",
                                                         "cuda_driver_version")},
        "gpus": gpus,
        "kernels": kernels,
        "kernel_note": kernel_note,
        # Every kernel idle by core/idle.py's rule (none running a cell or computing): the sidebar polls slowly.
        "all_idle": all(k["activity"]["state"] == "idle" for k in kernels),
        "culler": culler,
        "dead_kernels": list(dead_kernels or ()),
        "pids": {key: pids.get(key) for key in HOST_PIDS},
        "other_users": "shown" if show_other_users else "hidden",
        "own_processes": own_processes,
        "server_user": user,
        "stale": None,  # {"age_s", "reason"} when the driver has not answered in time (handlers.GpuFeed)
        "words": words.to_dict(),  # the sidebar's names for states and missing values
        "setting_words": wire_words(),  # the settings a notebook can save, for the sidebar's editor and checks
    }


def checked_reports(reader: Any, reading: dict[str, Any], kernels: list[dict[str, Any]]
                    ) -> dict[str, dict[str, Any]] | None:
    """The reports (``reader``: reports.ReportReader) of these kernels, each checked against the kernel's PID, for
    ``gpu_document``, where NVML's PIDs are not this server's numbers and no host /proc maps them (a container with
    no host view); on the host, or through a host /proc, none are read: a PID says it all there."""
    pids = reading.get("pids")
    if not pids or pids.get("view") != "none":
        return None
    found = reader.reports()
    return {k["id"]: found[k["id"]].summary() for k in kernels
            if k["id"] in found and reader.check(k["id"], found[k["id"]], k.get("pid"))}


def _with_idle(kernel: dict[str, Any], now: float, report: dict[str, Any] | None = None) -> dict[str, Any]:
    """The kernel with ``idle_s``: seconds since its last activity while idle; None while busy or unknown; and its
    ``report``'s summary, or None."""
    out = dict(kernel)
    out["report"] = report
    last = out.setdefault("last_activity", None)
    idle = out.get("execution_state") == "idle" and isinstance(last, (int, float))
    out["idle_s"] = round(max(0.0, now - last), 1) if idle else None
    return out


class _Whose:
    """Sorts one reading's processes into this server's kernels, the user's other processes, and others'."""

    def __init__(self, ancestry: Ancestry, user: str | None, own_processes: str, show_other_users: bool,
                 pids: dict[str, Any] = HOST_PIDS, by_host_pid: dict[int, tuple[dict, str]] | None = None):
        self.ancestry = ancestry
        self.user = user
        self.by_user = own_processes != "server"
        self.show_other_users = show_other_users
        self.comparable = pids.get("comparable", True)
        self.view = pids.get("view") or "none"
        self.by_host_pid = by_host_pid or {}
        self._views: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.devices: list[idle.Device] = []  # every device's processes, hidden ones too, for the idle test

    def _kernel_view(self, kernel: dict[str, Any], relation: str, how: str) -> dict[str, Any]:
        """What a process row says of its kernel: which one, how related (its own process or a child) and how it was
        matched ("pid", "host_view", "handshake"). The rest (name, state, idle time, sessions) is in the
        document's ``kernels``, once per kernel however many rows it has."""
        key = (kernel["id"], relation, how)
        if key not in self._views:
            self._views[key] = {"id": kernel["id"], "relation": relation, "how": how}
        return self._views[key]

    def _owner(self, proc: dict[str, Any], seen: bool) -> tuple[dict, str, str] | None:
        """(kernel, relation, how) for one row, or None. On the host by its PID; in a container by the PID a host
        /proc maps it to, or by a kernel's report; never by NVML's number read as a local one."""
        pid = proc.get("pid")
        if self.comparable:
            found = self.ancestry.owner(pid, parents=seen) if isinstance(pid, int) else None
            return (*found, "pid") if found is not None else None
        local = proc.get("local_pid")
        if isinstance(local, int):
            found = self.ancestry.owner(local, parents=True)
            if found is not None:
                return (*found, "host_view")
        if isinstance(pid, int) and pid in self.by_host_pid:
            kernel, how = self.by_host_pid[pid]
            return kernel, "kernel", how
        return None

    def processes(self, processes: Any, device: tuple[Any, Any] | None = None
                  ) -> tuple[Any, dict | None, str, dict | None]:
        """(processes with their kernel, the hidden others' summary or None, a note on what could not be matched,
        the memory nobody can be given here (a container's) or None). ``device``: (GPU index, its utilization) to
        keep this list for the idle test (``devices``)."""
        if _is_unavailable(processes):
            detail = processes.get("detail") or processes.get("unavailable")
            return processes, None, said(lambda: _(
                "NVML gives no process list for this GPU ({detail}): its memory cannot be matched to "
                "notebooks").format(detail=detail)), None
        listed, hidden_count, hidden_mib, hidden_bytes, unseen = [], 0, 0, 0, 0
        lost_count, lost_mib, lost_bytes = 0, 0, 0
        uses = []
        for proc in processes or ():
            pid = proc.get("pid")
            # No name and no user: the PID has no /proc entry here (another PID namespace, or it ended), so it has
            # no parents to read either; it can still be a kernel's own PID.
            seen = proc.get("name") is not None or proc.get("user") is not None
            owner = self._owner(proc, seen)
            used = proc.get("used_mib")
            used_bytes = proc.get("used_bytes")
            sm = proc.get("sm_pct")
            uses.append(idle.Use(owner[0]["id"] if owner else None, pid, bool(owner and owner[1] == "child"),
                                 used if isinstance(used, int) else None, sm if isinstance(sm, int) else None,
                                 placed=owner is not None or self.comparable or placeable(proc)))
            if owner is None and not seen:
                if not self.comparable:  # a host PID nothing here can name: one line, never a row of a wrong name
                    lost_count += 1
                    lost_mib = _added(lost_mib, used)
                    lost_bytes = _added(lost_bytes, used_bytes)
                    continue
                unseen += 1
            mine = owner is not None or (self.by_user and self.user is not None and proc.get("user") == self.user)
            if not mine and not self.show_other_users:
                hidden_count += 1
                hidden_mib = _added(hidden_mib, used)
                hidden_bytes = _added(hidden_bytes, used_bytes)
                continue
            kernel = self._kernel_view(*owner) if owner is not None else None
            listed.append({"pid": pid, "used_mib": used, "used_bytes": used_bytes, "name": proc.get("name"),
                           "user": proc.get("user"), "type": proc.get("type", "C"), "mine": mine, "kernel": kernel})
        hidden = {"count": hidden_count, "used_mib": hidden_mib, "used_bytes": hidden_bytes} if hidden_count else None
        note = ""
        if unseen:
            note = said(lambda: ngettext(
                "{count} process is not visible from this server (another PID namespace, such as a container, or "
                "ended): its memory cannot be matched to a notebook",
                "{count} processes are not visible from this server (another PID namespace, such as a container, "
                "or ended): their memory cannot be matched to a notebook", unseen).format(count=unseen))
        if device is not None:
            util = device[1] if isinstance(device[1], int) and not isinstance(device[1], bool) else None
            self.devices.append(idle.Device(device[0], util, tuple(uses)))
        lost = None
        if lost_count:
            lost = {"count": lost_count, "used_mib": lost_mib, "used_bytes": lost_bytes,
                    "text": said(lambda: words.unattributed_line(lost_count, lost_mib, _("this server"), self.view))}
        return listed, hidden, note, lost


def _added(total: int | None, value: Any) -> int | None:
    """A sum of memory figures that is None once one of them is missing (never a partial sum shown as whole)."""
    return None if total is None or not isinstance(value, int) else total + value


def kernel_rows(document: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(GPU, process row) for every process row of ``document`` that is one of this server's kernels or a child of
    one; in MIG mode the devices' rows only (the GPU's list is their union again)."""
    for gpu in document.get("gpus") or ():
        for place in [*(gpu.get("mig_devices") or ())] or [gpu]:
            processes = place.get("processes")
            for proc in processes if isinstance(processes, list) else ():
                if proc.get("kernel") is not None:
                    yield gpu, proc


def parse_indices(raw: str) -> tuple[int, ...]:
    """``?index=0,2`` -> (0, 2); ValueError with a one-line reason for anything else."""
    words = [w.strip() for w in raw.split(",")]
    # whole_number: ASCII digits from 0 up only, and no overlong digit string converted (Python refuses past 4,300
    # digits, in its own words).
    indices = [whole_number(w) for w in words]
    if not raw.strip() or None in indices:
        raise ValueError(f"tfgpu: bad index {shown(raw)}: expected physical GPU indices as nvidia-smi numbers them "
                         f"(0 to {MAX_INDEX}), separated by commas, e.g. ?index=0,2")
    return tuple(dict.fromkeys(indices))


def only_indices(document: dict[str, Any], indices: tuple[int, ...]) -> dict[str, Any]:
    """The document with just the GPUs asked for (an index with no GPU is simply absent)."""
    wanted = set(indices)
    return {**document, "gpus": [g for g in document["gpus"] if g.get("index") in wanted]}
