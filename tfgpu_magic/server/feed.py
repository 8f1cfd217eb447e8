"""The one answer every GPU request of the server shares: one NVML worker thread, its history, the document.

NVML is read in one daemon thread that is never joined (a call can block for seconds on a GPU falling off the
bus, and a hung driver must not hold the server's exit). The same thread samples every GPU every
``interval_s`` for the history, and builds each answer (matching processes to kernels, the JSON): none of
that runs on the event loop. Requests arriving while an answer is being made, or within ``max_age`` of it,
share it; a sample that is due takes the reading an answer just made instead of reading again, and an answer
takes a sample's reading while it is younger than ``max_age``: many open sidebars and scrapers cost one
NVML reading per interval.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import words
from ..core.settings import wire_words
from ..core.version import GPUS_SCHEMA as SCHEMA
from .gpus import HOST_PIDS
from .history import History


def read_nvml() -> dict[str, Any]:
    from ..core import nvml  # pynvml loads here, in the worker thread, on the first reading

    return nvml.snapshot().to_dict()


@dataclass
class Answer:
    """One answer: the document, its JSON, and (made on the first scrape, then kept) its metrics text."""

    document: dict[str, Any]
    body: bytes
    made_at: float = field(default_factory=time.monotonic)
    _metrics: dict[str, bytes] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def metrics(self, content_type: str, render: Callable[[dict[str, Any]], bytes]) -> bytes:
        """The metrics text in ``content_type``, rendered by the first scraper that asks for it (in a thread)."""
        with self._lock:
            if content_type not in self._metrics:
                self._metrics[content_type] = render(self.document)
            return self._metrics[content_type]


def encode(document: dict[str, Any]) -> bytes:
    """The document's JSON: compact (no spaces), and no circularity check (it is a tree made here)."""
    return json.dumps(document, separators=(",", ":"), check_circular=False).encode()


def failure_document(why: str, other_users: str) -> dict[str, Any]:
    """What the sidebar gets when the extension itself failed: the NA shape, with the reason."""
    return {
        "schema": SCHEMA, "taken_at": time.time(),
        "nvml": {"available": False, "error": {"unavailable": "error", "detail": why},
                 "driver_version": None, "cuda_driver_version": None},
        "gpus": [], "kernels": [], "kernel_note": "", "pids": dict(HOST_PIDS),
        "other_users": other_users, "stale": None,
        "words": words.to_dict(), "setting_words": wire_words(),
    }


_SAMPLE = object()  # the job a sampling tick puts on the queue
METRICS_MAX_AGE = 1.0  # seconds a rendered metrics text serves scrapers (Prometheus scrapes every few seconds)


