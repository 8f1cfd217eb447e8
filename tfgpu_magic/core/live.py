"""The live model: one sampler per kernel that every live view (the panel, the sidebar's kernel channel)
subscribes to.

It keeps the kernel's state as plain, JSON-able sections (``SECTIONS``); a refresh takes one snapshot (NVML
figures, TensorFlow's state and allocator figures, never starting its runtime), keeps a bounded history of
memory and utilization, and hands each subscriber only the sections that changed: a refresh in which nothing
changed calls nobody. Per-cell memory is recorded by ``cell_started`` / ``cell_finished``, which a face calls
around each cell. One background thread refreshes while anybody is subscribed, and only then; it alone reads
NVML, so a slow or hung driver delays the figures, never a cell, a view opening or closing, or an unload: the
other refreshes use its last reading. At most one refresher exists: one stuck in the driver is taken up again
when a view subscribes, never doubled. The model listens to its controller: a setting refused as too late
(by any face) refreshes the kernel section, which then carries what a restart would apply.

Pausing: jupyter_server counts every comm message as kernel activity (and JupyterHub's proxy the websocket's
traffic as the user's), so views refreshed forever would keep an idle kernel, and the GPU memory it holds, from
ever being culled. Once no cell has run for ``pause_after`` seconds (checked in the refresher's loop: no thread of
its own), or while every page showing a view is hidden (``set_hidden``, from the sidebar's channel), the model
pauses: each subscriber is called once with ``{"paused": {"reason": "idle" | "hidden", "at": T}}``, then with
nothing at all, and the refresher stops unless a watcher needs it. ``resume()`` (a cell starting, a view's Resume,
a page shown again) calls each subscriber with the whole state, ``"paused": None`` among it, as after a subscribe.

Nothing here imports IPython, ipywidgets or TensorFlow; importing this module starts nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from . import saved
from .i18n import _
from .inputs import short_repr

SECTIONS = ("kernel", "gpus", "memory", "history", "cells", "placement", "error")
HISTORY_S = 600.0  # the chart's reach: the last ten minutes
MAX_CELLS = 50
MIN_INTERVAL, MAX_INTERVAL = 0.1, 3600.0
MIB = 1 << 20
FIRST_READING_WAIT_S = 0.5  # a first subscriber waits this long for NVML's first figures, not longer
JOIN_WAIT_S = 0.2  # how long stopping waits for the refresher to end (one stuck in the driver is left to end)
MAX_PAUSE_AFTER = 30 * 86400.0  # longer is "never" in all but name: 0 says that
PAUSE_REASONS = ("idle", "hidden")

Changes = dict[str, Any]


def check_interval(value: Any) -> float:
    """A refresh interval in seconds, or ValueError with a one-line ``tfgpu:`` message."""
    seconds = math.nan
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        with contextlib.suppress(ValueError, OverflowError):
            seconds = float(value)
    if not (MIN_INTERVAL <= seconds <= MAX_INTERVAL):
        raise ValueError("tfgpu: " + _("bad refresh interval {value}: expected seconds, from {low} to {high}").format(
            value=short_repr(value), low=MIN_INTERVAL, high=f"{MAX_INTERVAL:g}"))
    return seconds


def check_pause_after(value: Any) -> float:
    """Seconds of idleness before the live views pause (0: never), or ValueError with a one-line ``tfgpu:``
    message."""
    seconds = math.nan
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        with contextlib.suppress(ValueError, OverflowError):
            seconds = float(value)
    if not (0 <= seconds <= MAX_PAUSE_AFTER):  # nan and inf fail here too
        raise ValueError("tfgpu: " + _("bad idle pause {value}: expected seconds without a cell before the live views "
                                       "pause, from 0 (never pause) to {high} (30 days)").format(
                                           value=short_repr(value), high=f"{MAX_PAUSE_AFTER:.0f}"))
    return seconds


class LiveModel:
    """The kernel's live state. Thread-safe; its owner (the extension, or whoever made it) calls ``stop()``.

    ``take`` is the snapshot function (``snapshot.take`` by default, over ``controller``); a seam for tests."""

    def __init__(self, controller=None, *, interval: float = 1.0, take: Callable[..., Any] | None = None,
                 clock: Callable[[], float] = time.time, pause_after: float = 0.0):
        self._controller = controller
        self._listening = False
        self._take = take
        self._clock = clock
        self._lock = threading.RLock()
        self._subscribers: dict[int, Callable[[Changes], None]] = {}
        # Called with the whole state after every refresher pass, changed or not, and keeping the refresher running
        # without a view (the kernel's report in a container: handshake.py).
        self._watchers: list[Callable[[dict[str, Any]], None]] = []
        self._next_token = 0
        self._state: dict[str, Any] = {"placement": None, "cells": [], "error": None}
        self._interval = check_interval(interval)
        self._history: deque[dict] = deque(maxlen=self._history_len())
        self._cells: deque[dict] = deque(maxlen=MAX_CELLS)
        self._peaks: dict[str, float] = {}  # the highest peak per device since the last reset, over cells
        self._cell: dict | None = None  # figures at the start of the running cell
        self._devices: list[str] | None = None  # logical devices with an allocator of their own, once known
        self._thread: threading.Thread | None = None  # the refresher; it clears this itself when it ends
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reading = None  # the refresher's last NVML snapshot
        self._first_reading = threading.Event()
        self._atexit = False
        # Pausing (see the module's docstring). 0: never; the extension sets its option, a bare model has no cell
        # hooks to tell it when the kernel is busy.
        self._pause_after = check_pause_after(pause_after)
        self._busy = False  # a cell runs
        self._idle_since = clock()  # the last cell's end, or the model's making
        self._hidden = False  # every page showing a view is hidden
        self._paused: str | None = None  # a PAUSE_REASONS while paused
        # Counters a benchmark or a test reads.
        self.samples = 0
        self.notifications = 0
        self.errors = 0

    # -- settings ----------------------------------------------------------------------------------------
    @property
    def interval(self) -> float:
        return self._interval

    @interval.setter
    def interval(self, value: float) -> None:
        seconds = check_interval(value)
        with self._lock:
            self._interval = seconds
            self._history = deque(self._history, maxlen=self._history_len())
        self._wake.set()  # a sleeping refresher takes the new interval now

    @property
    def pause_after(self) -> float:
        return self._pause_after

    @pause_after.setter
    def pause_after(self, value: float) -> None:
        self._pause_after = check_pause_after(value)
        self._wake.set()  # a shorter wait may be over already

    @property
    def paused(self) -> str | None:
        """Why the views get nothing now (a PAUSE_REASONS), or None."""
        return self._paused

    def _history_len(self) -> int:
        return max(10, math.ceil(HISTORY_S / self._interval))

    @property
    def controller(self):
        if self._controller is None:
            from .control import default_controller

            self._controller = default_controller()
        if not self._listening:
            self._controller.listen(self.refused_changed)
            self._listening = True
        return self._controller

    def refused_changed(self) -> None:
        """The controller's refusals changed: refresh, also without subscribers, so the kernel section that a
        paused view is sent (the sidebar's channel) says what a restart would apply."""
        self.refresh()

    # -- subscribers ---------------------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Changes], None]) -> int:
        """Call ``callback(changes)`` with the sections that changed, from the refresher thread or the thread
        that changed them. The first subscriber starts the refresher, waits a moment for its first NVML reading
        and refreshes; while the model is paused it starts nothing (``state()`` then has "paused"). Returns a
        token for ``unsubscribe``."""
        with self._lock:
            token = self._next_token
            self._next_token += 1
            first = not self._subscribers
            self._subscribers[token] = callback
        if first and self._paused is None:
            from . import nvml, snapshot  # noqa: F401  (imported here, not in the refresher: see nvml.load_binding)

            nvml.load_binding()
            self._start()
            self._first_reading.wait(FIRST_READING_WAIT_S)  # a hung driver: the figures come when they come
            self.refresh()
        # Paused: the view builds itself from the state as last published, "paused" in it; nothing is sampled.
        return token

    def unsubscribe(self, token: int) -> None:
        """The last one out stops the refresher: nobody looks, nothing is sampled."""
        with self._lock:
            self._subscribers.pop(token, None)
            last = not self._subscribers and not self._watchers
        if last:
            self._halt()

    def watch(self, watcher: Callable[[dict[str, Any]], None]) -> None:
        """Call ``watcher(state)`` after every refresher pass from now on, and keep the refresher running for it
        (until ``stop``). Unlike ``subscribe`` it does not wait for a reading: it may be called from any thread."""
        from . import nvml, snapshot  # noqa: F401  (imported here, not in the refresher: see nvml.load_binding)

        nvml.load_binding()
        with self._lock:
            self._watchers.append(watcher)
        self._start()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def stop(self) -> None:
        """Drop every subscriber and stop the refresher (the extension unloads, the kernel shuts down)."""
        with self._lock:
            self._subscribers.clear()
            self._watchers.clear()
            self._paused, self._hidden = None, False  # nobody is left to pause; the next views start afresh
            self._state.pop("paused", None)
        self._halt()
        if self._listening:
            self._controller.unlisten(self.refused_changed)
            self._listening = False

    def state(self) -> dict[str, Any]:
        """Every section as it was last published (a view builds itself from this, then takes changes)."""
        if "kernel" not in self._state:
            self.refresh()  # a failure becomes the error section here too
        with self._lock:
            return dict(self._state)

    # -- the refresher ----------------------------------------------------------------------------------------
    def _start(self) -> None:
        with self._lock:
            if not self._watchers and (not self._subscribers or self._paused is not None):
                return
            self._stop.clear()
            if self._thread is not None:  # still there (maybe stuck in the driver): it goes on, no second one
                self._wake.set()
                return
            self._thread = threading.Thread(target=self._run, name="tfgpu-live", daemon=True)
            self._thread.start()
            if not self._atexit:
                atexit.register(self.stop)  # kernel shutdown: stop sampling before the interpreter goes
                self._atexit = True

    def _halt(self) -> None:
        with self._lock:
            thread = self._thread
            self._stop.set()
            self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_WAIT_S)  # a reading stuck in the driver ends on its own, later
        if self._atexit and not self._subscribers and not self._watchers:
            atexit.unregister(self.stop)
            self._atexit = False

    def _run(self) -> None:
        # Everything this thread calls was imported by the thread that subscribed (pynvml included).
        while True:
            if not self._stop.is_set():
                self.pause_if_idle()
                # Paused, only a watcher (or a first reading) is worth sampling for: its refresh tells no view.
                if self._paused is None or self._watchers or self._reading is None:
                    self.refresh(read_nvml=True)
                    self._tell_watchers()
            self._first_reading.set()
            with self._lock:
                if self._paused is not None and not self._watchers:
                    self._stop.set()  # nothing but paused views: stop sampling; resume() starts the refresher again
            if not self._stop.is_set():
                self._wake.wait(self._interval)
            self._wake.clear()
            with self._lock:  # _start reads _thread under the same lock: it either sees us go, or keeps us
                if self._stop.is_set():
                    self._thread = None
                    return

    def _tell_watchers(self) -> None:
        with self._lock:
            watchers = list(self._watchers)
            state = dict(self._state)
        for watcher in watchers:
            try:
                watcher(state)
            except Exception as err:  # a report that cannot be written must not stop the views' figures
                self.errors += 1
                with self._lock:
                    self._state["error"] = _error_section(err, self.errors, self._clock())

    def last_reading(self):
        """The refresher's last NVML snapshot, or None before its first."""
        return self._reading

    def _nvml(self):
        """The NVML snapshot a refresh renders: the refresher's last; before its first, while it runs, "not
        read yet"; with no refresher at all (nobody subscribed), a reading now."""
        if self._reading is not None:
            return self._reading
        if self.running:
            from .nvml import NvmlSnapshot, Unavailable

            return NvmlSnapshot(available=False, error=Unavailable(
                "error", "reading NVML: the driver has not answered the first reading yet"))
        return self.controller.nvml()

    def refresh(self, *, read_nvml: bool = False, whole: bool = False) -> Changes:
        """Sample once and notify subscribers of what changed (``whole``: call them with every section). Never
        raises: a failure becomes the ``error`` section (which the views show) and the next refresh tries again.
        NVML's figures are the refresher's last reading; ``read_nvml`` reads the driver now, in this thread, as
        the refresher does. While paused the state is kept and nobody is called."""
        try:
            if read_nvml:
                self._reading = self.controller.nvml()
            sections = self._sample()
        except Exception as err:
            self.errors += 1
            return self._publish({"error": _error_section(err, self.errors, self._clock())}, whole)
        return self._publish(sections, whole)

    def refresh_failed(self, err: BaseException) -> Changes:
        """A failure outside the refresher (a per-cell hook) shown the same way: in the views, not the cell."""
        self.errors += 1
        return self._publish({"error": _error_section(err, self.errors, self._clock())})

    def _publish(self, sections: dict[str, Any], whole: bool = False) -> Changes:
        with self._lock:
            changes = {k: v for k, v in sections.items() if self._state.get(k, _MISSING) != v}
            self._state.update(changes)
            told = dict(self._state) if whole else changes
            callbacks = list(self._subscribers.values()) if told and self._paused is None else []
        self._tell(callbacks, told)
        return changes

    def _tell(self, callbacks: list[Callable[[Changes], None]], told: Changes) -> None:
        for callback in callbacks:
            try:
                callback(told)
                self.notifications += 1
            except Exception as err:
                self.errors += 1
                with self._lock:
                    self._state["error"] = _error_section(err, self.errors, self._clock())

    # -- pausing ---------------------------------------------------------------------------------------------------
    def pause_if_idle(self) -> str | None:
        """Pause if no cell runs and none has for ``pause_after`` seconds (the refresher asks on each pass).
        Returns why the model is paused now, or None."""
        with self._lock:
            due = (self._pause_after > 0 and self._paused is None and not self._busy and bool(self._subscribers)
                   and self._clock() - self._idle_since >= self._pause_after)
        if due:
            self._pause("idle")
        return self._paused

    def set_hidden(self, hidden: bool) -> None:
        """Every page showing a view is hidden (True), or one is shown again (False: resume, with the whole
        state). Said by the sidebar's channel, which alone knows the pages."""
        with self._lock:
            was, self._hidden = self._hidden, bool(hidden)
        if hidden and not was:
            self._pause("hidden")
        elif was and not hidden:
            self.resume()

    def resume(self) -> bool:
        """Somebody looks again (a view's Resume, the sidebar's request, a page shown again): push again, each
        view first getting the whole state, and count idleness from now. Returns whether the model was paused."""
        with self._lock:
            self._idle_since = self._clock()
            self._hidden = False  # an explicit resume wins until a page says hidden again
        return self._resume()

    def _pause(self, reason: str) -> None:
        with self._lock:
            if self._paused is not None:
                # Already paused: nobody is told again (not a message more), but a page shown again or a cell
                # must know what still holds it.
                self._paused = "hidden" if self._hidden else self._paused
                return
            self._paused = reason
            told = {"paused": {"reason": reason, "at": round(self._clock(), 2)}}
            self._state.update(told)
            callbacks = list(self._subscribers.values())
        self._wake.set()  # the refresher stops now, without a pass more
        self._tell(callbacks, told)

    def _resume(self) -> bool:
        with self._lock:
            if self._paused is None:
                return False
            self._paused = None
            self._state["paused"] = None
        self._start()  # it stopped when only paused views were left
        if self._subscribers:
            # The whole state now, from the last NVML reading (the refresher brings a new one at once): a cell
            # starting never waits on the driver.
            self.refresh(whole=True)
        return True

    # -- one sample ------------------------------------------------------------------------------------------
    def _sample(self) -> dict[str, Any]:
        take = self._take
        if take is None:
            from .snapshot import take
        snap = take(self.controller, peaks=self.peaks(), nvml=self._nvml())
        data = snap.to_dict()
        tensorflow = data["tensorflow"]
        kernel = {
            "pid": data["pid"], "tfgpu_version": data["tfgpu_version"],
            "tensorflow": {k: tensorflow[k] for k in ("state", "version", "note", "physical_devices",
                                                      "logical_devices", "no_gpu")},
            "settings": data["settings"], "notes": data["notes"], "numbering": data["numbering"],
        }
        refused = [r.to_dict() for r in self.controller.refusals()]
        with self._lock:
            placement = ((self._state.get("placement") or {}).get("status") or {}).get("mode")
        kernel["refused"] = refused
        kernel["wanted"] = saved.wanted(data["settings"], refused, placement)
        gpus = {"nvml": data["nvml"], "gpus": data["gpus"], "kernel_gpu_memory": data["kernel_gpu_memory"]}
        memory = {"devices": tensorflow["memory"], "state": tensorflow["state"]}
        self.samples += 1
        return {"kernel": kernel, "gpus": gpus, "memory": memory, "history": self._record(data)}

    def _record(self, data: dict) -> list[dict]:
        """Add a point to the history; the section (a list of points) changes only when a figure did."""
        point = {"gpus": {}, "tf": {}}
        own = {m["physical_index"]: m["used_mib"] for m in data["kernel_gpu_memory"]
               if m.get("source") == "nvml_process"}
        for gpu in data["gpus"]:
            used = gpu.get("memory_used_mib")
            point["gpus"][str(gpu["index"])] = {
                "used": used if isinstance(used, int) else None,
                "total": gpu.get("memory_total_mib") if isinstance(gpu.get("memory_total_mib"), int) else None,
                "kernel": own.get(gpu["index"]),
                "util": gpu.get("utilization_gpu_pct") if isinstance(gpu.get("utilization_gpu_pct"), int) else None,
            }
        for m in data["tensorflow"]["memory"] or ():
            if m["current_mib"] is not None and not m.get("shared_with"):
                point["tf"][m["device"]] = round(m["current_mib"], 1)
        with self._lock:
            last = self._history[-1] if self._history else None
            self._history.append({"t": round(self._clock(), 2), **point})
            if last is not None and {k: last[k] for k in point} == point and "history" in self._state:
                return self._state["history"]  # the same figures: the section stays as published
            return list(self._history)

    # -- placement, from the face that captures it ---------------------------------------------------------------
    def set_placement(self, placement: dict | None) -> Changes:
        """The placement log's state (status, the last cell's summary, recent records) as plain data."""
        return self._publish({"placement": placement})

    # -- per-cell memory ----------------------------------------------------------------------------------------
    def peaks(self) -> dict[str, float]:
        with self._lock:
            return dict(self._peaks)

    def reset_peaks(self) -> None:
        with self._lock:
            self._peaks.clear()

    def cells(self) -> list[dict]:
        with self._lock:
            return list(self._cells)

    def cell_started(self) -> None:
        """Before a cell: once TensorFlow's runtime runs, note each allocator's current figure and reset its
        peak, so the cell's own peak can be read after it. Never starts the runtime."""
        with self._lock:
            self._busy = True
            idle = self._paused == "idle"  # a hidden page stays paused: nobody sees the cell's figures
        if idle:
            self._resume()
        tf = _initialized_tensorflow()
        started = time.perf_counter()
        if tf is None:
            self._cell = {"started": started, "before": None}
            return
        before = {}
        for device in self._allocator_devices(tf):
            try:
                before[device] = tf.config.experimental.get_memory_info(device)["current"]
                tf.config.experimental.reset_memory_stats(device)
            except (ValueError, RuntimeError):
                before[device] = None  # this allocator keeps no figures: the memory section says why
        self._cell = {"started": started, "before": before}

    def cell_finished(self, count: int | None, success: bool = True) -> Changes:
        """After a cell: its duration, and per allocator its change of current memory and its peak. A cell
        that ran before TensorFlow's runtime started is not recorded; the one that started it is, from zero."""
        with self._lock:
            self._busy = False
            self._idle_since = self._clock()
        cell, self._cell = self._cell, None
        tf = _initialized_tensorflow()
        if cell is None or tf is None:
            return {}
        before = cell["before"]
        devices = []
        for device in self._allocator_devices(tf):
            try:
                info = tf.config.experimental.get_memory_info(device)
            except (ValueError, RuntimeError):
                devices.append({"device": device, "current_mib": None, "delta_mib": None, "peak_mib": None})
                continue
            start = 0 if before is None else before.get(device)
            current, peak = info["current"] / MIB, info["peak"] / MIB
            # Three decimals: a few KiB stays "< 0.1" in a view instead of becoming a made-up 0.
            devices.append({"device": device, "current_mib": round(current, 3),
                            "delta_mib": None if start is None else round(current - start / MIB, 3),
                            "peak_mib": round(peak, 3)})
        record = {"cell": count, "duration_s": round(time.perf_counter() - cell["started"], 3),
                  "success": bool(success), "started_runtime": before is None, "devices": devices}
        with self._lock:
            self._cells.append(record)
            for d in devices:
                if d["peak_mib"] is not None:
                    self._peaks[d["device"]] = max(self._peaks.get(d["device"], 0.0), d["peak_mib"])
            cells = list(self._cells)
        return self._publish({"cells": cells})

    def _allocator_devices(self, tf) -> list[str]:
        """Logical GPUs, and CPU:0 for every logical CPU (they share one allocator). Fixed once the runtime
        runs, so listed once."""
        if self._devices is None:
            names = [d.name.split("device:")[-1] for d in tf.config.list_logical_devices()]
            self._devices = [n for n in names if n.startswith("GPU:")] + [n for n in names if n == "CPU:0"]
        return self._devices


_MISSING = object()


def _error_section(err: BaseException, count: int, now: float) -> dict[str, Any]:
    where = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
    at = f" ({where[0].name}, {where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno})" if where else ""
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return {"count": count, "message": (text[:300] + "...") if len(text) > 300 else text, "where": at,
            "at": time.strftime("%H:%M:%S", time.localtime(now))}


def _initialized_tensorflow():
    """The TensorFlow module once its runtime runs, else None: asking for memory figures earlier would start it."""
    if "tensorflow" not in sys.modules:
        return None  # the usual first cells: nothing to load, nothing to ask
    from .runtime import TFState, probe  # loaded already by whoever made the model

    if probe().state < TFState.INITIALIZED:
        return None
    return sys.modules.get("tensorflow")


_default: LiveModel | None = None
_default_lock = threading.Lock()


def default_model(controller=None) -> LiveModel:
    """The process's model: one kernel, one sampler, however many views."""
    global _default
    with _default_lock:
        if _default is None:
            _default = LiveModel(controller)
        return _default


__all__ = ["PAUSE_REASONS", "SECTIONS", "LiveModel", "check_interval", "check_pause_after", "default_model"]
