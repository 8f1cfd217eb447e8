"""The kernel end of the sidebar's channel: a comm target that streams the live model to the frontend.

The sidebar opens a comm named ``tfgpu`` to the kernel of the notebook in front. The first message back is
``{"type": "state", "sections": {...}}`` with every section the sidebar shows; after that each change of the
live model is ``{"type": "changes", "sections": {...}}`` with only the sections that changed. Closing the
comm (the user looks at another notebook) or pausing it (the sidebar is hidden) unsubscribes, so a kernel
that nobody looks at samples nothing. The frontend never executes code in the user's kernel to learn this.
The kernel may ask the frontend to restart it and apply settings (the panel's button): ``{"type": "request",
"action": "restart-and-apply", "settings": {...}}``.

The live model pauses (core/live.py) once the kernel has been idle for ``TfgpuMagics.live_pause_after`` seconds,
or while the page of every open ``tfgpu`` comm is hidden: jupyter_server counts each comm message as the kernel's
activity, so pushes that never stop would keep an idle kernel from ever being culled. Each subscribed comm then
gets one ``{"type": "paused", "protocol": 1, "reason": "idle" | "hidden"}`` and nothing more; on resume (a cell, the
panel's Resume, a ``resume`` or ``state`` request, a page shown again) a whole ``{"type": "state", ...}``, as after
opening. A comm opened while the model is paused gets its state, then the ``paused`` message. The frontend says
where its page is with ``{"request": "page", "visible": true | false}`` (its answer is nothing, or the one-line
error); a comm that has not said counts as visible, and a closed one no longer counts.

The opening's data may carry ``"language"``: the one JupyterLab shows (``"zh-CN"``). From then on the kernel's words
(the state's vocabulary, its refusals, its panel) are in it (core/i18n.py: it wins over ``TfgpuMagics.language`` and
the locale). JupyterLab changes its language only with a reload of the page, which opens the comm again.

A kernel that has not run ``%load_ext tfgpu_magic`` has no such target: ipykernel closes the comm at once,
and the sidebar offers to load the extension.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from ..core import i18n, words
from ..core.inputs import short_repr, shown
from ..core.version import COMM_PROTOCOL as PROTOCOL

TARGET = "tfgpu"
SECTIONS = ("kernel", "memory", "cells", "placement", "error")  # the live model's history and GPUs: not here
PLACEMENT_TAIL = 20  # records the sidebar gets: the tail of the log, not the capture's whole buffer
REQUESTS = ("state", "pause", "resume", "validate", "page")


def for_sidebar(sections: dict[str, Any]) -> dict[str, Any]:
    """The sections the sidebar shows, the placement records cut to their tail."""
    out = {name: sections[name] for name in SECTIONS if name in sections}
    placement = out.get("placement")
    if isinstance(placement, dict) and len(placement.get("records") or ()) > PLACEMENT_TAIL:
        out["placement"] = {**placement, "records": placement["records"][-PLACEMENT_TAIL:]}
    return out


def state_message(sections: dict[str, Any]) -> dict[str, Any]:
    """Every section, the vocabulary (core/words.py) and the settings' registry words (core/settings): the sidebar
    names states with the kernel's words and edits the settings this kernel knows, keeping no list of its own.
    (The registry loads with the first state sent, not at %load_ext.)"""
    from ..core.settings import wire_words

    return {"type": "state", "protocol": PROTOCOL, "sections": for_sidebar(sections), "words": words.to_dict(),
            "setting_words": wire_words()}


def paused_message(paused: dict[str, Any]) -> dict[str, Any]:
    """The one message a paused live model sends a comm: why, and nothing else."""
    return {"type": "paused", "protocol": PROTOCOL, "reason": paused["reason"]}


def _comm_manager(shell: Any) -> Any:
    kernel = getattr(shell, "kernel", None)
    return getattr(kernel, "comm_manager", None)


class SidebarChannel:
    """The ``tfgpu`` comm target of one kernel; each open comm is one subscriber of the live model."""

    def __init__(self, magics: Any):
        self.magics = magics
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Any, int | None]] = {}  # comm id -> (comm, live-model token; None: paused)
        self._hidden_pages: set[str] = set()  # comm ids whose page said it is hidden
        self._manager: Any = None
        self._listening = False  # to the controller's refusals

    def register(self, shell: Any) -> bool:
        """Register the target in the shell's kernel; False in a shell without one (terminal IPython)."""
        manager = _comm_manager(shell)
        if manager is None:
            return False
        manager.register_target(TARGET, self._opened)
        self._manager = manager
        return True

    def unregister(self) -> None:
        """Close every open comm (the sidebar then offers to load the extension again) and drop the target."""
        with self._lock:
            comms = list(self._open.values())
            self._open.clear()
            self._hidden_pages.clear()
        for comm, token in comms:
            if token is not None:
                self.magics.live.unsubscribe(token)
            with contextlib.suppress(Exception):  # already closed by the frontend, or the kernel is going away
                comm.close()
        if self._manager is not None:
            self._manager.unregister_target(TARGET, self._opened)
            self._manager = None
        with self._lock:
            listening, self._listening = self._listening, False
        if listening:
            self.magics.controller.unlisten(self.refused_changed)

    def _opened(self, comm: Any, open_msg: dict) -> None:
        opening = (open_msg.get("content") or {}).get("data") if isinstance(open_msg, dict) else None
        if isinstance(opening, dict) and isinstance(opening.get("language"), str):
            i18n.set_language(opening["language"])  # before the first state: its words are in that language
        with self._lock:
            if not self._listening:  # from the first comm on: no sidebar can be paused before (%load_ext stays cheap)
                self.magics.controller.listen(self.refused_changed)
                self._listening = True
            self._open[comm.comm_id] = (comm, None)
        comm.on_close(lambda msg: self._closed(comm.comm_id))
        comm.on_msg(lambda msg: self._message(comm, msg))
        self._pages_changed()  # a page that has said nothing counts as visible: the others' hidden no longer holds
        self._subscribe(comm)

    def _subscribe(self, comm: Any) -> None:
        """Send every section, then each change, until the frontend pauses or closes the comm."""
        live = self.magics.live
        placement = self.magics.placement
        if placement is not None:
            live.set_placement(placement.live_section())

        def send_changes(changes: dict[str, Any]) -> None:
            if "paused" in changes:  # the model paused (one message), or resumed (the whole state)
                paused = changes["paused"]
                comm.send(paused_message(paused) if paused else state_message(changes))
                return
            sections = for_sidebar(changes)
            if sections:
                comm.send({"type": "changes", "protocol": PROTOCOL, "sections": sections})

        token = live.subscribe(send_changes)
        with self._lock:
            if comm.comm_id in self._open:
                self._open[comm.comm_id] = (comm, token)
        state = live.state()
        comm.send(state_message(state))
        if state.get("paused"):
            comm.send(paused_message(state["paused"]))

    def _unsubscribe(self, comm_id: str) -> None:
        with self._lock:
            comm, token = self._open.get(comm_id, (None, None))
            if comm is not None:
                self._open[comm_id] = (comm, None)
        if token is not None:
            self.magics.live.unsubscribe(token)

    def _closed(self, comm_id: str) -> None:
        self._unsubscribe(comm_id)
        with self._lock:
            self._open.pop(comm_id, None)
            self._hidden_pages.discard(comm_id)
        self._pages_changed()

    def _pages_changed(self) -> None:
        """Every open comm's page hidden (one at least): the live model pauses; one shown again: it resumes."""
        with self._lock:
            hidden = bool(self._open) and self._hidden_pages >= set(self._open)
        self.magics.live.set_hidden(hidden)

    def _message(self, comm: Any, msg: dict) -> None:
        """The frontend's requests: ``state`` (every section again, and the live model resumes), ``pause`` (the
        sidebar is hidden in a visible page: stop sending, and sampling if nobody else looks), ``resume`` (this
        comm, and the live model), ``page`` (the browser page is hidden or visible: see the module's docstring),
        and ``validate`` (saved settings, checked by the magics' own parsers, applying nothing).

        With ipykernel 7 and JupyterLab 4.6 these run on a kernel subshell's thread, beside a running cell
        (``import tensorflow``, a ``%tfgpu`` change, the start-up apply): each answer reads what it needs in one
        consistent read (the live model's and the controller's locks), and none starts, imports or configures
        TensorFlow: ``state`` is what the live model publishes (its sampler only reads device lists, as its
        refresher thread does, once the runtime is up), ``validate`` rehearses on a copy of the controller's
        state."""
        data = (msg.get("content") or {}).get("data")
        data = {} if data is None else data
        if not isinstance(data, dict):  # a list, a string, a number: answered, never a traceback on stderr
            comm.send({"type": "error", "protocol": PROTOCOL,
                       "message": f"tfgpu: a request is an object such as {{\"request\": \"state\"}}, not "
                                  f"{type(data).__name__} {short_repr(data)}; valid requests: {', '.join(REQUESTS)}"})
            return
        request = data.get("request")
        if request == "state":
            with self._lock:
                subscribed = self._open.get(comm.comm_id, (None, None))[1] is not None
            # A resumed model has sent every subscribed view its state already: this one needs no second.
            if not (self.magics.live.resume() and subscribed):
                comm.send(state_message(self.magics.live.state()))
        elif request == "pause":
            self._unsubscribe(comm.comm_id)
        elif request == "resume":
            self._unsubscribe(comm.comm_id)
            self.magics.live.resume()
            self._subscribe(comm)
        elif request == "page":
            visible = data.get("visible")
            if not isinstance(visible, bool):
                comm.send({"type": "error", "protocol": PROTOCOL,
                           "message": f"tfgpu: bad \"visible\" {short_repr(visible)} in a page request: expected true "
                                      "or false, as in {\"request\": \"page\", \"visible\": false}"})
                return
            with self._lock:
                if comm.comm_id in self._open:
                    (self._hidden_pages.discard if visible else self._hidden_pages.add)(comm.comm_id)
            self._pages_changed()
        elif request == "validate":
            from ..core.saved import check, unchecked  # the magics' parsers: loaded when a sidebar first checks

            # The kernel's environment, and the refresher's last NVML reading: a hung driver holds no comm message.
            controller, reading = self.magics.controller, self.magics.live.last_reading()
            errors = check(data.get("settings"), controller, reading)
            # Accepted only because NVML cannot list the GPUs: the sidebar marks them where it saves them.
            taken = {} if "" in errors else unchecked(data.get("settings"), controller, reading)
            comm.send({"type": "validated", "protocol": PROTOCOL, "id": data.get("id"), "ok": not errors,
                       "errors": errors, "unchecked": {k: v for k, v in taken.items() if k not in errors}})
        else:
            comm.send({"type": "error", "protocol": PROTOCOL,
                       "message": f"tfgpu: unknown request {shown(request)}; valid: {', '.join(REQUESTS)}"})

    def refused_changed(self) -> None:
        """The controller's refusals changed (any face): a paused sidebar (hidden, sampling nothing) still gets the
        kernel section, so its "Restart kernel and apply" (the command palette's too) uses what was refused."""
        with self._lock:
            paused = [comm for comm, token in self._open.values() if token is None]
        if not paused:
            return
        live = self.magics.live
        live.refresh()  # whichever listener the controller told first, the section then holds the refusal
        kernel = live.state().get("kernel")
        for comm in paused:
            comm.send({"type": "changes", "protocol": PROTOCOL, "sections": {"kernel": kernel}})

    def ask_restart_and_apply(self, settings: dict[str, Any]) -> int:
        """Ask every frontend on this channel to restart the kernel and apply ``settings`` (the panel's
        button); returns how many were asked (0: no frontend with the extension is listening)."""
        with self._lock:
            comms = [comm for comm, _ in self._open.values()]
        for comm in comms:
            comm.send({"type": "request", "protocol": PROTOCOL, "action": "restart-and-apply", "settings": settings})
        return len(comms)
