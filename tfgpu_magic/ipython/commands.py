"""The ``%tfgpu`` subcommands: an explicit router from each name to its handler, every handler taking one
:class:`Call`. Imported on the first ``%tfgpu`` call rather than at ``%load_ext``,
which then stays cheap (the core's dataclasses cost more to create than everything else the extension loads).

Handlers parse nothing themselves (syntax.py holds the parsers), call the core, and render through render/.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..core import settings as registry
from ..core.changes import from_args
from ..core.i18n import _
from ..core.plan import PlanError, shown
from ..core.runtime import TFState, probe
from . import syntax
from .context import Extension, configure
from .placement_args import show_filter

if TYPE_CHECKING:
    from ..render.snapshot import ShownSnapshot


@dataclass
class Call:
    """One ``%tfgpu`` line (or ``%%tfgpu`` cell) on its way to its handler."""

    ext: Extension
    name: str  # the subcommand, lower case; with its word for one that has words ("placement show")
    line: str  # the whole line after %tfgpu
    argv: list[str] = field(default_factory=list)  # the words after the subcommand
    cell: str | None = None
    args: argparse.Namespace | None = None  # parsed, for subcommands with a parser (syntax.parsers())


Handler = Callable[[Call], Any]


def dispatch(ext: Extension, line: str, cell: str | None = None):
    """Run one ``%tfgpu`` line (or ``%%tfgpu`` cell) for the loaded extension ``ext``."""
    words = line.split()
    name, argv = (words[0].lower(), words[1:]) if words else ("status", [])
    if cell is not None and name != "device":
        raise UsageError("tfgpu: " + _("{name} is a line magic; only `%%tfgpu device DEVICE` takes a cell").format(
            name=shown(name)))
    if cell is None and name == "device":
        raise UsageError("tfgpu: " + _("device runs a cell: write `%%tfgpu device /GPU:0` as the cell's first line"))
    # A setting's name routes to the one setting handler: the registry (core/settings/) says which names are settings.
    handler = ROUTES.get(name) or (setting if name in registry.names() else None)
    if handler is None:
        raise UsageError(unknown_subcommand(name, _("`%tfgpu help` explains each")))
    call = Call(ext, name, line, argv, cell)
    if isinstance(handler, dict):
        handler, call = _word(handler, call)
    try:
        parser = syntax.parsers().get(call.name)
        if parser is not None:
            call.args = parser.parse_args(call.argv)
        return handler(call)
    except PlanError as err:
        raise UsageError(str(err)) from None


def unknown_subcommand(name: str, fix: str, prefix: str = "") -> str:
    """The bad word, the nearest subcommand (a typo) and the fix in the first line; the twenty names on the next."""
    import difflib

    near = difflib.get_close_matches(name.lower(), syntax.SUBCOMMANDS, n=1)
    meant = _(" (did you mean {name}?)").format(name=near[0]) if near else ""
    first = _("unknown subcommand {name}{meant}; {fix}").format(name=shown(name), meant=meant, fix=fix)
    return f"tfgpu: {prefix}{first}\n  " + _("valid: {names}").format(names=", ".join(syntax.SUBCOMMANDS))


def _word(table: dict[str, Handler], call: Call) -> tuple[Handler, Call]:
    """A subcommand with words of its own (``placement show --op MatMul``): the word's handler, and the call as
    that word's, parsed by its own parser ("placement show"). No word means status, as for ``%tfgpu`` alone."""
    word = call.argv[0].lower() if call.argv else "status"
    handler = table.get(word)
    if handler is None:
        raise UsageError("tfgpu: " + _("unknown {command} subcommand {word}; valid: {words}").format(
            command=call.name, word=shown(call.argv[0]), words=", ".join(table)))
    return handler, dataclasses.replace(call, name=f"{call.name} {word}", argv=call.argv[1:])


