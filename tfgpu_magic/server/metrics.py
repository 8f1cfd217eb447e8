"""The GPU document as Prometheus metrics (``GET {base_url}tfgpu/api/metrics``), per GPU, MIG device and notebook.

Made from the same shared answer the sidebar gets (feed.Answer), never from a reading of its own, through
prometheus_client with a registry of its own per answer (jupyter_server's /metrics serves the process-global
one: these series stay apart from it). Base units, as Prometheus names them: bytes, seconds, ratios 0 to 1. A
figure NVML does not give (NA) is an absent sample, not a 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from ..core.version import __version__

MIB = 1024 * 1024
GPU_LABELS = ("index", "uuid", "name")
MIG_LABELS = ("mig_uuid", "parent_index", "profile")
# Where a process runs: the GPU's physical index, and the MIG device's UUID ("" for a whole GPU).
WHERE_LABELS = ("gpu_index", "mig_uuid")
KERNEL_LABELS = ("kernel_id", "notebook")
# A process's ``type`` label: what nvidia-smi's Type column says ("C", "G", "C+G"), in words a query can read.
PROCESS_TYPE_LABEL = {"C": "compute", "G": "graphics", "C+G": "compute+graphics"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def notebook_of(kernel: dict[str, Any]) -> str:
    """The path a kernel's metrics carry: its notebook's, else its first session's (a console), else ""."""
    sessions = kernel.get("sessions") or []
    for session in sessions:
        if session.get("type") == "notebook" and isinstance(session.get("path"), str):
            return session["path"]
    return next((s["path"] for s in sessions if isinstance(s.get("path"), str)), "")


class _Gauges:
    """The families of one exposition, filled as the document is walked."""

    def __init__(self) -> None:
        self.families: dict[str, GaugeMetricFamily] = {}

    def add(self, name: str, doc: str, labels: tuple[str, ...], values: tuple[str, ...], value: Any,
            scale: float = 1.0) -> None:
        number = _number(value)
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = GaugeMetricFamily(name, doc, labels=list(labels))
        if number is not None:
            family.add_metric(list(values), number * scale)


def _processes(gauges: _Gauges, where: tuple[str, str], processes: Any, hidden: Any, show_other_users: bool,
               held: dict[tuple[str, str, str], float], kernels: dict[str, dict[str, Any]]) -> None:
    others, others_mib = 0, 0.0
    for proc in processes if isinstance(processes, list) else ():
        kernel = proc.get("kernel")
        used = _number(proc.get("used_mib"))
        if kernel is not None:
            key = (*where, kernel["id"])
            held[key] = held.get(key, 0.0) + (used or 0.0)
            kernels.setdefault(kernel["id"], kernel)
            continue
        others += 1
        others_mib += used or 0.0
        if show_other_users:
            gauges.add("tfgpu_process_gpu_memory_used_bytes",
                       "GPU memory of a process that is not one of this server's kernels (as nvidia-smi shows it); "
                       "type: compute, graphics or compute+graphics (nvidia-smi's C, G, C+G)",
                       (*WHERE_LABELS, "pid", "user", "command", "type"),
                       (*where, str(proc.get("pid")), _text(proc.get("user")), _text(proc.get("name")),
                        PROCESS_TYPE_LABEL.get(proc.get("type"), "compute")), used, MIB)
    if isinstance(hidden, dict):
        others += int(hidden.get("count") or 0)
        others_mib += _number(hidden.get("used_mib")) or 0.0
    gauges.add("tfgpu_other_processes", "GPU processes that are not this server's kernels or their children",
               WHERE_LABELS, where, others)
    gauges.add("tfgpu_other_processes_memory_used_bytes", "GPU memory of the processes counted by "
               "tfgpu_other_processes (those NVML gives a figure for)", WHERE_LABELS, where, others_mib, MIB)


def _unattributed(gauges: _Gauges, where: tuple[str, str], unattributed: Any) -> None:
    """A device's processes this server cannot place (its PID namespace is not the driver's): a sample only where
    the document has such an entry; memory absent where NVML gave no figure (never 0). Not in tfgpu_other_processes:
    those are processes this server can name."""
    if not isinstance(unattributed, dict):
        return
    gauges.add("tfgpu_unattributed_gpu_processes", "GPU processes this server cannot attribute to anybody: its PID "
               "namespace differs from the driver's (a container), and no host view names them", WHERE_LABELS, where,
               unattributed.get("count"))
    gauges.add("tfgpu_unattributed_gpu_memory_used_bytes", "GPU memory of the processes counted by "
               "tfgpu_unattributed_gpu_processes (absent where NVML gives no figure)", WHERE_LABELS, where,
               unattributed.get("used_mib"), MIB)


