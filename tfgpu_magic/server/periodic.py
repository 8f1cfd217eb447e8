"""One task on the server's event loop that runs a step every so many seconds until stopped: the culler's looks
and the kernels' activity reads. A step that fails is logged and the next one runs: one bad look ends nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class Periodic:
    def __init__(self, interval: float, step: Callable[[], Awaitable[Any]], log: Any, what: str, *,
                 first_now: bool = False):
        self.interval = interval
        self._step = step
        self._log = log
        self._what = what  # for the log: "the GPU-aware culler failed"
        self._first_now = first_now  # the first step at once, not an interval after the start
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _loop(self) -> None:
        if not self._first_now:
            await asyncio.sleep(self.interval)
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log.exception("tfgpu: %s; trying again in %.0f s", self._what, self.interval)
            await asyncio.sleep(self.interval)