# -- configuring -------------------------------------------------------------------------------
def setting(call: Call) -> None:
    configure(call.ext, from_args(call.name, call.args, f"%tfgpu {call.line.strip()}"))


def reset(call: Call) -> None:
    dropped = call.ext.controller.reset()
    print("tfgpu: reset: " + (f"dropped {', '.join(dropped)}" if dropped else "nothing was waiting"))


# -- views -------------------------------------------------------------------------------------
# The views load the renderers when first shown: a configuring call (the usual first one) needs none of them.
def snapshot(ext: Extension, list_devices: bool = False) -> ShownSnapshot:
    from ..render.snapshot import take

    placement = ext.placement.status() if ext.placement is not None else None
    live = getattr(ext, "live", None)
    return take(ext.controller, list_devices=list_devices, placement=placement,
                peaks=live.peaks() if live is not None else None)


def _show_text(text: str, page: str) -> None:
    """The text form in a terminal, its HTML view (tables) in a notebook: one display, both forms."""
    display({"text/plain": text, "text/html": page}, raw=True)


def status(call: Call):
    snap = snapshot(call.ext)
    if call.args.json:
        return snap.to_dict()
    display(snap)


def devices(call: Call):
    snap = snapshot(call.ext, list_devices=True)
    if call.args.json:
        return snap.to_dict()
    _show_text(snap.devices_text(), snap.devices_html())


def memory(call: Call) -> None:
    live = getattr(call.ext, "live", None)
    if call.args.reset and probe().state >= TFState.INITIALIZED:
        tf = sys.modules["tensorflow"]
        for device in tf.config.list_logical_devices():
            if device.device_type in ("GPU", "CPU"):
                # CPUs share one allocator, and some builds do not track it at all.
                with contextlib.suppress(ValueError, RuntimeError):
                    tf.config.experimental.reset_memory_stats(device.name)
        if live is not None:
            live.reset_peaks()
    snap = snapshot(call.ext)
    if live is None:
        _show_text("\n".join(snap.memory_lines()), snap.memory_html())
        return
    cells, allocators = live.cells(), {"devices": snap.to_dict()["tensorflow"]["memory"]}
    from ..render import live_html

    _show_text("\n".join([*snap.memory_lines(), "", *live_html.cells_text(cells, allocators)]),
               snap.memory_html() + live_html.cells_html(cells, allocators))


def oom(call: Call) -> None:
    """``%tfgpu oom``: the last out-of-memory card again."""
    from .oom import show_last

    show_last(getattr(call.ext, "oom_watch", None))


def free(call: Call) -> None:
    """``%tfgpu free [--keras]``: let go of what the last error keeps alive, with the figures before and after."""
    from .oom import free as free_memory

    free_memory(call.ext.shell, call.ext.controller, keras=call.args.keras)


def export(call: Call) -> None:
    controller = call.ext.controller
    plan = controller.plan
    # Every GPU NVML lists, with None for an unknown total, so a percentage on a lost GPU is refused
    # instead of exported as "no limit".
    gpus = controller.nvml().gpus if any(s.per_gpu and s.asked(plan) for s in registry.settings()) else ()
    totals = {g.index: g.memory_total_mib if isinstance(g.memory_total_mib, int) else None for g in gpus}
    placement = bool(call.ext.placement and call.ext.placement.status().get("on"))
    from ..core.export import render_tf1, render_tf2

    render = render_tf1 if call.args.tf1 else render_tf2
    print(render(plan, totals, placement=placement), end="")


def strategy(call: Call):
    if probe().state is TFState.NOT_INSTALLED:
        raise UsageError("tfgpu: " + _("strategy needs TensorFlow, which is not installed; pip install "
                                       "'tfgpu_magic[tensorflow]' (or tensorflow-cpu) and restart the kernel"))
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    names = [d.name for d in gpus or tf.config.list_logical_devices("CPU")]
    made = tf.distribute.MirroredStrategy(names)
    short = [n.split("device:")[-1] for n in names]
    short = ", ".join(short if len(short) <= 8 else [*short[:3], "...", short[-1]])
    print(f"tfgpu: MirroredStrategy over {made.num_replicas_in_sync} device(s): {short}")
    return made


