"""Options of the server extension: ``c.TfgpuServer.<name>`` in jupyter_server_config.py (or on the command line)."""

from __future__ import annotations

import os

from traitlets import Bool, Enum, Float
from traitlets.config import Configurable

from .gpus import OWN_PROCESSES


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
        min=0.0,
        help="Seconds one answer (NVML reading, kernels, sessions) serves every request: many open sidebars and "
        "scrapers cost one reading. 0: every request reads.",
    ).tag(config=True)

    stale_after = Float(
        5.0,
        min=0.05,
        help="Seconds a request waits for an NVML reading (a slow or hung driver) before it is answered at once "
        "with the last figures, marked with their age and the reason.",
    ).tag(config=True)

    history_interval = Float(
        2.0,
        min=0.0,
        help="Seconds between the server's own samples of every GPU's memory and utilization, kept for "
        "`tfgpu/api/gpus?history=SECONDS` and the sidebar's charts whether or not a sidebar is open. 0: no sampling.",
    ).tag(config=True)

    history_seconds = Float(
        3600.0,
        min=10.0,
        help="Seconds of GPU history the server keeps (a ring: older samples are dropped).",
    ).tag(config=True)

    cull_idle_gpu_kernels_after = Float(
        0.0,
        min=0.0,
        help="Shut down kernels that hold GPU memory and have been idle this many seconds (connected or not), "
        "logging each with its notebook and the memory freed. 0: never. Busy kernels and kernels holding no GPU "
        "memory are never touched; jupyter_server's own MappingKernelManager.cull_idle_timeout still applies to "
        "every kernel.",
    ).tag(config=True)

    cull_interval = Float(
        60.0,
        min=0.1,
        help="Seconds between two looks of the GPU-aware culler (cull_idle_gpu_kernels_after).",
    ).tag(config=True)

    def own(self) -> str:
        """'user' or 'server', 'auto' resolved."""
        if self.own_processes != "auto":
            return self.own_processes
        return "server" if os.environ.get("JUPYTERHUB_USER") else "user"
