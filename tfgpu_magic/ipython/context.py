"""What every ``%tfgpu`` handler and the panel's controls work with: the extension's parts in one named object,
the one way a face applies a setting, and which shell has the extension loaded.

``Extension`` is what ``TfgpuMagics`` is for a handler (its controller, live model, placement capture, sidebar
channel); the panel's ``BareExtension`` stands in where the extension is not loaded.
Refusals need nothing here: the controller records them and tells its listeners, whichever face asked.
Cheap to import (``%load_ext`` does): the core loads with the first setting applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from ..core.i18n import width

if TYPE_CHECKING:
    from ..core.changes import Change
    from ..core.runtime import Outcome


class Extension(Protocol):
    """The loaded extension's parts, as handlers use them."""

    controller: Any  # core.control.Controller
    live: Any  # core.live.LiveModel
    placement: Any  # ipython.placement.PlacementController, or None where capture is unavailable
    sidebar: Any  # ipython.comm.SidebarChannel, or None outside a kernel
    quiet: bool
    shell: Any

    def shown_panel(self) -> Any: ...  # the live panel `%tfgpu panel` shows, made once

    def close_panels(self) -> int: ...  # close every panel, stop the refresher; how many were open


FIRST_LINE = 120  # an answer's first line at most (issue 37; core.plan.FIRST_LINE, not loaded by %load_ext)


def outcome_line(command: str, outcome: Outcome) -> str:
    """"tfgpu: %tfgpu growth on: applied (detail)"; a detail that would make it longer than FIRST_LINE goes on the
    next line."""
    line = f"tfgpu: {command}: {outcome.status.said}"
    if not outcome.detail:
        return line
    if width(line) + width(outcome.detail) + 3 <= FIRST_LINE:  # display columns: a Chinese detail counts double
        return f"{line} ({outcome.detail})"
    return f"{line}\n  {outcome.detail}"


def configure(ext: Extension, change: Change) -> Outcome:
    """Apply one change through the extension's controller and say what became of it (unless quiet). A bad
    value or a refusal is a UsageError with the controller's message; nothing changed then."""
    from ..core.plan import PlanError
    from ..core.runtime import Status

    waits = getattr(change.value, "wait_s", None) is not None and not ext.quiet
    progress = _ProgressLine() if waits else None
    ext.controller.on_progress = progress.show if progress is not None else None
    try:
        outcome = ext.controller.change(change)
    except PlanError as err:  # RefusedError too: the controller has recorded it for the views
        raise UsageError(str(err)) from None
    finally:
        ext.controller.on_progress = None
        if progress is not None:
            progress.done()
    if outcome.status is Status.PENDING:  # say what became of it when TensorFlow is imported
        ext.controller.on_import_report = lambda line: None if ext.quiet else print(line)
    if not ext.quiet:
        print(outcome_line(change.command, outcome))
    return outcome


class _ProgressLine:
    """One output line updated in place while a `--wait` waits (a display handle; a terminal gets a new line
    at most every 10 s instead)."""

    def __init__(self):
        self._handle = None
        self._printed = 0.0

    def show(self, text: str) -> None:
        import time

        from IPython.display import display

        line = _Text(text)
        if self._handle is None:
            self._handle = display(line, display_id=True)
            self._printed = time.monotonic()
        elif _in_kernel():
            self._handle.update(line)
        elif time.monotonic() - self._printed >= 10:
            display(line)
            self._printed = time.monotonic()

    def done(self) -> None:
        self._handle = None


class _Text:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _in_kernel() -> bool:
    import sys

    return "ipykernel" in sys.modules


# id(shell) -> the extension loaded in it (magics.py adds and removes; the panel looks its shell's up here).
LOADED: dict[int, Extension] = {}


def loaded_in(shell: Any) -> Extension | None:
    return LOADED.get(id(shell)) if shell is not None else None


__all__ = ["LOADED", "Extension", "configure", "loaded_in", "outcome_line"]
