"""The GPU-aware culler: warn, then shut down kernels that hold GPU memory and have been idle too long (opt-in).

Idle is core/idle.py's rule on the server's own clock (server/activity.py): no cell run, no GPU work measured on
any of the kernel's processes, children included, and nothing counted busy on a guess. So a silent training run
in a child process is never culled, and an open panel's or sidebar's traffic keeps nothing alive.

Every ``interval`` seconds the culler looks at the shared answer (no NVML reading of its own). A kernel holding
GPU memory and idle for ``after - warning`` seconds is warned: the warning is in the answer (the sidebar shows it
with "Keep running", as a notification naming the notebook, the memory and the time left) and in the log. It is
shut down through the kernel manager (what a user's "Shut down kernel" does) once it has been idle ``after``
seconds and warned at least ``warning`` seconds before, whether or not a page saw the warning. A kernel kept
running is not warned again until it has been idle a whole ``after`` more. Each shutdown is kept (the last
``KEPT_RELEASES``) so the sidebar can say, on this visit or the next, what was shut down, when, why and what it
freed. Answers marked stale (the driver not answering: old figures) are skipped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.idle import duration, size
from .activity import KernelActivity
from .gpus import kernel_rows
from .metrics import notebook_of
from .periodic import Periodic

KEPT_RELEASES = 20
SHOWN_RELEASES = 3


def gpu_holders(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{kernel id: {"kernel": ..., "mib": total GPU memory of it and its children, "gpus": [indices]}}."""
    holders: dict[str, dict[str, Any]] = {}
    kernels = {k.get("id"): k for k in document.get("kernels") or ()}
    for gpu, proc in kernel_rows(document):
        kernel, used = proc["kernel"], proc.get("used_mib")
        if not isinstance(used, int) or used <= 0:
            continue
        entry = holders.setdefault(kernel["id"], {"kernel": kernels.get(kernel["id"], kernel), "mib": 0, "gpus": []})
        entry["mib"] += used
        if gpu.get("index") not in entry["gpus"]:
            entry["gpus"].append(gpu.get("index"))
    return holders


def _where(held: dict[str, Any]) -> str:
    return f"{size(held['mib'])} on {', '.join(f'GPU {i}' for i in held['gpus'])}"