def collect(document: dict[str, Any]) -> list[Metric]:
    """Every family of one GPU document (``gpus.gpu_document``, with ``stale`` as the feed set it)."""
    gauges = _Gauges()
    nvml = document.get("nvml") or {}
    show_other_users = document.get("other_users") != "hidden"
    info = GaugeMetricFamily("tfgpu_info", "The tfgpu_magic server extension and the NVIDIA driver it reads",
                             labels=["version", "driver_version", "cuda_driver_version"])
    info.add_metric([__version__, _text(nvml.get("driver_version")), _text(nvml.get("cuda_driver_version"))], 1)
    gauges.add("tfgpu_nvml_available", "1 when NVML could be read (the NVIDIA driver answered)", (), (),
               1 if nvml.get("available") else 0)
    stale = document.get("stale")
    gauges.add("tfgpu_reading_stale", "1 when the driver has not answered in time and these are the last figures",
               (), (), 1 if stale else 0)
    pids = document.get("pids")
    if isinstance(pids, dict):  # view: host, host_proc or none (one series: the label changes only with a restart)
        gauges.add("tfgpu_pid_namespace_comparable", "1 when NVML's PIDs are this server's (the host's namespace); 0 "
                   "in a container, where view says how GPU processes are placed: host_proc (through a host /proc) "
                   "or none", ("view",), (_text(pids.get("view")),), 1 if pids.get("comparable") else 0)
    held: dict[tuple[str, str, str], float] = {}
    kernels: dict[str, dict[str, Any]] = {k["id"]: k for k in document.get("kernels") or () if "id" in k}
    for gpu in document.get("gpus") or ():
        labels = (str(gpu.get("index")), _text(gpu.get("uuid")), _text(gpu.get("name")))
        gauges.add("tfgpu_gpu_memory_total_bytes", "GPU memory, total", GPU_LABELS, labels,
                   gpu.get("memory_total_mib"), MIB)
        gauges.add("tfgpu_gpu_memory_used_bytes", "GPU memory, used (every process, and the driver's share)",
                   GPU_LABELS, labels, gpu.get("memory_used_mib"), MIB)
        util = _number(gpu.get("utilization_gpu_pct"))
        gauges.add("tfgpu_gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU",
                   GPU_LABELS, labels, None if util is None else util / 100)
        gauges.add("tfgpu_gpu_temperature_celsius", "GPU temperature", GPU_LABELS, labels, gpu.get("temperature_c"))
        gauges.add("tfgpu_gpu_power_watts", "GPU power draw", GPU_LABELS, labels, gpu.get("power_w"))
        migs = gpu.get("mig_devices") or []
        for mig in migs:
            mig_labels = (_text(mig.get("uuid")), str(gpu.get("index")), _text(mig.get("profile")))
            gauges.add("tfgpu_mig_memory_total_bytes", "MIG device memory, total", MIG_LABELS, mig_labels,
                       mig.get("memory_total_mib"), MIB)
            gauges.add("tfgpu_mig_memory_used_bytes", "MIG device memory, used", MIG_LABELS, mig_labels,
                       mig.get("memory_used_mib"), MIB)
            where = (str(gpu.get("index")), _text(mig.get("uuid")))
            _processes(gauges, where, mig.get("processes"), mig.get("hidden_processes"), show_other_users, held,
                       kernels)
            _unattributed(gauges, where, mig.get("unattributed"))
        if not migs:  # in MIG mode the GPU's process list is its devices' lists again: counted once, above
            where = (str(gpu.get("index")), "")
            _processes(gauges, where, gpu.get("processes"), gpu.get("hidden_processes"), show_other_users, held,
                       kernels)
            _unattributed(gauges, where, gpu.get("unattributed"))
    for (gpu_index, mig_uuid, kernel_id), mib in held.items():
        gauges.add("tfgpu_kernel_gpu_memory_used_bytes", "GPU memory a kernel of this server holds (with its child "
                   "processes), labelled with its notebook", (*WHERE_LABELS, *KERNEL_LABELS),
                   (gpu_index, mig_uuid, kernel_id, notebook_of(kernels.get(kernel_id, {}))), mib, MIB)
    for kernel_id in sorted({key[2] for key in held}):
        kernel = kernels.get(kernel_id, {})
        idle = kernel.get("idle_s")
        state = (kernel.get("activity") or {}).get("state")
        busy = state in ("running", "gpu_busy") if state else bool(kernel.get("execution_state"))
        gauges.add("tfgpu_kernel_idle_seconds", "Seconds a kernel holding GPU memory has been idle: no cell run and "
                   "no GPU work (0 while busy)", KERNEL_LABELS, (kernel_id, notebook_of(kernel)),
                   idle if idle is not None else (0 if busy else None))
    return [info, *gauges.families.values()]


class _Collector:
    def __init__(self, document: dict[str, Any]):
        self.document = document

    def collect(self) -> Iterator[Metric]:
        yield from collect(self.document)


def exposition(document: dict[str, Any], accept: str) -> tuple[bytes, str]:
    """(body, content type) for a scraper's ``Accept`` header: OpenMetrics when asked, else text 0.0.4."""
    encoder, content_type = choose_encoder(accept)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(document))
    return encoder(registry), content_type


def renderer(accept: str) -> tuple[Callable[[dict[str, Any]], bytes], str]:
    """(document -> body, content type): what an answer memoizes per content type."""
    content_type = choose_encoder(accept)[1]
    return (lambda document: exposition(document, accept)[0]), content_type
