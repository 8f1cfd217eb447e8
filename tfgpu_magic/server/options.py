"""Options of the server extension: ``c.TfgpuServer.<name>`` in jupyter_server_config.py (or on the command line)."""

from __future__ import annotations

import math
import os
from typing import Any

from traitlets import Bool, Enum, Float, TraitError, Unicode, default, validate
from traitlets.config import Config, Configurable

from ..core.pidns import HOST_PROC_ENV
from .gpus import OWN_PROCESSES
from .metrics import DETAILS, Scope

# Each number option's range: (lowest, highest, whether 0 means off). Finite always: inf stopped the sampler
# for good, nan made the culler and the staleness test spin or flip, 1e-6 s sampling spun a core, and 1e300 s of
# history stopped the extension from loading.
RANGES: dict[str, tuple[float, float, bool]] = {
    "snapshot_max_age": (0.0, 60.0, False),
    "stale_after": (0.05, 600.0, False),
    "history_interval": (0.5, 3600.0, True),
    "history_seconds": (10.0, 86400.0, False),
    "cull_idle_gpu_kernels_after": (1.0, 30 * 86400.0, True),
    "cull_interval": (0.5, 3600.0, False),
    "cull_warning": (0.0, 30 * 86400.0, False),  # and at most cull_idle_gpu_kernels_after: load_options
    "activity_interval": (0.5, 600.0, False),
    "gpu_busy_threshold": (0.0, 99.0, False),
}
UNITS = {"gpu_busy_threshold": "percent"}
DEFAULT_WARNING_S = 300.0


def _range_words(name: str) -> str:
    low, high, off = RANGES[name]
    return f"{'0 (off) or ' if off else ''}{low:g} to {high:g} {UNITS.get(name, 'seconds')}"


