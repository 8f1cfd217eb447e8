"""The ``%tfgpu`` subcommands: parse arguments, call the core, render. Imported on the first
``%tfgpu`` call rather than at ``%load_ext``, which then stays cheap (the core's dataclasses cost
more to create than everything else the extension loads)."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys

from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser
from IPython.display import display

from . import state as state_module
from .control import Change, RefusedError
from .export import render_tf1, render_tf2
from .magics import SUBCOMMANDS, USAGE
from .plan import (
    ALL,
    PlanError,
    VisibleSpec,
    parse_count,
    parse_index,
    parse_on_off,
    parse_size,
    parse_virtual,
    parse_visible,
    shown,
)
from .runtime import Outcome, Status, TFState, probe


class _Parser(MagicArgumentParser):
    """argparse whose every complaint is one ``tfgpu:`` line with the usage of that subcommand."""

    def error(self, message):
        usage = " ".join(self.format_usage().split()).replace("usage: ", "")
        # argparse quotes the user's words whole; a 100 KB word is shortened like every other bad value.
        message = _LONG_WORD.sub(lambda m: shown(m.group(0)), " ".join(message.splitlines()))
        raise UsageError(f"tfgpu: {self.prog.replace('%tfgpu ', '')}: {message}; usage: {usage}")


_LONG_WORD = re.compile(r"\S{60,}")


class _Once(argparse.Action):
    """An option that may be given once: `--gpu 0 --gpu 1` is a mistake, not "the last one wins"."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest)} and {values}); give it once")
        setattr(namespace, self.dest, values)


def _parser(name: str, value: str | None = None, value_help: str = "", gpu: bool = False) -> _Parser:
    parser = _Parser(prog=f"%tfgpu {name}", add_help=False, formatter_class=argparse.HelpFormatter)
    if value:
        parser.add_argument(value, help=value_help)
    if gpu:
        parser.add_argument("--gpu", default=None, action=_Once, help="physical GPU index; default: every visible GPU")
    return parser


_PARSERS = {
    "visible": _parser("visible", "spec"),
    "growth": _parser("growth", "state"),
    "limit": _parser("limit", "size", gpu=True),
    "virtual": _parser("virtual", "spec", gpu=True),
    "cpus": _parser("cpus", "count"),
    "cpumem": _parser("cpumem", "state"),
}
_PARSERS["visible"].add_argument("--min-free", default=None, action=_Once,
                                 help="with auto: only GPUs with this much free")
for _name in ("status", "reset", "help", "strategy"):
    _PARSERS[_name] = _parser(_name)
_PARSERS["help"].add_argument("subcommand", nargs="?", default=None, help="the subcommand to explain, with examples")
_PARSERS["devices"] = _parser("devices")
_PARSERS["devices"].add_argument("--json", action="store_true")
_PARSERS["status"].add_argument("--json", action="store_true")
_PARSERS["memory"] = _parser("memory")
_PARSERS["memory"].add_argument("--reset", action="store_true", help="reset the peak figures")
_PARSERS["export"] = _parser("export")
_PARSERS["export"].add_argument("--tf1", action="store_true", help="ConfigProto + Session instead of tf.config")


def _outcome_line(command: str, outcome: Outcome) -> str:
    detail = f" ({outcome.detail})" if outcome.detail else ""
    return f"tfgpu: {command}: {outcome.status.value}{detail}"


def dispatch(m, line: str, cell: str | None):
    """Run one ``%tfgpu`` line (or ``%%tfgpu`` cell) for the magics object ``m``."""
    words = line.split()
    name, argv = (words[0].lower(), words[1:]) if words else ("status", [])
    if cell is not None and name != "device":
        raise UsageError(f"tfgpu: {shown(name)} is a line magic; only `%%tfgpu device DEVICE` takes a cell")
    if name not in SUBCOMMANDS:
        raise UsageError(f"tfgpu: unknown subcommand {shown(name)}; valid: {', '.join(SUBCOMMANDS)} "
                         "(`%tfgpu help` explains each)")
    try:
        if name in _CHANGES:
            _configure(m, _CHANGES[name](_PARSERS[name].parse_args(argv), f"%tfgpu {line.strip()}"))
            return None
        handler = globals()[f"cmd_{name}"]
        if name in ("placement", "device", "log", "panel"):
            return handler(m, argv, cell)
        return handler(m, _PARSERS[name].parse_args(argv), line)
    except PlanError as err:
        raise UsageError(str(err)) from None


