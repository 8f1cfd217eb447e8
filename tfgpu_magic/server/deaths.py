"""Kernels that died holding GPU memory: which notebook, when, what they held and the likely cause.

A kernel's process can end without anyone asking: the system's out-of-memory killer (host memory) sends SIGKILL, a
native library crashes it (SIGSEGV, SIGABRT), a cell exits. jupyter_client's restarter notices within
``KernelRestarter.time_to_dead`` seconds and fires its ``"restart"`` callbacks (then restarts the kernel under the
same id, with a new process), or its ``"dead"`` ones when it gives up (jupyter_server then removes the kernel). A
shutdown or restart the user asked for stops the restarter first, so neither fires then.

What a kernel held is read from the shared answers (server/feed.py), never from NVML here: each time an answer is
made the previous one is looked at, and at a death the latest. A kernel's last holding is kept until an answer shows
it holding nothing while its process is still alive (an answer made after the death shows nothing: the driver freed
the memory). Only a kernel that held GPU memory is recorded; the last ``KEPT_DEATHS`` are kept in memory, and the
answer carries them as ``dead_kernels`` (newest first).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from ..core.exits import ending
from ..core.idle import size
from ..core.nvml_calls import MIB
from .gpus import kernel_rows
from .metrics import notebook_of

KEPT_DEATHS = 10
# The restarter gives up after ``restart_limit`` (5) failed restarts in a row, each seen within seconds: a "dead" this
# long after a recorded death is that death's end.
GAVE_UP_WITHIN_S = 300.0


def holdings(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{kernel id: {"pid", "notebook", "bytes", "mib", "gpus", "taken_at"}} for each kernel that holds GPU memory in
    ``document`` (its own process and its children, on every GPU or MIG device)."""
    kernels = {k.get("id"): k for k in document.get("kernels") or ()}
    held: dict[str, dict[str, Any]] = {}
    for gpu, proc in kernel_rows(document):
        kernel = proc["kernel"]
        used_bytes, used_mib = proc.get("used_bytes"), proc.get("used_mib")
        if not isinstance(used_bytes, int):
            used_bytes = used_mib * MIB if isinstance(used_mib, int) else None
        if used_bytes is None or used_bytes <= 0:
            continue
        known = kernels.get(kernel["id"], {})
        entry = held.setdefault(kernel["id"], {"pid": known.get("pid"), "notebook": notebook_of(known) or None,
                                               "bytes": 0, "gpus": [], "taken_at": document.get("taken_at")})
        entry["bytes"] += used_bytes
        if gpu.get("index") not in entry["gpus"]:
            entry["gpus"].append(gpu.get("index"))
    for entry in held.values():
        entry["mib"] = entry["bytes"] // MIB
    return held