class NvmlWorker:
    """The one thread that reads NVML for the server, and samples it for the history.

    A daemon, never joined. One job at a time: while a reading is stuck, requests wait for its answer (the
    feed shares one), never start a second one. ``interval_s`` 0: no sampling, NVML is read for requests only.
    Sampling stops while NVML is unavailable (no driver: nothing to keep) and starts again with the first
    reading a request finds available."""

    def __init__(self, read: Callable[[], dict[str, Any]], *, interval_s: float = 0.0, kept_s: float = 3600.0):
        self.read = read  # a seam for tests: what one reading calls
        self.interval_s = interval_s
        self.history = History(interval_s, kept_s)
        self.sampling = interval_s > 0
        self.sampling_note = "" if self.sampling else "sampling is off (TfgpuServer.history_interval is 0)"
        self.readings = 0
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._last: tuple[float, dict[str, Any]] | None = None  # (monotonic when read, the reading)
        self.busy_since: float | None = None  # when the job in progress began, monotonic; None while idle
        self.started_at = -math.inf  # when the last reading began

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tfgpu-nvml", daemon=True)
                self._thread.start()

    def submit(self, job: Callable[[Callable[[float], dict[str, Any]]], Any]) -> concurrent.futures.Future:
        """Run ``job(reading)`` in the worker; ``reading(max_age)`` is a reading no older than ``max_age`` s."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.start()
        self._jobs.put((job, future))
        return future

    def close(self) -> None:
        """Stop once the job in progress ends; nothing waits for it."""
        self._jobs.put(None)

    # -- in the worker thread -------------------------------------------------------------------------------
    def _reading(self, max_age: float) -> dict[str, Any]:
        last = self._last
        if last is not None and time.monotonic() - last[0] <= max_age:
            return last[1]
        self.started_at = time.monotonic()
        self.readings += 1
        reading = self.read()
        self._last = (time.monotonic(), reading)
        self._keep(reading)
        return reading

    def _keep(self, reading: dict[str, Any]) -> None:
        available = bool(reading.get("available"))
        if not available:
            if self.sampling:
                self.sampling = False
                detail = (reading.get("error") or {}).get("detail") if isinstance(reading.get("error"), dict) else ""
                self.sampling_note = f"no history: NVML is unavailable ({detail or 'no reason given'})"
            return
        if not self.sampling and self.interval_s > 0:  # the driver is back: sample again
            self.sampling, self.sampling_note = True, ""
        last_t = self.history.last_t
        now = time.time()
        # At most about one sample per interval, however many requests read meanwhile.
        if self.sampling and (last_t is None or now - last_t >= 0.75 * self.interval_s):
            self.history.add(now, reading)

    def _next_timeout(self) -> float | None:
        if not self.sampling:
            return None
        last_t = self.history.last_t
        return 0.0 if last_t is None else max(0.0, last_t + self.interval_s - time.time())

    def _run(self) -> None:
        while True:
            try:
                item = self._jobs.get(timeout=self._next_timeout())
            except queue.Empty:
                item = _SAMPLE
            if item is None:
                return
            self.busy_since = time.monotonic()
            try:
                if item is _SAMPLE:
                    # A reading younger than half an interval serves as this sample; a failed one is a gap.
                    with contextlib.suppress(Exception):
                        self._reading(0.5 * self.interval_s)
                    continue
                job, future = item
                try:
                    future.set_result(job(self._reading))
                except BaseException as exc:  # the feed answers with the reason
                    future.set_exception(exc)
            finally:
                self.busy_since = None


class GpuFeed:
    """The answer of the GPU endpoints, made at most once per ``max_age`` and shared by every request meanwhile.
    A reading that takes longer than ``stale_after`` is not waited for: the last answer goes out at once, marked
    with its age and the reason, and the reading goes on (never a second one beside it)."""

    def __init__(self, max_age: float, kernels: Callable[[], Awaitable[list[dict[str, Any]]]],
                 build: Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, Any]], *,
                 read: Callable[[], dict[str, Any]] = read_nvml, stale_after: float = 5.0,
                 interval_s: float = 0.0, kept_s: float = 3600.0, other_users: str = "shown"):
        self.max_age = max_age
        self.stale_after = stale_after
        self._kernels = kernels
        self._build = build
        self.other_users = other_users
        self.worker = NvmlWorker(read, interval_s=interval_s, kept_s=kept_s)
        self._pending: asyncio.Future | None = None
        self._last: Answer | None = None
        self._metrics: dict[str, tuple[float, bytes]] = {}  # content type -> (when made, text)
        self._metrics_pending: dict[str, asyncio.Future] = {}
        self._refreshing: asyncio.Future | None = None

    @property
    def readings(self) -> int:
        return self.worker.readings

    def start_sampling(self) -> None:
        if self.worker.interval_s > 0:
            self.worker.start()

    async def answer(self) -> Answer:
        """The shared answer. Raises what making it raised; the next call tries again."""
        if self._last is not None and time.monotonic() - self._last.made_at < self.max_age:
            return self._last
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._make())
            self._pending.add_done_callback(self._done)
        busy = self.worker.busy_since
        waited = 0.0 if busy is None else time.monotonic() - busy
        try:
            # shield: a client that goes away (or times out) must not cancel the answer the others wait for
            return await asyncio.wait_for(asyncio.shield(self._pending), max(0.0, self.stale_after - waited))
        except asyncio.TimeoutError:
            return self._stale()

    async def _make(self) -> Answer:
        kernels = await self._kernels()
        max_age = self.max_age

        def job(reading: Callable[[float], dict[str, Any]]) -> Answer:
            document = self._build(reading(max_age), kernels)
            return Answer(document, encode(document))

        return await asyncio.wrap_future(self.worker.submit(job))

    def _done(self, future: asyncio.Future) -> None:
        self._pending = None
        if not future.cancelled() and future.exception() is None:
            self._last = future.result()

    def _stale(self) -> Answer:
        busy = self.worker.busy_since
        silent = time.monotonic() - (busy if busy is not None else self.worker.started_at)
        reason = f"the driver has not answered for {silent:.0f} s"
        if self._last is None:  # nothing to show yet: the reason alone
            document = failure_document(f"no GPU figures yet: {reason} (NVML is still reading)", self.other_users)
        else:
            document = dict(self._last.document)
        document["stale"] = {"age_s": round(time.monotonic() - self._last.made_at, 1) if self._last else None,
                             "reason": reason}
        return Answer(document, encode(document))

    async def metrics(self, content_type: str, render: Callable[[dict[str, Any]], bytes]) -> bytes:
        """The metrics text of a recent answer: rendered in a thread at most once per ``METRICS_MAX_AGE`` (a scraper
        reads every few seconds; rendering hundreds of processes per request would cost the sidebars their
        answers), shared by every scraper asking meanwhile."""
        cached = self._metrics.get(content_type)
        if cached is not None and time.monotonic() - cached[0] < max(self.max_age, METRICS_MAX_AGE):
            return cached[1]
        pending = self._metrics_pending.get(content_type)
        if pending is None:
            pending = self._metrics_pending[content_type] = asyncio.ensure_future(self._render(content_type, render))
        try:
            return await asyncio.shield(pending)
        finally:
            if pending.done():
                self._metrics_pending.pop(content_type, None)

    async def _render(self, content_type: str, render: Callable[[dict[str, Any]], bytes]) -> bytes:
        answer = await self.answer()
        made = time.monotonic()
        body = await asyncio.to_thread(answer.metrics, content_type, render)
        if not answer.document.get("stale"):  # old figures are served once, not kept
            self._metrics[content_type] = (made, body)
        return body

    def latest(self) -> dict[str, Any] | None:
        """The last answer's document as is (no waiting), or None before the first."""
        return self._last.document if self._last is not None else None

    def refresh(self) -> None:
        """Ask for a new answer in the background (on the event loop's thread), unless one is fresh or coming."""
        if self._pending is None and (self._last is None or time.monotonic() - self._last.made_at >= self.max_age):
            self._refreshing = asyncio.ensure_future(self.answer())
            # A failed reading is the next answer's to report (answer() raises it again there), not this one's.
            self._refreshing.add_done_callback(lambda task: task.cancelled() or task.exception())

    def history(self, seconds: float, since: float | None) -> dict[str, Any]:
        worker = self.worker
        return {"interval_s": worker.interval_s, "kept_s": worker.history.kept_s, "sampling": worker.sampling,
                "note": worker.sampling_note, "gpus": worker.history.window(seconds, time.time(), since)}

    def close(self) -> None:
        self.worker.close()