# -- configuring -------------------------------------------------------------------------------
def _configure(m, change: Change) -> Outcome:
    try:
        outcome = m.controller.change(change)
    except RefusedError as err:
        # Remembered, so the sidebar and the panel can offer "Restart kernel and apply" with it.
        m.live.note_refused(change.setting, change.asked, str(err))
        if getattr(m, "sidebar", None) is not None:
            m.sidebar.refused_changed()
        raise UsageError(str(err)) from None
    except PlanError as err:
        raise UsageError(str(err)) from None
    m.live.forget_refused(change.setting)
    if outcome.status is Status.PENDING:  # say what became of it when TensorFlow is imported
        m.controller.on_import_report = lambda line: None if m.quiet else print(line)
    if not m.quiet:
        print(_outcome_line(change.command, outcome))
    return outcome


def _gpu(args) -> int | str:
    return ALL if args.gpu is None else parse_index(args.gpu)


def _visible(args, command: str) -> Change:
    spec = parse_visible(args.spec)
    if args.min_free is not None:
        if spec.auto is None:
            raise PlanError(f"--min-free only goes with auto or auto:N, not {shown(args.spec)}")
        spec = VisibleSpec(auto=spec.auto, min_free_mib=parse_size(args.min_free, allow_percent=False,
                                                                   what="--min-free size"))
    return Change("visible", spec, ALL, command)


def _growth(args, command: str) -> Change:
    return Change("growth", parse_on_off(args.state, what="growth"), ALL, command)


def _limit(args, command: str) -> Change:
    size = None if args.size.lower() == "off" else parse_size(args.size, what="limit")
    return Change("limit", size, _gpu(args), command)


def _virtual(args, command: str) -> Change:
    sizes = None if args.spec.lower() == "off" else parse_virtual(args.spec)
    return Change("virtual", sizes, _gpu(args), command)


def _cpus(args, command: str) -> Change:
    count = None if args.count.lower() == "off" else parse_count(args.count, what="CPU count")
    return Change("cpus", count, ALL, command)


def _cpumem(args, command: str) -> Change:
    return Change("cpumem", parse_on_off(args.state, what="cpumem"), ALL, command)


_CHANGES = {"visible": _visible, "growth": _growth, "limit": _limit, "virtual": _virtual, "cpus": _cpus,
            "cpumem": _cpumem}
CONFIGURING = tuple(_CHANGES)


def parse_change(line: str) -> Change:
    """One configuring line (``cpus 3``, ``limit 2GB --gpu 1``) as the magic parses it, applying nothing.
    Raises UsageError or PlanError with the magic's own one-line message."""
    words = line.split()
    name = words[0].lower() if words else ""
    if name not in _CHANGES:
        raise UsageError(f"tfgpu: {shown(name or line)} is not a setting; valid: {', '.join(CONFIGURING)}")
    return _CHANGES[name](_PARSERS[name].parse_args(words[1:]), f"%tfgpu {line.strip()}")


def cmd_reset(m, args, line):
    dropped = m.controller.reset()
    print("tfgpu: reset: " + (f"dropped {', '.join(dropped)}" if dropped else "nothing was waiting"))


# -- views -------------------------------------------------------------------------------------
def snapshot(m, list_devices: bool = False) -> state_module.Snapshot:
    placement = m.placement.status() if m.placement is not None else None
    live = getattr(m, "live", None)
    return state_module.take(m.controller, list_devices=list_devices, placement=placement,
                             peaks=live.peaks() if live is not None else None)


def _show_text(text: str, page: str) -> None:
    """The text form in a terminal, its HTML view (tables) in a notebook: one display, both forms."""
    display({"text/plain": text, "text/html": page}, raw=True)


def cmd_status(m, args, line):
    snap = snapshot(m)
    if args.json:
        return snap.to_dict()
    display(snap)


def cmd_devices(m, args, line):
    snap = snapshot(m, list_devices=True)
    if args.json:
        return snap.to_dict()
    _show_text(snap.devices_text(), snap.devices_html())


