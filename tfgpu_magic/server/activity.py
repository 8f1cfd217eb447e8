"""The server's own clock of each kernel's activity, as core/idle.py defines it, and the activity it publishes.

jupyter_server's ``last_activity`` moves with every message a kernel sends, comm messages included, so an open
panel or sidebar keeps an idle kernel "active" forever; and it does not move while a kernel's child computes on
the GPU in silence. Here a kernel's activity is what its user did and what its GPUs do:

- **cells**: each kernel's IOPub ``status`` messages whose parent is an ``execute_request`` (a cell starting and
  ending). Comm and output traffic are left out.
- **GPU work**: every ``interval`` seconds, the shared answer's kernels that compute on a GPU (measured, not
  counted busy on a guess) move that kernel's ``last_activity`` (so ``MappingKernelManager.cull_idle_timeout``
  spares it too) and the server's ``settings["tfgpu_last_activity"]``, which jupyter_server adds to the server's
  own activity and JupyterHub's single-user extension reports to the Hub.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .periodic import Periodic

SETTING = "tfgpu_last_activity"


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class _Watched:
    __slots__ = ("assumed", "idle_since", "running", "stream")

    def __init__(self, stream: Any, running: bool, idle_since: float):
        self.stream = stream
        self.running = running  # a cell runs
        self.idle_since = idle_since  # when the last cell ended (or watching began)
        self.assumed = running  # running only because jupyter_server said "busy" when watching began


class KernelActivity:
    def __init__(self, kernel_manager: Any, settings: dict[str, Any], answer: Callable[[], Awaitable[Any]],
                 interval: float, log: Any, clock: Callable[[], float] = time.time):
        self._kernels = kernel_manager
        self._settings = settings
        self._answer = answer
        self._log = log
        self._clock = clock
        self._watched: dict[str, _Watched] = {}
        self._gpu_seen: dict[str, float] = {}  # kernel id -> when its GPU work was last measured
        self._kept: dict[str, float] = {}  # kernel id -> when its user chose "Keep running" (the culler's clock)
        self._reads = Periodic(interval, self._read, log, "reading the kernels' GPU activity failed", first_now=True)

    # -- cells ------------------------------------------------------------------------------------------------
    def sync(self, kernel_ids: list[str]) -> None:
        """Watch every kernel listed; forget those gone."""
        for kernel_id in kernel_ids:
            if kernel_id not in self._watched:
                self._watch(kernel_id)
        for kernel_id in set(self._watched) - set(kernel_ids):
            self.forget(kernel_id)

    def _watch(self, kernel_id: str) -> None:
        try:
            kernel = self._kernels.get_kernel(kernel_id)
            stream = kernel.connect_iopub()
        except Exception:  # gone, or not a local kernel: it is simply not watched (never counted idle: see idle_since)
            self._log.debug("tfgpu: cannot watch kernel %s's cells", kernel_id, exc_info=True)
            return
        from jupyter_client.session import Session

        session = Session(config=kernel.session.config, key=kernel.session.key)
        # A kernel busy when watching begins may be running a cell: counted so until it is seen idle.
        watched = _Watched(stream, getattr(kernel, "execution_state", None) == "busy", self._clock())
        self._watched[kernel_id] = watched

        def on_message(parts: list) -> None:
            try:
                _, fed = session.feed_identities(parts)
                message = session.deserialize(fed, content=False)
                if message["header"]["msg_type"] != "status":
                    return
                parent = (message.get("parent_header") or {}).get("msg_type")
                state = session.unpack(message["content"]).get("execution_state")
            except Exception:  # a message we cannot read tells us nothing
                return
            if parent == "execute_request" and state in ("busy", "idle"):
                watched.running = state == "busy"
                watched.assumed = False
                if state == "idle":
                    watched.idle_since = self._clock()
            elif watched.assumed and state == "idle":
                watched.running = watched.assumed = False
                watched.idle_since = self._clock()

        stream.on_recv(on_message)

    def forget(self, kernel_id: str) -> None:
        watched = self._watched.pop(kernel_id, None)
        self._gpu_seen.pop(kernel_id, None)
        self._kept.pop(kernel_id, None)
        if watched is not None:
            with contextlib.suppress(Exception):  # the kernel's sockets may be gone with it
                watched.stream.close()

    def annotate(self, kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each kernel dict with ``running`` and ``idle_since`` (for server/gpus.py's ``activity``); watches new
        ones."""
        self.sync([k["id"] for k in kernels])
        for kernel in kernels:
            kernel["running"], kernel["idle_since"] = self.running(kernel["id"]), self.idle_since(kernel["id"])
        return kernels

    def running(self, kernel_id: str) -> bool:
        watched = self._watched.get(kernel_id)
        return watched is None or watched.running  # not watched: nothing known, so never idle

    def idle_since(self, kernel_id: str) -> float | None:
        """Since when the kernel ran no cell, did no measured GPU work and was not kept; None while a cell runs."""
        watched = self._watched.get(kernel_id)
        if watched is None or watched.running:
            return None
        return max(watched.idle_since, self._gpu_seen.get(kernel_id, 0.0), self._kept.get(kernel_id, 0.0))

    def keep(self, kernel_id: str) -> float:
        """The user keeps the kernel running: its idle time starts again now (for the culler)."""
        now = self._clock()
        self._kept[kernel_id] = now
        return now

    # -- GPU work -----------------------------------------------------------------------------------------------
    def take(self, document: dict[str, Any]) -> list[str]:
        """Publish the measured GPU work of one answer's kernels; returns their ids."""
        if document.get("stale"):
            return []
        busy = [k["id"] for k in document.get("kernels") or ()
                if (k.get("activity") or {}).get("state") == "gpu_busy" and k["activity"].get("measured")]
        if not busy:
            return busy
        now, stamp = self._clock(), _utcnow()
        for kernel_id in busy:
            self._gpu_seen[kernel_id] = now
            try:
                kernel = self._kernels.get_kernel(kernel_id)
            except KeyError:
                continue
            kernel.last_activity = stamp  # what MappingKernelManager's culler reads
        self._settings[SETTING] = stamp
        return busy

    def start(self) -> None:
        self._reads.start()

    def stop(self) -> None:
        self._reads.stop()
        for kernel_id in list(self._watched):
            self.forget(kernel_id)

    async def _read(self) -> None:
        self.take((await self._answer()).document)
