"""Tornado handlers of the server extension: thin, authenticated, and never a 500 for a GPU fault.

Polling, not a websocket: the sidebar asks every few seconds and only while it is visible, through the
server's own URL (``base_url`` and any proxy in front of it work as for every other Jupyter API call), and
each answer is a complete document, so a lost request costs nothing to recover from. NVML is read in one
worker thread, off the event loop (a call can block for seconds on a GPU that is falling off the bus), and
requests arriving while an answer is being made, or within ``snapshot_max_age`` of it, share it: many open
sidebars cost one NVML reading and one sessions query per interval.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import getpass
import json
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from traitlets import Bool, Float
from traitlets.config import Configurable

from .gpus import SCHEMA, gpu_document, only_indices, parse_indices

API_PATH = ("tfgpu", "api")
AUTH_RESOURCE = "tfgpu"


class TfgpuServer(Configurable):
    """Options of the server extension (``c.TfgpuServer.<name>`` in jupyter_server_config.py)."""

    show_other_users = Bool(
        True,
        help="List other users' GPU processes (pid, command, user, memory) as nvidia-smi shows them to anyone. "
        "False: only count them, with their total memory.",
    ).tag(config=True)

    snapshot_max_age = Float(
        0.5,
        min=0.0,
        help="Seconds one answer (NVML reading, kernels, sessions) serves every request: many open sidebars cost "
        "one reading. 0: every request reads.",
    ).tag(config=True)

    stale_after = Float(
        5.0,
        min=0.05,
        help="Seconds a request waits for an NVML reading (a slow or hung driver) before it is answered at once "
        "with the last figures, marked with their age and the reason.",
    ).tag(config=True)


def _read_nvml() -> dict[str, Any]:
    from ..core import nvml  # pynvml loads here, in the worker thread, on the first request

    return nvml.snapshot().to_dict()


class NvmlWorker:
    """The one thread that reads NVML for the server. A daemon, never joined: a hung driver must not hold the
    server's exit (a ThreadPoolExecutor's threads are joined at interpreter exit). One reading at a time: while
    a call is stuck it is waited on, never duplicated."""

    def __init__(self, read: Callable[[], dict[str, Any]]):
        self.read = read  # a seam for tests: what one reading calls
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[concurrent.futures.Future | None] = queue.SimpleQueue()
        self._current: concurrent.futures.Future | None = None
        self._thread: threading.Thread | None = None
        self.started_at = -math.inf  # when the reading in progress (or the last one) began, monotonic

    def reading(self) -> concurrent.futures.Future:
        """The reading in progress, or a new one."""
        with self._lock:
            if self._current is not None and not self._current.done():
                return self._current
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tfgpu-nvml", daemon=True)
                self._thread.start()
            self._current = concurrent.futures.Future()
            self.started_at = time.monotonic()
            self._jobs.put(self._current)
            return self._current

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job.set_result(self.read())
            except BaseException as exc:  # the feed answers with the reason
                job.set_exception(exc)

    def close(self) -> None:
        """Stop once the reading in progress ends; nothing waits for it."""
        self._jobs.put(None)


class GpuFeed:
    """The answer of the GPU endpoint, made at most once per ``max_age`` and shared by every request meanwhile:
    one NVML reading in its own thread (off the event loop), the kernels and their sessions, the JSON. A
    reading that takes longer than ``stale_after`` is not waited for: the last answer goes out at once, marked
    with its age and the reason, and the reading goes on (never a second one beside it)."""

    def __init__(self, max_age: float, kernels: Callable[[], Awaitable[list[dict[str, Any]]]], *,
                 read: Callable[[], dict[str, Any]] = _read_nvml, show_other_users: bool = True,
                 stale_after: float = 5.0):
        self.max_age = max_age
        self.stale_after = stale_after
        self._kernels = kernels
        self.worker = NvmlWorker(read)
        self.show_other_users = show_other_users
        self._pending: asyncio.Future | None = None
        self._last: tuple[dict[str, Any], bytes] | None = None
        self._last_at = -math.inf
        self.readings = 0

    async def answer(self) -> tuple[dict[str, Any], bytes]:
        """(document, its JSON). Raises what making it raised; the next call tries again."""
        if self._last is not None and time.monotonic() - self._last_at < self.max_age:
            return self._last
        if self._pending is None:
            # The reading starts (or the stuck one is joined) now, so the wait below counts from its start.
            self._pending = asyncio.ensure_future(self._make(self.worker.reading()))
            self._pending.add_done_callback(self._done)
        waited = time.monotonic() - self.worker.started_at
        try:
            # shield: a client that goes away (or times out) must not cancel the answer the others wait for
            return await asyncio.wait_for(asyncio.shield(self._pending), max(0.0, self.stale_after - waited))
        except asyncio.TimeoutError:
            return self._stale()

    async def _make(self, reading: concurrent.futures.Future) -> tuple[dict[str, Any], bytes]:
        self.readings += 1
        snap = await asyncio.wrap_future(reading)
        document = gpu_document(snap, await self._kernels(), user=_server_user(),
                                show_other_users=self.show_other_users)
        return document, json.dumps(document).encode()

    def _done(self, future: asyncio.Future) -> None:
        self._pending = None
        if not future.cancelled() and future.exception() is None:
            self._last, self._last_at = future.result(), time.monotonic()

    def _stale(self) -> tuple[dict[str, Any], bytes]:
        silent = time.monotonic() - self.worker.started_at
        reason = f"the driver has not answered for {silent:.0f} s"
        if self._last is None:  # nothing to show yet: the reason alone
            document = failure_document(f"no GPU figures yet: {reason} (NVML is still reading)",
                                        "shown" if self.show_other_users else "hidden")
        else:
            document = dict(self._last[0])
        document["stale"] = {"age_s": round(time.monotonic() - self._last_at, 1) if self._last else None,
                             "reason": reason}
        return document, json.dumps(document).encode()

    def close(self) -> None:
        self.worker.close()


def _kernel_pid(kernel: Any) -> int | None:
    pid = getattr(getattr(kernel, "provisioner", None), "pid", None)
    if pid is None:  # jupyter_client before provisioners: the Popen is the manager's `kernel`
        pid = getattr(getattr(kernel, "kernel", None), "pid", None)
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


async def kernels_of(server_app: Any, log: Any) -> list[dict[str, Any]]:
    """Every kernel of the server with its PID and the sessions (notebooks, consoles) attached to it."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    try:
        for session in await server_app.session_manager.list_sessions():
            kernel_id = (session.get("kernel") or {}).get("id")
            sessions.setdefault(kernel_id, []).append(
                {"path": session.get("path"), "name": session.get("name"), "type": session.get("type")})
    except Exception:  # the session database is a convenience here: kernels are still listed
        log.warning("tfgpu: could not list sessions; kernels are shown without their notebooks", exc_info=True)
    kernels = []
    manager = server_app.kernel_manager
    for kernel_id in list(manager.list_kernel_ids()):
        try:
            kernel = manager.get_kernel(kernel_id)
        except KeyError:  # shut down between the two calls
            continue
        kernels.append({
            "id": kernel_id,
            "name": getattr(kernel, "kernel_name", None),
            "pid": _kernel_pid(kernel),
            "execution_state": getattr(kernel, "execution_state", None),
            "sessions": sessions.get(kernel_id, []),
        })
    return kernels


