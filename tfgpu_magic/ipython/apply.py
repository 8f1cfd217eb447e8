"""A notebook's saved settings applied in its kernel, all at once: what the sidebar runs at every kernel start.

The frontend calls ``apply_json`` through ``user_expressions`` (the Python path is in
labextension/src/constants.ts; tests/kernel/test_saved_kernel.py runs the code as the frontend builds it, in a real
kernel) and reads ``last_result``. Applying is all or nothing: every value is parsed first, and one bad value,
or one refused because the runtime has started, applies none of them (the controller remembers that refusal,
so the panel and the sidebar offer "Restart kernel and apply").
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from ..core.runtime import Status
from ..core.saved import parse, rehearse
from .magics import extension_magics


class Result(dict):
    """The outcome of ``apply_json``, shown to the frontend through ``user_expressions`` as JSON."""

    def _repr_json_(self):
        return dict(self)


_last: Result = Result(ok=False, message="tfgpu: no saved settings were applied in this kernel yet", outcomes=[],
                       placement=None)


def last_result() -> Result:
    return _last


_applied_text: str | None = None  # the document this process applied (a kernel applies at its start, once)


def apply_json(text: str, shell: Any = None) -> Result:
    """Apply the ``tfgpu`` metadata given as JSON text in the running IPython (the sidebar's silent call at
    kernel start). Never raises for a bad value: the result says what was refused, and nothing was applied.

    The frontend also calls this when it reconnects to a kernel that was already running (a page reload): the
    same document again returns the first result; another one, once the user has run cells, is not applied
    (it would silently undo what they typed since): it applies at the next kernel start."""
    global _last, _applied_text
    if text == _applied_text:
        return _last
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if getattr(shell, "execution_count", 1) > 1:
        # Not a refusal: nothing was wrong with the settings (``reason`` lets the sidebar say it neutrally).
        _last = Result(ok=False, outcomes=[], placement=None, reason="ran_cells",
                      message="tfgpu: this kernel has run cells already, so the saved settings were not applied now: "
                              "they apply at its next start (Restart kernel and apply)")
        return _last
    try:
        document = json.loads(text)
    except ValueError as err:
        _last = Result(ok=False, message=f"tfgpu: the saved settings are not JSON ({err})", outcomes=[],
                       placement=None)
        return _last
    _last = apply(document, shell)
    _applied_text = text
    return _last


def apply(document: Any, shell: Any = None) -> Result:
    """Load the extension in ``shell`` (the running IPython by default) and apply the saved settings, all or
    nothing."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    parsed = parse(document)
    if "" in parsed.errors:  # not a document of ours: the extension is not even loaded for it
        return Result(ok=False, message=parsed.errors[""], outcomes=[], placement=None)
    magics = extension_magics(shell)
    # The verdict Check & save gave: the same two steps, run first.
    errors = parsed.errors or rehearse(parsed.changes, magics.controller)
    if errors:
        magics.live.refresh()
        return Result(ok=False, message=next(iter(errors.values())), outcomes=[], placement=None)
    changes, placement = list(parsed.changes), parsed.placement
    # A saved `--wait` waits before the first cell: each progress line goes out as one line of this (silent)
    # request's stdout, which the sidebar shows with a Cancel (an interrupt: the wait then changes nothing).
    magics.controller.on_progress = lambda line: print(line, flush=True)
    try:
        outcomes = magics.controller.change_all(changes)
    except ValueError as err:  # PlanError: refused for the moment (too late), RefusedError among them
        magics.live.refresh()
        # After `import tensorflow` what TensorFlow took cannot be taken back: say what took effect, and what not.
        applied = getattr(err, "applied", ())
        return Result(ok=False, message=str(err), placement=None, outcomes=_outcome_rows(applied),
                      not_applied=[c.setting for c in changes[len(applied):]])
    finally:
        magics.controller.on_progress = None
    if any(o.status is Status.PENDING for o in outcomes):  # the import's cell then says what became of them
        magics.controller.on_import_report = lambda line: None if magics.quiet else print(line)
    if placement is not None and magics.placement is not None:
        with contextlib.redirect_stdout(io.StringIO()):  # its one line would go nowhere visible anyway
            magics.placement.command([placement])
    magics.live.refresh()
    return Result(ok=True, message=None, placement=placement,
                  outcomes=_outcome_rows(zip(changes, outcomes, strict=True)))


def _outcome_rows(pairs) -> list[dict]:
    # Each with its state's words (core/words.py): the sidebar shows an apply before its comm has opened.
    return [{**o.to_dict(), "setting": c.setting, "asked": c.asked, "words": o.status.said} for c, o in pairs]
