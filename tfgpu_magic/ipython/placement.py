"""The IPython face of placement capture: ``%tfgpu placement on|off|show|clear`` and ``%%tfgpu device``.

The ``%tfgpu`` magic owns one :class:`PlacementController` per shell; its router (commands.py) sends each
placement word to one of the controller's operations, parsed by placement_args.py. The controller hooks
``pre_run_cell``/``post_run_cell``. fd 2 (TensorFlow's C++ log, and its placement log) is read by one
:class:`tfgpu_magic.core.placement.StderrTap` from the first cell that needs it until the extension is
unloaded, with each cell's start and end marked on it; while placement is captured a cell is also bracketed
by a :class:`tfgpu_magic.core.placement.Capture` of fd 1 and the Python streams. Loading starts no thread.

Semantics chosen where TensorFlow leaves no choice (its placement log is fixed when the runtime starts):

* ``on`` before ``import tensorflow``: the log is turned on by an import hook; before the runtime
  starts: turned on now. Either way every placement is seen. ``on`` after the runtime started without
  the log: TensorFlow cannot log any more, so the controller reads run metadata instead (newly compiled
  ops and functions only) and says so once, with the fix.
* ``off`` stops recording and the summaries. If TensorFlow's log is still running (it was on when the
  runtime started), each cell is still captured and the raw lines are swallowed and dropped, so ``off``
  means quiet: TensorFlow's placement lines never reach the notebook while ``off``.
* Before any ``on``/``off`` (the state after loading) nothing is captured: a log the user turned on
  with ``tf.debugging.set_log_device_placement`` by hand is left alone.
* The requested device is exact for ``%%tfgpu device`` cells: any op elsewhere is a fallback. For plain
  cells, ``tf.device("...")`` string literals in the source are read; their ops cannot be told apart
  from the cell's others, so such a device is flagged only when it does not exist (soft placement then
  moved its ops, silently).
"""

from __future__ import annotations

import contextlib
import os
import sys
from types import SimpleNamespace
from typing import Any

from IPython.core.error import UsageError

from ..core.i18n import _
from ..core.inputs import shown
from ..core.placement import (
    DEFAULT_MAXLEN,
    DEVICE_FORMS,
    Capture,
    CellRecorder,
    CellSummary,
    LineFields,
    PlacementLog,
    RecordTable,
    StderrTap,
    devices_in_source,
    drain_orphans,
    find_fallbacks,
    fold_internal,
    logical_devices,
    parse_device,
    records_from_run_metadata,
    tf_context,
    tf_log_flag,
)
from ..core.tflog import TfLog, maybe_log_start
from . import syntax
from .cell_runner import run_body

LATE_MESSAGE = (
    "tfgpu: TensorFlow's runtime started without its placement log, and TensorFlow cannot turn it on "
    "any more. Showing what can still be seen: ops and functions compiled from now on (through run "
    "metadata); ops that already ran once stay invisible. For the full log, restart the kernel and run "
    "`%tfgpu placement on` before the first TensorFlow operation."
)


def _probe() -> Any:
    from ..core import runtime  # loaded when first needed: %load_ext does not pay for the adapter

    return runtime.probe()


def _soft_placement() -> bool:
    tf = sys.modules.get("tensorflow")
    try:
        return bool(tf.config.get_soft_device_placement()) if tf is not None else True
    except Exception:  # a TensorFlow without the call: assume its default, on
        return True


def _display(obj: Any) -> None:
    from IPython.display import display

    display(obj)