def failure_document(why: str, other_users: str) -> dict[str, Any]:
    """What the sidebar gets when the extension itself failed: the NA shape, with the reason."""
    return {
        "schema": SCHEMA, "taken_at": time.time(),
        "nvml": {"available": False, "error": {"unavailable": "error", "detail": why},
                 "driver_version": None, "cuda_driver_version": None},
        "gpus": [], "kernels": [], "kernel_note": "", "other_users": other_users, "stale": None,
    }


class GpusHandler(APIHandler):
    """``GET {base_url}tfgpu/api/gpus[?index=0,2]``: every GPU, its processes matched to this server's kernels."""

    auth_resource = AUTH_RESOURCE
    _track_activity = False  # an open sidebar polling must not keep an idle server from being culled

    def initialize(self, feed: GpuFeed) -> None:
        self.feed = feed

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        try:
            indices = self._indices()
        except ValueError as exc:
            self.set_status(400)
            self.finish(json.dumps({"message": str(exc), "reason": "bad_query"}))
            return
        try:
            document, body = await self.feed.answer()
        except Exception as exc:  # never a 500: the sidebar shows the reason like any other missing value
            self.log.exception("tfgpu: reading the GPUs failed")
            document = failure_document(f"the tfgpu server extension failed: {type(exc).__name__}: {exc}",
                                        "shown" if self.feed.show_other_users else "hidden")
            body = None
        if indices is not None:
            document, body = only_indices(document, indices), None
        self.finish(body if body is not None else json.dumps(document))

    def _indices(self) -> tuple[int, ...] | None:
        """The ``index`` filter, None without one; ValueError with a one-line reason for a malformed one."""
        given = self.get_query_arguments("index")
        if len(given) > 1:
            raise ValueError("tfgpu: index given more than once; give it once, e.g. ?index=0,2")
        return parse_indices(given[0]) if given else None


@functools.cache
def _server_user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry, no USER: compare by nothing, so others count as others
        return None


# Every handler the extension serves: tests check each one refuses an unauthenticated request.
HANDLERS: tuple[tuple[str, type[APIHandler]], ...] = (("gpus", GpusHandler),)


def setup_handlers(server_app: Any) -> GpuFeed:
    options = TfgpuServer(parent=server_app)

    async def kernels() -> list[dict[str, Any]]:
        return await kernels_of(server_app, server_app.log)

    feed = GpuFeed(options.snapshot_max_age, kernels, show_other_users=options.show_other_users,
                   stale_after=options.stale_after)
    base_url = server_app.web_app.settings["base_url"]
    server_app.web_app.add_handlers(".*$", [
        (url_path_join(base_url, *API_PATH, name), handler, {"feed": feed}) for name, handler in HANDLERS
    ])
    server_app.web_app.settings["tfgpu_feed"] = feed
    server_app.log.info("tfgpu: GPU endpoint at %s", url_path_join(base_url, *API_PATH, "gpus"))
    return feed