class TfgpuServer(Configurable):
    show_other_users = Bool(
        True,
        help="List other users' GPU processes (pid, command, user, memory) as nvidia-smi shows them to anyone, in "
        "the sidebar and the metrics. False: only count them, with their total memory.",
    ).tag(config=True)

    own_processes = Enum(
        ("auto", *OWN_PROCESSES),
        "auto",
        help="Which GPU processes are this user's. 'user': every process of the server's OS user. 'server': only "
        "this server's kernels and their children (where every user's server runs as one OS user, as a "
        "JupyterHub's often do). 'auto': 'server' under JupyterHub (JUPYTERHUB_USER is set), else 'user'.",
    ).tag(config=True)

    snapshot_max_age = Float(
        0.5,
        help="Seconds one answer (NVML reading, kernels, sessions) serves every request: many open sidebars and "
        "scrapers cost one reading. 0: every request reads. From 0 to 60.",
    ).tag(config=True)

    stale_after = Float(
        5.0,
        help="Seconds a request waits for an NVML reading (a slow or hung driver) before it is answered at once "
        "with the last figures, marked with their age and the reason. From 0.05 to 600.",
    ).tag(config=True)

    history_interval = Float(
        2.0,
        help="Seconds between the server's own samples of every GPU's memory and utilization, kept for "
        "`tfgpu/api/gpus?history=SECONDS` and the sidebar's charts whether or not a sidebar is open. 0: no sampling; "
        "else from 0.5 to 3600.",
    ).tag(config=True)

    history_seconds = Float(
        3600.0,
        help="Seconds of GPU history the server keeps (a ring: older samples are dropped). From 10 to 86400 (a day).",
    ).tag(config=True)

    cull_idle_gpu_kernels_after = Float(
        0.0,
        help="Shut down kernels that hold GPU memory and have been idle this many seconds (connected or not), "
        "logging each with its notebook and the memory freed. 0: never; else from 1 to 2592000 (30 days). Busy "
        "kernels and kernels holding no GPU memory are never touched; jupyter_server's own "
        "MappingKernelManager.cull_idle_timeout still applies to every kernel.",
    ).tag(config=True)

    cull_interval = Float(
        60.0,
        help="Seconds between two looks of the GPU-aware culler (cull_idle_gpu_kernels_after). From 0.5 to 3600.",
    ).tag(config=True)

    cull_warning = Float(
        DEFAULT_WARNING_S,
        help="Seconds before a shutdown that the GPU-aware culler warns: the notebook's user sees a notification in "
        "JupyterLab with 'Keep running', and the log says it. With no page open the shutdown follows after this "
        "time. From 0 to cull_idle_gpu_kernels_after (default 300, or the timeout when that is shorter).",
    ).tag(config=True)

    activity_interval = Float(
        10.0,
        help="Seconds between two looks at the kernels' GPU work (NVML's per-process utilization over this window). "
        "A kernel whose processes, children included, compute moves its last_activity (jupyter_server's culler "
        "spares it) and the server's (JupyterHub sees it). From 0.5 to 600.",
    ).tag(config=True)

    gpu_busy_threshold = Float(
        5.0,
        help="SM utilization, in percent, above which a process computes: a kernel with such a process is busy, "
        "never culled. Memory held at this or less is idle. From 0 to 99.",
    ).tag(config=True)

    metrics_detail = Enum(
        ("auto", *DETAILS),
        "auto",
        help="How finely tfgpu/api/metrics tells this server's kernels apart. 'process': notebook, kernel id and pid; "
        "'kernel': notebook and kernel id; 'notebook': the notebook's path only, so a kernel restart makes no new "
        "series (what a hub of many servers needs). 'auto': 'notebook' under JupyterHub (JUPYTERHUB_USER is set), "
        "else 'kernel'. In 'notebook' detail other processes are counted per GPU, not listed by pid.",
    ).tag(config=True)

    server_metrics = Bool(
        False,
        help="Also publish tfgpu's series on jupyter_server's own /metrics (where ServerApp.authenticate_prometheus "
        "decides who may read it), for a Kubernetes scrape by pod annotations. They are the latest shared answer "
        "there, at most activity_interval old (tfgpu_reading_timestamp_seconds says when it was read).",
    ).tag(config=True)

    hostname = Unicode(
        help="The Hostname label of every tfgpu series, to join DCGM's exporter's. Default: $NODE_NAME (set it to "
        "the node's name on Kubernetes, as for the DCGM exporter), else this machine's host name.",
    ).tag(config=True)

    host_proc = Unicode(
        help="Where the host's /proc is mounted when this server runs in a container (its own PID namespace, where "
        "NVML's PIDs are the host's): GPU processes are then mapped to local ones through it, children of kernels "
        "included. It shows every host process's command line to this server's users. Default: $TFGPU_HOST_PROC, "
        "else none (kernels are matched by their own reports; other memory is shown as unattributed). Kernels the "
        "server starts inherit it.",
    ).tag(config=True)

    @default("host_proc")
    def _host_proc_default(self) -> str:
        return os.environ.get(HOST_PROC_ENV, "")

    @validate(*RANGES)
    def _in_range(self, proposal: dict[str, Any]) -> float:
        name = proposal["trait"].name
        value = proposal["value"]
        low, high, off = RANGES[name]
        if math.isfinite(value) and (low <= value <= high or (off and value == 0)):
            return value
        raise TraitError(f"tfgpu: TfgpuServer.{name} = {value!r} is out of range: expected {_range_words(name)}")

    def warning_s(self) -> float:
        """The warning time in force: the one set, never longer than the timeout (load_options refuses that)."""
        after = self.cull_idle_gpu_kernels_after
        return min(self.cull_warning, after) if after > 0 else self.cull_warning

    def metrics_scope(self) -> Scope:
        """The labels every series carries and the detail of the kernel series, 'auto' resolved."""
        return Scope.of_environment(self.metrics_detail, self.hostname)

    def own(self) -> str:
        """'user' or 'server', 'auto' resolved."""
        if self.own_processes != "auto":
            return self.own_processes
        return "server" if os.environ.get("JUPYTERHUB_USER") else "user"


def load_options(server_app: Any) -> TfgpuServer:
    """The options as configured, where a value out of its range is logged in one line that names the option and
    the range, and its default used: one typo in jupyter_server_config.py must not leave every tfgpu URL a 404."""
    section = server_app.config.get("TfgpuServer", {}) if server_app.config is not None else {}
    kept = Config()
    for name, value in section.items():
        try:
            TfgpuServer(config=Config({"TfgpuServer": {name: value}}))
        except TraitError as err:  # ours say "tfgpu: TfgpuServer.<name> = ..."; traitlets' own (not a number) not
            line = str(err) if str(err).startswith("tfgpu:") else f"tfgpu: TfgpuServer.{name}: {err}"
            server_app.log.error("%s; using the default, %s", line.rstrip("."),
                                 TfgpuServer.class_traits()[name].default_value)
            continue
        kept.TfgpuServer[name] = value
    options = TfgpuServer(config=kept)
    after = options.cull_idle_gpu_kernels_after
    if "cull_warning" in kept.TfgpuServer and after > 0 and options.cull_warning > after:
        server_app.log.error("tfgpu: TfgpuServer.cull_warning = %r is out of range: expected 0 to %g seconds (at most "
                             "cull_idle_gpu_kernels_after); using %g", options.cull_warning, after,
                             min(DEFAULT_WARNING_S, after))
        options.cull_warning = min(DEFAULT_WARNING_S, after)
    return options