class PlacementController:
    """Placement capture for one IPython shell. ``log`` holds the records (``record.to_dict()`` for
    other views); ``last_summary`` the last cell summary shown."""

    def __init__(self, shell: Any, maxlen: int = DEFAULT_MAXLEN, log_mode: str = "quiet"):
        self.shell = shell
        self.log = PlacementLog(maxlen)
        # TensorFlow's own log, tamed through the same per-cell capture (one capture, not two).
        self.tflog = TfLog(log_mode)
        self.mode = "unset"  # "on" | "off" once the user said so
        self.last_summary: CellSummary | None = None
        self._registered = False
        self._capture: Capture | None = None
        self._tap: StderrTap | None = None
        self._cell: CellRecorder | None = None
        self._cell_source = ""
        self._cell_forced = False  # %%tfgpu device asked for this cell's placement
        self._in_cell = False
        self._hooked = False
        self._we_set_tf_flag = False
        self._tf_log_at_init: bool | None = None
        self._tf_log_known = False  # False: read after the fact from the Python flag (an assumption)
        self._seen_uninitialized = False
        self._run_metadata = False  # enabled by us for as long as placement is on
        self._cell_run_metadata = False  # enabled by us for one %%tfgpu device cell
        self._told_late = False
        self._errors: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------------------
    def register(self) -> None:
        if self._registered:
            return
        self._observe_tf()
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self.set_log_mode(self.tflog.mode)
        self._registered = True

    def unregister(self) -> None:
        """Undo everything register() and the commands did: capture, hooks, run metadata."""
        self._stop_capture()
        self._stop_tap()
        self._cell = None
        self._in_cell = False
        if self._registered:
            for name, callback in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
                with contextlib.suppress(ValueError):
                    self.shell.events.unregister(name, callback)
            self._registered = False
        self._unhook()
        self._disable_run_metadata(cell_only=False)
        self._disable_run_metadata(cell_only=True)
        self.tflog.unwatch_python_logger()
        self.tflog.end()
        drain_orphans(close=True)

    def set_log_mode(self, mode: str) -> None:
        """quiet | all | raw: how TensorFlow's own log shows (tflog.py); raw leaves it to TensorFlow."""
        self.tflog.mode = mode
        if self.tflog.taming:
            self.tflog.watch_python_logger()
        else:
            self.tflog.unwatch_python_logger()
        if self._tap is not None:
            self._tap.set_lines(*self._log_taker())

    # -- TensorFlow's log ------------------------------------------------------------------------------
    def _observe_tf(self) -> Any:
        p = _probe()
        if not p.initialized:
            self._seen_uninitialized = True
        elif self._tf_log_at_init is None:
            self._tf_log_at_init = bool(tf_log_flag()) or self._we_set_tf_flag
            self._tf_log_known = self._seen_uninitialized
        return p

    def _tf_log_live(self) -> bool:
        """Does TensorFlow write placement lines now, or will it once its runtime starts?"""
        p = self._observe_tf()
        if p.initialized:
            return bool(self._tf_log_at_init)
        if p.imported:
            return bool(tf_log_flag())
        return self._hooked

    def _on_tf_import(self, tf: Any) -> None:
        self._hooked = False
        if self.mode == "on":
            tf.debugging.set_log_device_placement(True)
            self._we_set_tf_flag = True

    def _hook(self) -> None:
        if not self._hooked:
            from ..core import runtime

            runtime.add_import_hook(self._on_tf_import)
            self._hooked = True

    def _unhook(self) -> None:
        if self._hooked:
            from ..core import runtime

            runtime.remove_import_hook(self._on_tf_import)
            self._hooked = False

    def _enable_run_metadata(self, cell_only: bool) -> None:
        ctx = tf_context()
        if ctx is None or self._run_metadata or self._cell_run_metadata:
            return
        ctx.enable_run_metadata()
        ctx.export_run_metadata()  # start from a clean slate
        if cell_only:
            self._cell_run_metadata = True
        else:
            self._run_metadata = True

    def _disable_run_metadata(self, cell_only: bool) -> None:
        flag = "_cell_run_metadata" if cell_only else "_run_metadata"
        if not getattr(self, flag):
            return
        setattr(self, flag, False)
        ctx = tf_context()
        if ctx is not None:
            try:
                ctx.disable_run_metadata()
            except Exception as err:  # a context torn down by the user: nothing left to disable
                self._errors.append(f"disable_run_metadata: {err}")

    def _collect_run_metadata(self, cell: CellRecorder) -> None:
        if not (self._run_metadata or self._cell_run_metadata):
            return
        ctx = tf_context()
        if ctx is None:
            return
        try:
            metadata = ctx.export_run_metadata()
        except Exception as err:
            self._errors.append(f"export_run_metadata: {err}")
            return
        if metadata is not None:
            cell.add_records(records_from_run_metadata(metadata, cell.cell, cell.requested))

    # -- per cell --------------------------------------------------------------------------------------
    def _count_guess(self) -> int | None:
        return getattr(self.shell, "execution_count", None)

    def _sink(self, fields: LineFields) -> None:
        cell = self._cell
        if cell is not None:
            cell.add(fields)

    def _log_taker(self) -> tuple[Any, Any]:
        """What fd 2's reader offers TensorFlow's log: (whole-line taker, partial-line hold), or none."""
        return (self.tflog.take_line, maybe_log_start) if self.tflog.taming else (None, None)

    def _start_tap(self) -> StderrTap | None:
        """The one reader of fd 2, started by the first cell that needs it and kept until unload."""
        if self._tap is None:
            tap = StderrTap(*self._log_taker())
            try:
                tap.start()
            except OSError as err:  # no fd 2 to redirect (closed): TensorFlow's log stays untamed
                self._errors.append(f"fd 2 reader could not start: {err}")
                return None
            self._tap = tap
        return self._tap

    def _stop_tap(self) -> None:
        tap, self._tap = self._tap, None
        if tap is not None:
            tap.stop()

    def _start_capture(self, placement: bool = True) -> None:
        """Capture the rest of the cell: every placement channel, or (``placement=False``) only fd 2 for
        TensorFlow's log, which the tap alone does. Placement asked for mid-cell widens a log-only cell."""
        tap = self._start_tap()
        if not placement or (self._capture is not None and self._capture.active):
            return
        if self._cell is None:
            self._cell = CellRecorder(self._count_guess())
        if tap is not None:
            tap.set_sink(self._sink)
            self._capture = Capture(self._sink, fds=(1,))
        else:
            lines, hold = self._log_taker()
            self._capture = Capture(self._sink, stderr_lines=lines, stderr_hold=hold)
        try:
            self._capture.start()
        except OSError as err:  # no descriptors to redirect (closed fd 1/2): placement stays blind
            self._capture = None
            self._errors.append(f"capture could not start: {err}")

    def _stop_capture(self) -> None:
        """End the cell's capture; once it returns, every line the cell wrote has reached its recorder and
        TensorFlow's log (the tap's mark), and later fd-2 lines are not placement records of this cell."""
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.stop()
        tap = self._tap
        if tap is not None:
            if not tap.mark():
                self._errors.append("fd 2 reader did not answer a cell boundary within 5 s")
            tap.set_sink(None)

    def pre_run_cell(self, info: Any = None) -> None:
        self._stop_capture()  # marks fd 2: what came before this cell is not this cell's
        self._cell = None
        self._cell_forced = False
        self._in_cell = True
        self._cell_source = getattr(info, "raw_cell", "") or ""
        if self.tflog.taming:
            self.tflog.begin(self._count_guess())
        live = self.mode != "unset" and self._tf_log_live()
        if self.mode == "on":
            if not live and _probe().initialized:
                self._enable_run_metadata(cell_only=False)
            self._start_capture()
        elif live:  # "off", but TensorFlow keeps writing: swallow
            self._start_capture()
        elif self.tflog.taming:
            self._start_capture(placement=False)
        else:  # `log raw` and nothing to capture: fd 2 is TensorFlow's own again
            self._stop_tap()

    def post_run_cell(self, result: Any = None) -> None:
        self._in_cell = False
        try:
            self._stop_capture()  # first: the stop flush brings the printf lines, for this cell's recorder
        finally:
            cell, self._cell = self._cell, None
            forced, self._cell_forced = self._cell_forced, False
            if cell is not None:
                count = getattr(result, "execution_count", None)
                if count is not None:
                    cell.cell = count
                self._collect_run_metadata(cell)
            self._disable_run_metadata(cell_only=True)
        silent = getattr(getattr(result, "info", None), "silent", False)
        block = self.tflog.end(getattr(result, "execution_count", None))
        if cell is not None and (self.mode == "on" or forced):
            failed = result is not None and not getattr(result, "success", True)
            summary = self._summarize(cell, forced, failed)
            if summary is not None and not silent:
                _display(summary)
        if block is not None and not silent:
            _display(block)

    def _summarize(self, cell: CellRecorder, forced: bool, failed: bool) -> CellSummary | None:
        records = cell.records()
        self.log.extend(records)
        # With soft placement off a missing device raises instead of falling back: nothing to flag.
        asked = devices_in_source(self._cell_source) if _soft_placement() else []
        existing = logical_devices() if (asked or cell.requested) and not failed else None
        fallbacks = find_fallbacks(records, cell.requested, asked, existing)
        notes = []
        summary = CellSummary.from_records(records, cell.cell, cell.requested, fallbacks)
        if forced and not summary.rows and not failed:
            notes.append(
                "no placement was seen: "
                + ("without TensorFlow's log only newly compiled ops show (restart the kernel and run "
                   "`%tfgpu placement on` first for the full log)" if not self._tf_log_at_init
                   else "the cell ran no TensorFlow op")
            )
            summary = CellSummary.from_records(records, cell.cell, cell.requested, fallbacks, notes)
        if summary.empty and not notes:
            return None
        self.last_summary = summary
        return summary

    # -- %%tfgpu device ----------------------------------------------------------------------------------
    def run_cell_on_device(self, device: str, cell: str) -> Any:
        """Run ``cell`` like a normal cell under ``tf.device(device)`` and show where its ops ran.
        Returns the value of its last expression (shown as the cell's output); its exceptions propagate."""
        __tracebackhide__ = True
        spec = parse_device(device)
        if spec is None:
            raise UsageError("tfgpu: " + _("bad device {value}; use a device like {forms}").format(
                value=shown(device), forms=DEVICE_FORMS))
        tf_device = device if device.strip().startswith("/job:") else f"/{spec.type}:{spec.index}"
        if self.mode == "on" and not _probe().imported:
            self._hook()
        import tensorflow as tf

        own_cell = not self._in_cell  # called outside a shell cell: bracket it ourselves
        if own_cell:
            self._cell_source = cell
        if self._cell is None:
            self._cell = CellRecorder(self._count_guess())
        self._cell.requested = tf_device
        self._cell_forced = True
        self._start_capture()
        try:
            with tf.device(tf_device):
                if not self._tf_log_live():
                    self._enable_run_metadata(cell_only=True)
                return run_body(self.shell, cell)
        finally:
            if own_cell:
                self.post_run_cell(None)

    # -- what each `%tfgpu placement` word does (commands.py's router calls these) ------------------------------
    def command(self, argv: list[str]) -> Any:
        """``%tfgpu placement ARGV`` for a caller that holds this capture rather than the extension (the panel's
        control, saved settings): the magic's own route, this capture standing for the extension's."""
        from .commands import dispatch  # the router imports nothing of this module: no circle

        return dispatch(SimpleNamespace(placement=self), " ".join(["placement", *argv]))

    def turn_on(self) -> None:
        """Capture from now on, by whichever route TensorFlow still allows, and say which."""
        self.mode = "on"
        p = self._observe_tf()
        if not p.imported:
            self._hook()
            print("tfgpu: placement capture on; TensorFlow's placement log starts when it is imported.")
        elif not p.initialized:
            sys.modules["tensorflow"].debugging.set_log_device_placement(True)
            self._we_set_tf_flag = True
            print("tfgpu: placement capture on (TensorFlow's placement log turned on before its runtime started).")
        elif self._tf_log_at_init:
            print("tfgpu: placement capture on (TensorFlow's placement log is running).")
        else:
            self._enable_run_metadata(cell_only=False)
            if not self._told_late:
                self._told_late = True
                print(LATE_MESSAGE)
            else:
                print("tfgpu: placement capture on (newly compiled ops only, through run metadata).")
        if self._in_cell:  # `on` and TensorFlow work in one cell: capture the rest of this cell too
            self._start_capture()

    def turn_off(self) -> None:
        """Stop recording; TensorFlow's placement lines stay hidden if its log cannot stop (see the module's
        docstring)."""
        self.mode = "off"
        self._unhook()
        p = self._observe_tf()
        if p.imported and not p.initialized and self._we_set_tf_flag:
            sys.modules["tensorflow"].debugging.set_log_device_placement(False)
            self._we_set_tf_flag = False
        self._disable_run_metadata(cell_only=False)
        if self._tf_log_live():
            print("tfgpu: placement capture off; tfgpu keeps hiding TensorFlow's placement lines (restart for none)\n"
                  "  TensorFlow's runtime started with its placement log on and cannot stop it (tensorflow#45465)")
        else:
            print("tfgpu: placement capture off.")

    def clear(self) -> None:
        n = len(self.log)
        self.log.clear()
        print(f"tfgpu: placement records cleared ({n} removed).")

    def show_status(self) -> None:
        # One display with both forms: the text in a terminal, the HTML table in a notebook.
        from IPython.display import display

        display({"text/plain": self.status_text(), "text/html": self.status_html()}, raw=True)

    def show(self, device: str | None, op: str | None, cell: int | None, limit: int, every: bool) -> None:
        """The records kept that match, one row per op of a cell on a device (TensorFlow's internal records left
        out and counted), the last ``limit`` rows; ``every``: every record, one a row."""
        matched = self.log.records(device, op, cell)
        if every:
            last = matched[-limit:] if limit else matched
            _display(RecordTable(tuple(last), len(matched), len(self.log), self.log.dropped, self.log.maxlen))
            return
        ops, merged, internal = fold_internal(matched)
        cut = len(ops) - limit if limit and len(ops) > limit else 0
        _display(RecordTable(tuple(ops[cut:]), len(ops), len(self.log), self.log.dropped, self.log.maxlen, internal,
                             tuple(merged[cut:])))

    # -- status --------------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        p = self._observe_tf()
        if not p.imported:
            route = "log at import" if self._hooked else "none"
        elif not p.initialized:
            route = "log" if tf_log_flag() else "none"
        elif self._tf_log_at_init:
            route = "log"
        elif self._run_metadata:
            route = "run_metadata"
        else:
            route = "none"
        return {
            "on": self.mode == "on",
            "mode": self.mode,
            "records": len(self.log),
            "dropped": self.log.dropped,
            "maxlen": self.log.maxlen,
            "tf_log_at_init": self._tf_log_at_init,
            "tf_log_at_init_known": self._tf_log_known if self._tf_log_at_init is not None else None,
            "route": route,
            "capturing": self._capture is not None and self._capture.active,
            "stderr_reader": self._tap is not None and self._tap.active,
            "notes": self._notes(route),
        }

    def _notes(self, route: str) -> list[str]:
        notes = []
        level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0").strip()
        if level.isdigit() and int(level) >= 1:
            notes.append(f"TF_CPP_MIN_LOG_LEVEL={level} hides TensorFlow's stderr log; placements still come "
                         "from its stdout copy of the placer and from its eager listener")
        if route == "run_metadata":
            notes.append("TensorFlow's log was off when its runtime started: only newly compiled ops and "
                         "functions are seen (restart the kernel, run `%tfgpu placement on` first)")
        if self.mode == "off" and route == "log":
            notes.append("TensorFlow still writes its placement log; tfgpu hides it in every cell")
        if self._tf_log_at_init is not None and not self._tf_log_known:
            notes.append("whether TensorFlow's log was on at its start is read from its flag, which "
                         "tfgpu did not watch being set")
        notes += self._errors[-3:]
        return notes

    def live_section(self, records: int = 500) -> dict[str, Any]:
        """The live model's ``placement`` section: status, the latest cell's summary, the newest records."""
        kept = self.log.records()
        return {"status": self.status(), "summary": self.last_summary.to_dict() if self.last_summary else None,
                "records": [r.to_dict() for r in kept[-records:]], "total": len(kept)}

    def status_text(self) -> str:
        """Sentences within 100 columns; each note starts its own line."""
        from ..render.text import fit, placement_sentences

        s = self.status()
        sentences = placement_sentences(s)
        said = len(sentences) - len(s["notes"])
        lines = fit("tfgpu: " + " ".join(sentences[:said]))
        lines += [line for n in s["notes"] for line in fit(f"note: {n}", first="  ", indent="    ")]
        return "\n".join(lines)

    def status_html(self) -> str:
        from ..render.views import placement_status_html

        return placement_status_html(self.status())


def parse_show_options(argv: list[str]) -> dict[str, Any]:
    """``placement show``'s options (``--device D --op OP --cell N --limit N --all``, also ``--opt=value``) as
    the router parses them -> dict; UsageError for a mistake."""
    from ..core.plan import PlanError
    from .placement_args import show_filter  # with the parsers: %load_ext loads neither

    try:
        return show_filter(syntax.parsers()["placement show"].parse_args(argv))
    except PlanError as err:
        raise UsageError(str(err)) from None


__all__ = ["LATE_MESSAGE", "PlacementController", "parse_show_options"]