def cmd_memory(m, args, line):
    live = getattr(m, "live", None)
    state = probe().state
    if args.reset and state >= TFState.INITIALIZED:
        tf = sys.modules["tensorflow"]
        for device in tf.config.list_logical_devices():
            if device.device_type in ("GPU", "CPU"):
                # CPUs share one allocator, and some builds do not track it at all.
                with contextlib.suppress(ValueError, RuntimeError):
                    tf.config.experimental.reset_memory_stats(device.name)
        if live is not None:
            live.reset_peaks()
    snap = snapshot(m)
    if live is None:
        _show_text("\n".join(snap.memory_lines()), snap.memory_html())
        return
    from .live_html import cells_html, cells_text

    cells, memory = live.cells(), {"devices": snap.to_dict()["tensorflow"]["memory"]}
    _show_text("\n".join([*snap.memory_lines(), "", *cells_text(cells, memory)]),
               snap.memory_html() + cells_html(cells, memory))


def cmd_export(m, args, line):
    plan = m.controller.plan
    # Every GPU NVML lists, with None for an unknown total, so a percentage on a lost GPU is refused
    # instead of exported as "no limit".
    gpus = m.controller.nvml().gpus if plan.limits or plan.virtual else ()
    totals = {g.index: g.memory_total_mib if isinstance(g.memory_total_mib, int) else None for g in gpus}
    placement = bool(m.placement and m.placement.status().get("on"))
    render = render_tf1 if args.tf1 else render_tf2
    print(render(plan, totals, placement=placement), end="")


def cmd_strategy(m, args, line):
    if probe().state is TFState.NOT_INSTALLED:
        raise UsageError("tfgpu: strategy needs TensorFlow, which is not installed; "
                         "pip install 'tfgpu_magic[tensorflow]' (or tensorflow-cpu) and restart the kernel")
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus or tf.config.list_logical_devices("CPU")
    names = [d.name for d in devices]
    strategy = tf.distribute.MirroredStrategy(names)
    short = ", ".join(n.split("device:")[-1] for n in names)
    print(f"tfgpu: MirroredStrategy over {strategy.num_replicas_in_sync} device(s): {short}")
    return strategy


def cmd_help(m, args, line):
    if args.subcommand is None:
        print(USAGE)
        return
    name = args.subcommand.lower()
    if name not in SUBCOMMANDS:
        raise UsageError(f"tfgpu: help: unknown subcommand {shown(args.subcommand)}; valid: {', '.join(SUBCOMMANDS)}")
    from .completion import subcommand_help

    print(subcommand_help(name, USAGE, _PARSERS.get(name)))


# -- placement: its own face -------------------------------------------------------------------
def cmd_placement(m, argv, cell):
    if m.placement is None:
        raise UsageError("tfgpu: placement capture is not available in this installation")
    return m.placement.command(argv)


def cmd_log(m, argv, cell):
    if m.placement is None:
        raise UsageError("tfgpu: TensorFlow's log is tamed by the placement capture, which is not available here")
    from .placement_magic import log_command

    return log_command(m.placement, argv)


def cmd_device(m, argv, cell):
    if cell is None:
        raise UsageError("tfgpu: device runs a cell: write `%%tfgpu device /GPU:0` as the cell's first line")
    if len(argv) != 1:
        raise UsageError(f"tfgpu: device takes one device like /GPU:0 or /CPU:1, got {shown(' '.join(argv))}")
    if m.placement is None:
        raise UsageError("tfgpu: placement capture is not available in this installation")
    return m.placement.run_cell_on_device(argv[0], cell)


def cmd_panel(m, argv, cell):
    if argv not in ([], ["--close"]):
        raise UsageError(f"tfgpu: panel takes nothing or --close, not {shown(' '.join(argv))}; "
                         "`%tfgpu panel` shows the live panel, `%tfgpu panel --close` closes every one")
    if argv == ["--close"]:
        from .panel import close_all

        closed = close_all()
        if getattr(m, "_live", None) is not None:
            m._live.stop()
        print(f"tfgpu: closed {closed} panel(s); the refresh has stopped")
        return None
    if getattr(getattr(m, "shell", None), "kernel", None) is None:
        # A terminal (or any shell without a kernel) cannot show widgets: the same facts as text.
        print(snapshot(m).to_text())
        print("tfgpu: the live panel needs a notebook front end (JupyterLab, Notebook 7, VS Code); "
              "this is `%tfgpu status`")
        return None
    from .panel import Panel

    if m._panel is None or m._panel.closed:
        m._panel = Panel(model=m.live, magics=m)
    display(m._panel)  # a second display is a second view of the same panel
    return None