class KernelDeaths:
    def __init__(self, kernel_manager: Any, latest: Callable[[], dict[str, Any] | None], log: Any, *,
                 clock: Callable[[], float] = time.time, kept: int = KEPT_DEATHS):
        self._kernels = kernel_manager
        self._latest = latest  # the last answer's document, without waiting (GpuFeed.latest)
        self._log = log
        self._clock = clock
        self._kept = kept
        self._held: dict[str, dict[str, Any]] = {}  # kernel id -> its last holding (holdings()'s entry)
        self._hooked: dict[str, tuple[Any, tuple[Callable[[], None], Callable[[], None]]]] = {}
        self._deaths: list[dict[str, Any]] = []  # newest last; entries are replaced, never changed in place
        self._taken: dict[str, Any] | None = None  # the last document looked at

    # -- what the answer carries ---------------------------------------------------------------------------------
    def public(self) -> list[dict[str, Any]]:
        """The answer's ``dead_kernels``, newest first. Read from the feed's worker thread: copies what it reads."""
        return list(reversed(list(self._deaths)))

    # -- the answers ---------------------------------------------------------------------------------------------
    def look(self, kernels: list[dict[str, Any]]) -> None:
        """An answer is being made for these kernels: take the previous one, and listen to each kernel's restarter."""
        self.take(self._latest())
        self.watch([k["id"] for k in kernels])

    def take(self, document: dict[str, Any] | None) -> None:
        """Note what each kernel holds in ``document``; forget a holding the kernel released while alive, or that of
        a kernel gone (shut down) or running a new process (restarted by its user)."""
        if document is None or document is self._taken or document.get("stale") or not document.get("gpus"):
            return  # nothing new, old figures, or no GPU read: what is known stands
        self._taken = document
        held = holdings(document)
        pids = {k.get("id"): k.get("pid") for k in document.get("kernels") or ()}
        self._held.update(held)
        for kernel_id in [k for k in self._held if k not in held]:
            if kernel_id not in pids or pids[kernel_id] != self._held[kernel_id]["pid"] or self._alive(kernel_id):
                del self._held[kernel_id]

    def _alive(self, kernel_id: str) -> bool:
        """Whether the kernel's process still runs. Not a local process (no Popen to ask): taken as alive, so what
        the answer shows stands."""
        hooked = self._hooked.get(kernel_id)
        manager = hooked[0] if hooked else None
        if manager is None:
            try:
                manager = self._kernels.get_kernel(kernel_id)
            except KeyError:
                return False
        poll = getattr(getattr(getattr(manager, "provisioner", None), "process", None), "poll", None)
        return poll is None or poll() is None

    # -- the restarter -------------------------------------------------------------------------------------------
    def watch(self, kernel_ids: list[str]) -> None:
        """Listen to the restarter of every kernel listed; stop listening to those gone."""
        for kernel_id in kernel_ids:
            if kernel_id in self._hooked:
                continue
            try:
                manager = self._kernels.get_kernel(kernel_id)
            except KeyError:
                continue
            # jupyter_client makes the restarter when the kernel starts, with autorestart on; without one a callback
            # would be dropped in silence, and nothing notices the death (jupyter_server neither): tried again later.
            if getattr(manager, "_restarter", None) is None:
                continue
            callbacks = (functools.partial(self._died, kernel_id, "restart"),
                         functools.partial(self._died, kernel_id, "dead"))
            manager.add_restart_callback(callbacks[0], "restart")
            manager.add_restart_callback(callbacks[1], "dead")
            self._hooked[kernel_id] = (manager, callbacks)
        for kernel_id in set(self._hooked) - set(kernel_ids):
            self._unhook(kernel_id)

    def _unhook(self, kernel_id: str) -> None:
        manager, (on_restart, on_dead) = self._hooked.pop(kernel_id)
        try:
            manager.remove_restart_callback(on_restart, "restart")
            manager.remove_restart_callback(on_dead, "dead")
        except Exception:  # the kernel's manager is gone with it
            self._log.debug("tfgpu: could not stop listening to kernel %s's restarter", kernel_id, exc_info=True)

    def stop(self) -> None:
        for kernel_id in list(self._hooked):
            self._unhook(kernel_id)

    def _died(self, kernel_id: str, event: str) -> None:
        """The restarter found the kernel's process gone: ``"restart"`` (it restarts it now) or ``"dead"`` (it gave
        up). Runs on the event loop, from the restarter's poll, before the restart: the provisioner is the dead one."""
        hooked = self._hooked.get(kernel_id)
        if hooked is None:
            return
        self.take(self._latest())  # an answer made since the last look
        provisioner = getattr(hooked[0], "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        process = getattr(provisioner, "process", None)
        returncode = getattr(process, "returncode", None)
        held = self._held.get(kernel_id)
        if held is None or (held["pid"] is not None and pid is not None and held["pid"] != pid):
            if event == "dead":  # recorded at the first death, restarted since without success: not restarted
                self._not_restarted(kernel_id)
            return
        del self._held[kernel_id]
        end = ending(returncode)
        where = ", ".join(f"GPU {i}" for i in held["gpus"])
        death = {"kernel_id": kernel_id, "notebook": held["notebook"], "pid": pid, "died_at": round(self._clock(), 3),
                 **end.to_dict(), "last_held_bytes": held["bytes"], "last_held_mib": held["mib"],
                 "gpus": list(held["gpus"]), "held_at": held["taken_at"], "restarted": event == "restart"}
        self._deaths = [*self._deaths, death][-self._kept:]
        self._log.warning("tfgpu: kernel %s (%s) died holding %s on %s: %s; %s", kernel_id,
                          held["notebook"] or "(no notebook)", size(held["mib"]), where, end.cause,
                          "jupyter_server restarts it" if event == "restart" else "it is not restarted")

    def _not_restarted(self, kernel_id: str) -> None:
        """The restarter gave up on a kernel whose death was recorded moments ago: it was not restarted after all."""
        recent = self._clock() - GAVE_UP_WITHIN_S
        for i in range(len(self._deaths) - 1, -1, -1):
            if self._deaths[i]["kernel_id"] == kernel_id and self._deaths[i]["died_at"] >= recent:
                deaths = list(self._deaths)
                deaths[i] = {**deaths[i], "restarted": False}
                self._deaths = deaths
                return
