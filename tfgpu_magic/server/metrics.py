"""The GPU document as Prometheus metrics (``GET {base_url}tfgpu/api/metrics``), per GPU, MIG device and notebook.

Made from the same shared answer the sidebar gets (feed.Answer), never from a reading of its own, through
prometheus_client with a registry of its own per answer (jupyter_server's /metrics serves the process-global
one: these series stay apart from it). Base units, as Prometheus names them: bytes (NVML's own figures, exact),
seconds, ratios 0 to 1. A figure NVML does not give (NA) is an absent sample, not a 0.

Labels are DCGM's exporter's where they name the same thing (``gpu``, ``UUID``, ``GPU_I_ID``, ``GPU_I_PROFILE``,
``modelName``, ``Hostname``), so a query joins tfgpu's per-notebook series with the DCGM series a cluster already
has on ``UUID`` alone. Under JupyterHub every series also says whose server it is (``user``, ``server_name``). How
finely kernels are told apart is the ``Scope``'s ``detail``: per process, per kernel, or per notebook (no kernel id
or pid: a restart makes no new series).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from ..core.version import __version__

# How finely the kernel series tell kernels apart: "process" (kernel, notebook and pid), "kernel" (kernel id and
# notebook), "notebook" (the notebook's path only: series count stays flat across kernel restarts).
DETAILS = ("process", "kernel", "notebook")
GPU_LABELS = ("gpu", "UUID", "modelName")
MIG_LABELS = ("gpu", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "mig_uuid", "modelName")
# Where a process runs: the GPU's index and UUID, and on a MIG device its GPU instance and UUID ("" on a whole GPU:
# Prometheus drops an empty label, so these series look like DCGM's whole-GPU ones).
WHERE_LABELS = ("gpu", "UUID", "GPU_I_ID", "mig_uuid")
KERNEL_LABELS = {"process": ("notebook", "kernel_id", "pid"), "kernel": ("notebook", "kernel_id"),
                 "notebook": ("notebook",)}
# A process's ``type`` label: what nvidia-smi's Type column says ("C", "G", "C+G"), in words a query can read.
PROCESS_TYPE_LABEL = {"C": "compute", "G": "graphics", "C+G": "compute+graphics"}
USED_HELP = ("GPU memory in use, in bytes, as NVML counts it: every process's allocations and the driver's own; not "
             "the memory the driver reserves at boot (tfgpu_gpu_memory_reserved_bytes), so used + free + reserved = "
             "total")


@dataclass(frozen=True)
class Scope:
    """What every series of one server says of where it comes from, and how finely kernels are told apart."""

    hostname: str
    user: str | None = None  # JupyterHub's user whose server this is; None outside a Hub
    server_name: str = ""  # the Hub's name for it ("" for the default server)
    detail: str = "kernel"  # one of DETAILS

    @classmethod
    def of_environment(cls, detail: str = "auto", hostname: str = "") -> Scope:
        """From the environment a JupyterHub gives a single-user server: ``JUPYTERHUB_USER`` and
        ``JUPYTERHUB_SERVER_NAME``. ``detail`` "auto": per notebook under a Hub, per kernel otherwise. ``hostname``
        "": ``$NODE_NAME`` (Kubernetes' node, as DCGM's exporter names it when given it), else this machine's."""
        user = os.environ.get("JUPYTERHUB_USER") or None
        if detail == "auto":
            detail = "notebook" if user else "kernel"
        return cls(hostname or os.environ.get("NODE_NAME") or socket.gethostname(), user,
                   os.environ.get("JUPYTERHUB_SERVER_NAME", "") if user else "", detail)

    def names(self) -> tuple[str, ...]:
        return ("Hostname", "user", "server_name") if self.user is not None else ("Hostname",)

    def values(self) -> tuple[str, ...]:
        return (self.hostname, self.user, self.server_name) if self.user is not None else (self.hostname,)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _label(value: Any) -> str:
    """A number or text as a label value; "" for a missing one (Prometheus reads "" as no label)."""
    if isinstance(value, bool) or value is None:
        return ""
    return str(value) if isinstance(value, (int, str)) else ""