def help_(call: Call) -> None:
    if call.args.subcommand is None:
        print(syntax.USAGE)
        return
    name = call.args.subcommand.lower()
    if name not in syntax.SUBCOMMANDS:
        raise UsageError(unknown_subcommand(call.args.subcommand, _("`%tfgpu help` lists them"), "help: "))
    print(syntax.subcommand_help(name))


# -- placement and the log: the placement face's own ---------------------------------------------------
def _capture(call: Call, what: str = ""):
    if call.ext.placement is None:
        raise UsageError(f"tfgpu: {what or _('placement capture is not available in this installation')}")
    return call.ext.placement


def placement_on(call: Call) -> None:
    _capture(call).turn_on()


def placement_off(call: Call) -> None:
    _capture(call).turn_off()


def placement_show(call: Call) -> None:
    wanted = show_filter(call.args)
    _capture(call).show(wanted["device"], wanted["op"], wanted["cell"], wanted["rows"], every=wanted["all"])


def placement_clear(call: Call) -> None:
    _capture(call).clear()


def placement_status(call: Call) -> None:
    _capture(call).show_status()


# `%tfgpu placement WORD`: routed by dispatch like the subcommands, each word with its parser in syntax.parsers().
PLACEMENT_ROUTES: dict[str, Handler] = {
    "on": placement_on,
    "off": placement_off,
    "show": placement_show,
    "clear": placement_clear,
    "status": placement_status,
}


def log(call: Call) -> None:
    """``%tfgpu log [quiet|all|raw]``: the full text of recent cells' TensorFlow log, or the mode from now on."""
    capture = _capture(call, "TensorFlow's log is tamed by the placement capture, which is not available here")
    mode = call.args.mode
    if mode is None:
        print(capture.tflog.text_of_recent())
        return
    capture.set_log_mode(mode)
    what = {"quiet": "warnings and errors shown under each cell, information folded",
            "all": "every line shown under each cell, in one block",
            "raw": "left to TensorFlow, as without tfgpu"}[mode]
    print(f"tfgpu: TensorFlow's log: {mode} ({what}); takes effect from the next cell")


def device(call: Call):
    return _capture(call).run_cell_on_device(call.args.device, call.cell)


# -- the live panel ---------------------------------------------------------------------------------------
def panel(call: Call) -> None:
    ext = call.ext
    if call.argv not in ([], list(syntax.PANEL_OPTIONS)):
        raise UsageError("tfgpu: " + _("panel takes nothing or --close, not {words}; `%tfgpu panel` shows the live "
                                       "panel, `%tfgpu panel --close` closes every one").format(
                                           words=shown(" ".join(call.argv))))
    if call.argv:
        print("tfgpu: " + _("closed {count} panel(s); the refresh has stopped").format(count=ext.close_panels()))
        return
    if getattr(getattr(ext, "shell", None), "kernel", None) is None:
        # A terminal (or any shell without a kernel) cannot show widgets: the same facts as text.
        print(snapshot(ext).to_text())
        print("tfgpu: " + _("the live panel needs a notebook front end (JupyterLab, Notebook 7, VS Code); this is "
                            "`%tfgpu status`"))
        return
    display(ext.shown_panel())  # a second display is a second view of the same panel


ROUTES: dict[str, Handler | dict[str, Handler]] = {
    "status": status,
    "devices": devices,
    "placement": PLACEMENT_ROUTES,
    "device": device,
    "memory": memory,
    "oom": oom,
    "free": free,
    "panel": panel,
    "log": log,
    "export": export,
    "strategy": strategy,
    "reset": reset,
    "help": help_,
}
