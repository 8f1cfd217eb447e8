"""The kernel end of the sidebar's channel: a comm target that streams the live model to the frontend.

The sidebar opens a comm named ``tfgpu`` to the kernel of the notebook in front. The first message back is
``{"type": "state", "sections": {...}}`` with every section the sidebar shows; after that each change of the
live model is ``{"type": "changes", "sections": {...}}`` with only the sections that changed. Closing the
comm (the user looks at another notebook, the sidebar is closed) unsubscribes, so a kernel that nobody
looks at samples nothing. The frontend never executes code in the user's kernel to learn this.

A kernel that has not run ``%load_ext tfgpu_magic`` has no such target: ipykernel closes the comm at once,
and the sidebar offers to load the extension.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

TARGET = "tfgpu"
PROTOCOL = 1
SECTIONS = ("kernel", "memory", "cells", "placement", "error")  # the live model's history and GPUs: not here
PLACEMENT_TAIL = 20  # records the sidebar gets: the tail of the log, not the capture's whole buffer


def for_sidebar(sections: dict[str, Any]) -> dict[str, Any]:
    """The sections the sidebar shows, the placement records cut to their tail."""
    out = {name: sections[name] for name in SECTIONS if name in sections}
    placement = out.get("placement")
    if isinstance(placement, dict) and len(placement.get("records") or ()) > PLACEMENT_TAIL:
        out["placement"] = {**placement, "records": placement["records"][-PLACEMENT_TAIL:]}
    return out


def _comm_manager(shell: Any) -> Any:
    kernel = getattr(shell, "kernel", None)
    return getattr(kernel, "comm_manager", None)


class SidebarChannel:
    """The ``tfgpu`` comm target of one kernel; each open comm is one subscriber of the live model."""

    def __init__(self, magics: Any):
        self.magics = magics
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Any, int]] = {}  # comm id -> (comm, live-model token)
        self._manager: Any = None

    @property
    def open_comms(self) -> int:
        return len(self._open)

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
        for comm, token in comms:
            self.magics.live.unsubscribe(token)
            with contextlib.suppress(Exception):  # already closed by the frontend, or the kernel is going away
                comm.close()
        if self._manager is not None:
            self._manager.unregister_target(TARGET, self._opened)
            self._manager = None

    def _opened(self, comm: Any, open_msg: dict) -> None:
        live = self.magics.live
        placement = self.magics.placement
        if placement is not None:
            live.set_placement(placement.live_section())

        def send_changes(changes: dict[str, Any]) -> None:
            sections = for_sidebar(changes)
            if sections:
                comm.send({"type": "changes", "protocol": PROTOCOL, "sections": sections})

        token = live.subscribe(send_changes)
        with self._lock:
            self._open[comm.comm_id] = (comm, token)
        comm.on_close(lambda msg: self._closed(comm.comm_id))
        comm.on_msg(lambda msg: self._message(comm, msg))
        comm.send({"type": "state", "protocol": PROTOCOL, "sections": for_sidebar(live.state())})

    def _closed(self, comm_id: str) -> None:
        with self._lock:
            entry = self._open.pop(comm_id, None)
        if entry is not None:
            self.magics.live.unsubscribe(entry[1])

    def _message(self, comm: Any, msg: dict) -> None:
        """``{"request": "state"}`` asks for every section again (a frontend that lost track)."""
        data = (msg.get("content") or {}).get("data") or {}
        if data.get("request") == "state":
            comm.send({"type": "state", "protocol": PROTOCOL, "sections": for_sidebar(self.magics.live.state())})
        else:
            comm.send({"type": "error", "protocol": PROTOCOL,
                       "message": f"tfgpu: unknown request {str(data.get('request'))[:40]!r}; valid: state"})