def notebook_of(kernel: dict[str, Any]) -> str:
    """The path a kernel's metrics carry: its notebook's, else its first session's (a console), else ""."""
    sessions = kernel.get("sessions") or []
    for session in sessions:
        if session.get("type") == "notebook" and isinstance(session.get("path"), str):
            return session["path"]
    return next((s["path"] for s in sessions if isinstance(s.get("path"), str)), "")


class _Gauges:
    """The families of one exposition, filled as the document is walked; every sample gets the scope's labels."""

    def __init__(self, scope: Scope) -> None:
        self.families: dict[str, GaugeMetricFamily] = {}
        self.scope_names = scope.names()
        self.scope_values = scope.values()

    def add(self, name: str, doc: str, labels: tuple[str, ...], values: tuple[str, ...], value: Any) -> None:
        number = _number(value)
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = GaugeMetricFamily(name, doc, labels=[*self.scope_names, *labels])
        if number is not None:
            family.add_metric([*self.scope_values, *values], number)


class _Walk:
    """One document's process lists, sorted into this server's kernels (by the scope's detail) and the rest."""

    def __init__(self, gauges: _Gauges, scope: Scope, document: dict[str, Any]):
        self.gauges = gauges
        self.detail = scope.detail
        self.show_other_users = document.get("other_users") != "hidden" and scope.detail != "notebook"
        self.kernels: dict[str, dict[str, Any]] = {k["id"]: k for k in document.get("kernels") or () if "id" in k}
        self.held: dict[tuple[str, ...], float | None] = {}  # where + kernel labels -> bytes (None: NVML gave none)
        self.holders: set[str] = set()  # ids of kernels that hold memory

    def kernel_labels(self, kernel_id: str, pid: Any = None) -> tuple[str, ...]:
        notebook = notebook_of(self.kernels.get(kernel_id, {}))
        if self.detail == "notebook":
            return (notebook,)
        if self.detail == "kernel":
            return (notebook, kernel_id)
        return (notebook, kernel_id, _label(pid))

    def processes(self, where: tuple[str, ...], processes: Any, hidden: Any) -> None:
        gauges = self.gauges
        others, others_bytes = 0, 0.0
        for proc in processes if isinstance(processes, list) else ():
            kernel = proc.get("kernel")
            used = _number(proc.get("used_bytes"))
            if kernel is not None:
                key = (*where, *self.kernel_labels(kernel["id"], proc.get("pid")))
                before = self.held.get(key, 0.0)
                self.held[key] = None if before is None or used is None else before + used
                self.holders.add(kernel["id"])
                continue
            others += 1
            others_bytes += used or 0.0
            if self.show_other_users:
                gauges.add("tfgpu_process_gpu_memory_used_bytes",
                           "GPU memory, in bytes, of a process that is not one of this server's kernels (as "
                           "nvidia-smi shows it); process_user: its OS user; type: compute, graphics or "
                           "compute+graphics (nvidia-smi's C, G, C+G)",
                           (*WHERE_LABELS, "pid", "process_user", "command", "type"),
                           (*where, _label(proc.get("pid")), _text(proc.get("user")), _text(proc.get("name")),
                            PROCESS_TYPE_LABEL.get(proc.get("type"), "compute")), used)
        if isinstance(hidden, dict):
            others += int(hidden.get("count") or 0)
            others_bytes += _number(hidden.get("used_bytes")) or 0.0
        gauges.add("tfgpu_other_processes", "GPU processes on this device that are not this server's kernels or "
                   "their children (other users' kernels included)", WHERE_LABELS, where, others)
        gauges.add("tfgpu_other_processes_memory_used_bytes", "GPU memory, in bytes, of the processes counted by "
                   "tfgpu_other_processes (those NVML gives a figure for)", WHERE_LABELS, where, others_bytes)

    def unattributed(self, where: tuple[str, ...], unattributed: Any) -> None:
        """A device's processes this server cannot place (its PID namespace is not the driver's): a sample only
        where the document has such an entry; memory absent where NVML gave no figure (never 0). Not in
        tfgpu_other_processes: those are processes this server can name."""
        if not isinstance(unattributed, dict):
            return
        self.gauges.add("tfgpu_unattributed_gpu_processes", "GPU processes this server cannot attribute to anybody: "
                        "its PID namespace differs from the driver's (a container), and no host view names them",
                        WHERE_LABELS, where, unattributed.get("count"))
        self.gauges.add("tfgpu_unattributed_gpu_memory_used_bytes", "GPU memory, in bytes, of the processes counted "
                        "by tfgpu_unattributed_gpu_processes (absent where NVML gives no figure)", WHERE_LABELS,
                        where, unattributed.get("used_bytes"))

    def kernel_series(self) -> None:
        labels = KERNEL_LABELS[self.detail]
        for key, used in self.held.items():
            self.gauges.add("tfgpu_kernel_gpu_memory_used_bytes", "GPU memory, in bytes, that this server's kernels "
                            "(with their child processes) hold, by notebook (path from the server's root), and by "
                            "kernel and process as TfgpuServer.metrics_detail says", (*WHERE_LABELS, *labels), key,
                            used)
        idle_labels = KERNEL_LABELS["kernel" if self.detail == "process" else self.detail]  # idle is a kernel's
        idle_by: dict[tuple[str, ...], float | None] = {}
        for kernel_id in sorted(self.holders):
            kernel = self.kernels.get(kernel_id, {})
            idle = _number(kernel.get("idle_s"))
            if idle is None:
                state = (kernel.get("activity") or {}).get("state")
                busy = state in ("running", "gpu_busy") if state else bool(kernel.get("execution_state"))
                idle = 0.0 if busy else None
            key = self.kernel_labels(kernel_id)[:len(idle_labels)]
            if key in idle_by:  # a notebook with several holders is as idle as the least idle of them
                before = idle_by[key]
                idle = before if idle is None else idle if before is None else min(before, idle)
            idle_by[key] = idle
        for key, idle in idle_by.items():
            self.gauges.add("tfgpu_kernel_idle_seconds", "Seconds a kernel holding GPU memory has been idle: no cell "
                            "run and no GPU work (0 while busy); per notebook, its least idle holder", idle_labels,
                            key, idle)