class IdleGpuCuller:
    def __init__(self, after: float, interval: float, answer: Callable[[], Awaitable[Any]], kernel_manager: Any,
                 log: Any, *, warning: float = 0.0, activity: KernelActivity | None = None,
                 clock: Callable[[], float] = time.time):
        self.after = after
        self.warning = warning
        self._answer = answer
        self._kernels = kernel_manager
        self._log = log
        self._activity = activity
        self._clock = clock
        self._looks = Periodic(interval, self.cull_once, log, "the GPU-aware culler failed")
        self._warned: dict[str, dict[str, Any]] = {}  # kernel id -> its warning (the answer's culler.warnings)
        self._released: list[dict[str, Any]] = []  # newest last
        self.culled: list[str] = []  # kernel ids shut down, for the log and the tests

    @property
    def running(self) -> bool:
        return self._looks.running

    def start(self) -> None:
        if self.after > 0:
            self._looks.start()

    def stop(self) -> None:
        self._looks.stop()

    # -- what the answer carries ---------------------------------------------------------------------------------
    def public(self) -> dict[str, Any]:
        """The answer's ``culler``: on or off, its times, the warnings now (with the time left) and the last
        shutdowns. Read from the feed's worker thread: it copies what it reads."""
        now = self._clock()
        warnings = []
        for warned in list(self._warned.values()):
            left = max(0.0, warned["shutdown_at"] - now)
            warnings.append({**warned, "seconds_left": round(left, 1),
                             "text": f"{warned['notebook'] or 'A kernel'} will be shut down in {duration(left)}: "
                                     f"idle {duration(warned['idle_s'] + (now - warned['at']))}, holding "
                                     f"{warned['where']}. Keep it running to stay."})
        return {"on": self.after > 0, "after_s": self.after, "warning_s": self.warning, "warnings": warnings,
                "released": list(reversed(self._released[-SHOWN_RELEASES:]))}

    # -- the look ----------------------------------------------------------------------------------------------
    def _idle_for(self, kernel_id: str, activity: dict[str, Any] | None, now: float) -> float | None:
        """Seconds idle by core/idle.py's rule, read again now; None when busy, running, unknown or gone."""
        if (activity or {}).get("state") != "idle" or self._activity is None:
            return None
        try:
            self._kernels.get_kernel(kernel_id)
        except KeyError:
            return None
        since = self._activity.idle_since(kernel_id)
        return None if since is None else now - since

    def keep(self, kernel_id: str) -> float | None:
        """The user keeps a warned kernel running: the warning goes, and its idle time starts again. Returns when it
        could be warned again (Unix time), or None when it was not warned."""
        if self._warned.pop(kernel_id, None) is None or self._activity is None:
            return None
        kept = self._activity.keep(kernel_id)
        self._log.warning("tfgpu: kernel %s kept running by its user; idle again from now", kernel_id)
        return kept + max(0.0, self.after - self.warning)

    async def cull_once(self) -> list[str]:
        answer = await self._answer()
        document = answer.document
        if document.get("stale"):
            return []
        now = self._clock()
        holders = gpu_holders(document)
        for kernel_id in set(self._warned) - set(holders):
            self._warned.pop(kernel_id)  # freed its memory, or gone
        done = []
        for kernel_id, held in holders.items():
            idle = self._idle_for(kernel_id, held["kernel"].get("activity"), now)
            if idle is None or idle < self.after - self.warning:
                if self._warned.pop(kernel_id, None) is not None:
                    self._log.warning("tfgpu: kernel %s is active again: not shut down", kernel_id)
                continue
            notebook = notebook_of(held["kernel"]) or None
            warned = self._warned.get(kernel_id)
            if warned is None:
                shutdown_at = now + max(self.after - idle, self.warning)
                self._warned[kernel_id] = {"kernel_id": kernel_id, "notebook": notebook, "used_mib": held["mib"],
                                           "gpus": list(held["gpus"]), "where": _where(held), "at": now,
                                           "idle_s": idle, "shutdown_at": shutdown_at}
                self._log.warning("tfgpu: kernel %s (%s) idle %.0f s, holding %s: shutting down in %.0f s unless "
                                  "kept running (TfgpuServer.cull_warning = %.0f)", kernel_id,
                                  notebook or "(no notebook)", idle, _where(held), shutdown_at - now, self.warning)
                continue
            if now < warned["shutdown_at"]:
                continue
            if await self._shut_down(kernel_id, held, notebook, idle, now):
                done.append(kernel_id)
        self.culled += done
        return done

    async def _shut_down(self, kernel_id: str, held: dict[str, Any], notebook: str | None, idle: float,
                         now: float) -> bool:
        self._log.warning("tfgpu: shutting down kernel %s (%s): idle %.0f s, holding %s MiB on %s "
                          "(TfgpuServer.cull_idle_gpu_kernels_after = %.0f)", kernel_id, notebook or "(no notebook)",
                          idle, f"{held['mib']:,}", ", ".join(f"GPU {i}" for i in held["gpus"]), self.after)
        try:
            await self._kernels.shutdown_kernel(kernel_id)
        except Exception:
            self._log.exception("tfgpu: could not shut down kernel %s", kernel_id)
            return False
        self._warned.pop(kernel_id, None)
        if self._activity is not None:
            self._activity.forget(kernel_id)
        clock = time.strftime("%H:%M", time.localtime(now))
        reason = f"idle {duration(idle)} (the limit is {duration(self.after)})"
        self._released.append({
            "kernel_id": kernel_id, "notebook": notebook, "at": now, "reason": reason, "freed_mib": held["mib"],
            "gpus": list(held["gpus"]),
            "text": f"Shut down {notebook or 'a kernel'} at {clock}: {reason}; freed {_where(held)}."})
        del self._released[:-KEPT_RELEASES]
        return True
