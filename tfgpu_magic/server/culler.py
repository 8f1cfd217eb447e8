"""The GPU-aware culler: shut down kernels that hold GPU memory and have been idle too long (opt-in).

jupyter_server's own culler (``MappingKernelManager.cull_idle_timeout``) treats every kernel alike; on a shared
GPU server the costly ones are idle kernels holding GPU memory that nobody else can use meanwhile. This one looks
at the shared answer (no NVML reading of its own) every ``interval`` seconds and shuts down, through the kernel
manager (what a user's "Shut down kernel" does), each kernel that holds GPU memory and has been idle for
``after`` seconds by the kernel manager's own figures, read again just before. Busy kernels, kernels holding no
GPU memory and answers marked stale (the driver not answering: old figures) are left alone.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from .metrics import notebook_of


def gpu_holders(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{kernel id: {"kernel": ..., "mib": total GPU memory of it and its children, "gpus": [indices]}}."""
    holders: dict[str, dict[str, Any]] = {}
    kernels = {k.get("id"): k for k in document.get("kernels") or ()}
    for gpu in document.get("gpus") or ():
        places = [*(gpu.get("mig_devices") or ())] or [gpu]  # MIG mode: the devices' lists, not the union again
        for place in places:
            processes = place.get("processes")
            for proc in processes if isinstance(processes, list) else ():
                kernel, used = proc.get("kernel"), proc.get("used_mib")
                if kernel is None or not isinstance(used, int) or used <= 0:
                    continue
                entry = holders.setdefault(kernel["id"], {"kernel": kernels.get(kernel["id"], kernel), "mib": 0,
                                                          "gpus": []})
                entry["mib"] += used
                if gpu.get("index") not in entry["gpus"]:
                    entry["gpus"].append(gpu.get("index"))
    return holders


class IdleGpuCuller:
    def __init__(self, after: float, interval: float, answer: Callable[[], Awaitable[Any]], kernel_manager: Any,
                 log: Any):
        self.after = after
        self.interval = interval
        self._answer = answer
        self._kernels = kernel_manager
        self._log = log
        self._task: asyncio.Task | None = None
        self.culled: list[str] = []  # kernel ids shut down, for the log and the tests

    def start(self) -> None:
        if self.after > 0 and self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.cull_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # one failed look must not end the culler
                self._log.exception("tfgpu: the GPU-aware culler failed; trying again in %.0f s", self.interval)

    def _idle_for(self, kernel_id: str) -> float | None:
        """Seconds idle by the kernel manager's figures now; None when busy, starting or gone."""
        try:
            kernel = self._kernels.get_kernel(kernel_id)
        except KeyError:
            return None
        last = getattr(kernel, "last_activity", None)
        if getattr(kernel, "execution_state", None) != "idle" or last is None:
            return None
        return (datetime.datetime.now(datetime.timezone.utc) - last).total_seconds()

    async def cull_once(self) -> list[str]:
        answer = await self._answer()
        if answer.document.get("stale"):
            return []
        done = []
        for kernel_id, held in gpu_holders(answer.document).items():
            idle = self._idle_for(kernel_id)
            if idle is None or idle < self.after:
                continue
            notebook = notebook_of(held["kernel"]) or "(no notebook)"
            gpus = ", ".join(f"GPU {i}" for i in held["gpus"])
            self._log.warning("tfgpu: shutting down kernel %s (%s): idle %.0f s, holding %s MiB on %s "
                              "(TfgpuServer.cull_idle_gpu_kernels_after = %.0f)", kernel_id, notebook, idle,
                              f"{held['mib']:,}", gpus, self.after)
            try:
                await self._kernels.shutdown_kernel(kernel_id)
            except Exception:
                self._log.exception("tfgpu: could not shut down kernel %s", kernel_id)
                continue
            done.append(kernel_id)
        self.culled += done
        return done