def collect(document: dict[str, Any], scope: Scope | None = None) -> list[Metric]:
    """Every family of one GPU document (``gpus.gpu_document``, with ``stale`` as the feed set it)."""
    scope = scope or Scope.of_environment()
    gauges = _Gauges(scope)
    nvml = document.get("nvml") or {}
    gauges.add("tfgpu_info", "The tfgpu_magic server extension and the NVIDIA driver it reads",
               ("version", "driver_version", "cuda_driver_version"),
               (__version__, _text(nvml.get("driver_version")), _text(nvml.get("cuda_driver_version"))), 1)
    gauges.add("tfgpu_nvml_available", "1 when NVML could be read (the NVIDIA driver answered)", (), (),
               1 if nvml.get("available") else 0)
    gauges.add("tfgpu_reading_stale", "1 when the driver has not answered in time and these are the last figures",
               (), (), 1 if document.get("stale") else 0)
    gauges.add("tfgpu_reading_timestamp_seconds", "When the NVML reading these figures come from was taken (Unix "
               "time): far behind time() means the driver no longer answers", (), (), document.get("taken_at"))
    pids = document.get("pids")
    if isinstance(pids, dict):  # view: host, host_proc or none (one series: the label changes only with a restart)
        gauges.add("tfgpu_pid_namespace_comparable", "1 when NVML's PIDs are this server's (the host's namespace); 0 "
                   "in a container, where view says how GPU processes are placed: host_proc (through a host /proc) "
                   "or none", ("view",), (_text(pids.get("view")),), 1 if pids.get("comparable") else 0)
    walk = _Walk(gauges, scope, document)
    for gpu in document.get("gpus") or ():
        index, uuid, model = _label(gpu.get("index")), _text(gpu.get("uuid")), _text(gpu.get("name"))
        labels = (index, uuid, model)
        gauges.add("tfgpu_gpu_memory_total_bytes", "GPU memory, total, in bytes (NVML's figure)", GPU_LABELS, labels,
                   gpu.get("memory_total_bytes"))
        gauges.add("tfgpu_gpu_memory_used_bytes", USED_HELP, GPU_LABELS, labels, gpu.get("memory_used_bytes"))
        gauges.add("tfgpu_gpu_memory_free_bytes", "GPU memory free for new allocations, in bytes (NVML's figure)",
                   GPU_LABELS, labels, gpu.get("memory_free_bytes"))
        gauges.add("tfgpu_gpu_memory_reserved_bytes", "GPU memory the driver reserves for itself, in bytes (absent "
                   "before driver R510, where used includes it)", GPU_LABELS, labels,
                   gpu.get("memory_reserved_bytes"))
        util = _number(gpu.get("utilization_gpu_pct"))
        gauges.add("tfgpu_gpu_utilization_ratio", "Share of NVML's last sample period in which a kernel ran on the "
                   "GPU, 0 to 1 (DCGM_FI_DEV_GPU_UTIL / 100)", GPU_LABELS, labels,
                   None if util is None else util / 100)
        gauges.add("tfgpu_gpu_temperature_celsius", "GPU temperature", GPU_LABELS, labels, gpu.get("temperature_c"))
        gauges.add("tfgpu_gpu_power_watts", "GPU power draw", GPU_LABELS, labels, gpu.get("power_w"))
        migs = gpu.get("mig_devices") or []
        for mig in migs:
            instance, mig_uuid = _label(mig.get("gpu_instance_id")), _text(mig.get("uuid"))
            mig_labels = (index, uuid, instance, _text(mig.get("profile")), mig_uuid, model)
            gauges.add("tfgpu_mig_memory_total_bytes", "MIG device memory, total, in bytes", MIG_LABELS, mig_labels,
                       mig.get("memory_total_bytes"))
            gauges.add("tfgpu_mig_memory_used_bytes", "MIG device memory in use, in bytes (its processes' and the "
                       "driver's)", MIG_LABELS, mig_labels, mig.get("memory_used_bytes"))
            gauges.add("tfgpu_mig_memory_free_bytes", "MIG device memory free for new allocations, in bytes",
                       MIG_LABELS, mig_labels, mig.get("memory_free_bytes"))
            where = (index, uuid, instance, mig_uuid)
            walk.processes(where, mig.get("processes"), mig.get("hidden_processes"))
            walk.unattributed(where, mig.get("unattributed"))
        if not migs:  # in MIG mode the GPU's process list is its devices' lists again: counted once, above
            where = (index, uuid, "", "")
            walk.processes(where, gpu.get("processes"), gpu.get("hidden_processes"))
            walk.unattributed(where, gpu.get("unattributed"))
    walk.kernel_series()
    return list(gauges.families.values())


class _Collector:
    def __init__(self, document: dict[str, Any], scope: Scope):
        self.document = document
        self.scope = scope

    def collect(self) -> Iterator[Metric]:
        yield from collect(self.document, self.scope)


class LatestCollector:
    """tfgpu's families in another registry (jupyter_server's process-wide one, served at ``/metrics``), from the
    feed's latest shared answer: that registry collects synchronously, on the event loop, so no NVML reading is
    waited for here; ``refresh`` asks for a new answer for the next scrape, and ``tfgpu_reading_timestamp_seconds``
    says how old these figures are."""

    def __init__(self, latest: Callable[[], dict[str, Any] | None], refresh: Callable[[], None], scope: Scope):
        self.latest = latest
        self.refresh = refresh
        self.scope = scope

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: collect() would ask the feed for an answer there

    def collect(self) -> Iterator[Metric]:
        self.refresh()
        document = self.latest()
        if document is not None:
            yield from collect(document, self.scope)


def exposition(document: dict[str, Any], accept: str, scope: Scope | None = None) -> tuple[bytes, str]:
    """(body, content type) for a scraper's ``Accept`` header: OpenMetrics when asked, else text 0.0.4."""
    encoder, content_type = choose_encoder(accept)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(document, scope or Scope.of_environment()))
    return encoder(registry), content_type


def renderer(accept: str, scope: Scope | None = None) -> tuple[Callable[[dict[str, Any]], bytes], str]:
    """(document -> body, content type): what an answer memoizes per content type."""
    content_type = choose_encoder(accept)[1]
    scope = scope or Scope.of_environment()
    return (lambda document: exposition(document, accept, scope)[0]), content_type
