"""``%tfgpu``: parse a line, call the core, render the result. Every user mistake is a one-line
``UsageError`` starting ``tfgpu:``; nothing here decides what a setting means."""

from __future__ import annotations

import argparse
import contextlib
import sys

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser, argument, magic_arguments
from IPython.display import display
from IPython.utils.text import dedent
from traitlets import Bool, Int, observe

from . import state as state_module
from .control import Change, Controller, default_controller
from .export import render_tf1, render_tf2
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
)
from .runtime import Outcome, TFState, probe

USAGE = """\
%tfgpu [status]                      TensorFlow's state, the settings and what became of them, the devices
%tfgpu devices                       physical and logical devices; GPUs with physical index and TF name
%tfgpu visible SPEC [--min-free SIZE]  SPEC: 0 | 1,3 | all | none | auto | auto:N (physical indices)
%tfgpu growth on|off                 memory growth on every visible GPU
%tfgpu limit SIZE|off [--gpu I]      memory cap: 1024 (MiB), 1.5GB, 2GiB, 512MiB or 40% of the GPU
%tfgpu virtual NxSIZE|SIZE,...|off [--gpu I]  split a GPU into logical GPUs, e.g. 2x2GB
%tfgpu cpus N|off                    split the CPU into N logical devices (placement lessons without a GPU)
%tfgpu placement on|off|show|clear   capture TensorFlow's placement log into the notebook
%%tfgpu device DEVICE                run the cell under tf.device(DEVICE) and show where its ops ran
%tfgpu memory [--reset]              TensorFlow allocator memory per logical device: current and peak
%tfgpu export [--tf1]                the settings as plain Python to paste into a script
strategy = %tfgpu strategy           a MirroredStrategy over the logical devices
%tfgpu reset                         drop settings that have not taken effect yet
%tfgpu help                          this text

Configuring magics take effect when TensorFlow is imported (run them first); after TensorFlow's first
operation a changed setting is refused: restart the kernel and put the magic first.
GB means GiB (1024 MiB). GPU indices are nvidia-smi's; every view also shows TensorFlow's GPU:N."""

SUBCOMMANDS = ("status", "devices", "visible", "growth", "limit", "virtual", "cpus", "placement", "device",
               "memory", "export", "strategy", "reset", "help")


class _Parser(MagicArgumentParser):
    """argparse whose every complaint is one ``tfgpu:`` line with the usage of that subcommand."""

    def error(self, message):
        usage = " ".join(self.format_usage().split()).replace("usage: ", "")
        raise UsageError(f"tfgpu: {self.prog.replace('%tfgpu ', '')}: {message}; usage: {usage}")


def _parser(name: str, value: str | None = None, value_help: str = "", gpu: bool = False) -> _Parser:
    parser = _Parser(prog=f"%tfgpu {name}", add_help=False, formatter_class=argparse.HelpFormatter)
    if value:
        parser.add_argument(value, help=value_help)
    if gpu:
        parser.add_argument("--gpu", default=None, help="physical GPU index; default: every visible GPU")
    return parser


_PARSERS = {
    "visible": _parser("visible", "spec"),
    "growth": _parser("growth", "state"),
    "limit": _parser("limit", "size", gpu=True),
    "virtual": _parser("virtual", "spec", gpu=True),
    "cpus": _parser("cpus", "count"),
}
_PARSERS["visible"].add_argument("--min-free", default=None, help="with auto: only GPUs with this much free")
for _name in ("status", "reset", "help", "strategy"):
    _PARSERS[_name] = _parser(_name)
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


@magics_class
class TfgpuMagics(Magics):
    """The ``%tfgpu`` magic. Options a user sets once per machine are traitlets: set them with
    ``%config TfgpuMagics.default_growth = True`` or in ``ipython_config.py``."""

    default_growth = Bool(False, help="Turn memory growth on when the extension loads.").tag(config=True)
    default_cpus = Int(0, help="Split the CPU into this many logical devices when the extension loads "
                              "(0: leave TensorFlow's default).").tag(config=True)
    quiet = Bool(False, help="Do not print a line after each configuring magic.").tag(config=True)

    def __init__(self, shell=None, controller: Controller | None = None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self.controller = controller or default_controller()
        self.placement = None  # the placement face, attached by load_extension when available

    # -- traitlets ---------------------------------------------------------------------------------
    def apply_defaults(self) -> None:
        if self.default_growth and self.controller.plan.growth is None:
            self._configure("growth", True, "%tfgpu growth on")
        if self.default_cpus and self.controller.plan.cpus is None:
            self._configure("cpus", self.default_cpus, f"%tfgpu cpus {self.default_cpus}")

    @observe("default_growth", "default_cpus")
    def _defaults_changed(self, change):
        if self.shell is not None:
            try:
                self.apply_defaults()
            except UsageError as err:
                print(err, file=sys.stderr)

    # -- the magic ---------------------------------------------------------------------------------
    @magic_arguments()
    @argument("subcommand", nargs="?", default="status", help="one of: " + ", ".join(SUBCOMMANDS))
    @argument("args", nargs=argparse.REMAINDER, help="the subcommand's arguments (`%%tfgpu help`)")
    @line_cell_magic
    def tfgpu(self, line: str = "", cell: str | None = None):
        """Configure TensorFlow's GPUs before its first use, and see its devices, memory and placement.

        See `%tfgpu help` for every subcommand."""
        words = line.split()
        name, argv = (words[0].lower(), words[1:]) if words else ("status", [])
        if cell is not None and name != "device":
            raise UsageError(f"tfgpu: {name!r} is a line magic; only `%%tfgpu device DEVICE` takes a cell")
        if name not in SUBCOMMANDS:
            raise UsageError(f"tfgpu: unknown subcommand {name!r}; valid: {', '.join(SUBCOMMANDS)} "
                             "(`%tfgpu help` explains each)")
        handler = getattr(self, f"_cmd_{name}")
        try:
            if name in ("placement", "device"):
                return handler(argv, cell)
            return handler(_PARSERS[name].parse_args(argv), line)
        except PlanError as err:
            raise UsageError(str(err)) from None

    # -- configuring -------------------------------------------------------------------------------
    def _configure(self, setting: str, value, command: str, gpu=ALL) -> Outcome:
        try:
            outcome = self.controller.change(Change(setting, value, gpu, command))
        except PlanError as err:
            raise UsageError(str(err)) from None
        if not self.quiet:
            print(_outcome_line(command, outcome))
        return outcome

    @staticmethod
    def _gpu(args) -> int | str:
        return ALL if args.gpu is None else parse_index(args.gpu)

    def _cmd_visible(self, args, line):
        spec = parse_visible(args.spec)
        if args.min_free is not None:
            if spec.auto is None:
                raise PlanError(f"--min-free {args.min_free} only goes with auto or auto:N, not {args.spec!r}")
            spec = VisibleSpec(auto=spec.auto, min_free_mib=parse_size(args.min_free, allow_percent=False,
                                                                       what="--min-free size"))
        self._configure("visible", spec, f"%tfgpu {line.strip()}")

    def _cmd_growth(self, args, line):
        self._configure("growth", parse_on_off(args.state, what="growth"), f"%tfgpu {line.strip()}")

    def _cmd_limit(self, args, line):
        size = None if args.size.lower() == "off" else parse_size(args.size, what="limit")
        self._configure("limit", size, f"%tfgpu {line.strip()}", self._gpu(args))

    def _cmd_virtual(self, args, line):
        sizes = None if args.spec.lower() == "off" else parse_virtual(args.spec)
        self._configure("virtual", sizes, f"%tfgpu {line.strip()}", self._gpu(args))

    def _cmd_cpus(self, args, line):
        count = None if args.count.lower() == "off" else parse_count(args.count, what="CPU count")
        self._configure("cpus", count, f"%tfgpu {line.strip()}")

    def _cmd_reset(self, args, line):
        dropped = self.controller.reset()
        print("tfgpu: reset: " + (f"dropped {', '.join(dropped)}" if dropped else "nothing was waiting"))

    # -- views -------------------------------------------------------------------------------------
    def snapshot(self, list_devices: bool = False) -> state_module.Snapshot:
        placement = self.placement.status() if self.placement is not None else None
        return state_module.take(self.controller, list_devices=list_devices, placement=placement)

    def _cmd_status(self, args, line):
        snap = self.snapshot()
        if args.json:
            return snap.to_dict()
        display(snap)

    def _cmd_devices(self, args, line):
        snap = self.snapshot(list_devices=True)
        if args.json:
            return snap.to_dict()
        text = "\n".join([snap.tf_line(), *snap.device_lines(), *snap.gpu_lines()])
        display({"text/plain": text, "text/html": state_module._html_block(text)}, raw=True)

    def _cmd_memory(self, args, line):
        state = probe().state
        if args.reset and state >= TFState.INITIALIZED:
            tf = sys.modules["tensorflow"]
            for device in tf.config.list_logical_devices():
                if device.device_type in ("GPU", "CPU"):
                    # CPUs share one allocator, and some builds do not track it at all.
                    with contextlib.suppress(ValueError, RuntimeError):
                        tf.config.experimental.reset_memory_stats(device.name)
        text = "\n".join(self.snapshot().memory_lines())
        display({"text/plain": text, "text/html": state_module._html_block(text)}, raw=True)

    def _cmd_export(self, args, line):
        plan = self.controller.plan
        totals = {}
        if plan.limits or plan.virtual:
            snap = self.controller.nvml()
            totals = {g.index: g.memory_total_mib for g in snap.gpus if isinstance(g.memory_total_mib, int)}
        placement = bool(self.placement and self.placement.status().get("on"))
        render = render_tf1 if args.tf1 else render_tf2
        print(render(plan, totals, placement=placement), end="")

    def _cmd_strategy(self, args, line):
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

    def _cmd_help(self, args, line):
        print(USAGE)

    # -- placement: its own face -------------------------------------------------------------------
    def _cmd_placement(self, argv, cell):
        if self.placement is None:
            raise UsageError("tfgpu: placement capture is not available in this installation")
        return self.placement.command(argv)

    def _cmd_device(self, argv, cell):
        if cell is None:
            raise UsageError("tfgpu: device runs a cell: write `%%tfgpu device /GPU:0` as the cell's first line")
        if len(argv) != 1:
            raise UsageError(f"tfgpu: device takes one device like /GPU:0 or /CPU:1, got {' '.join(argv)!r}")
        if self.placement is None:
            raise UsageError("tfgpu: placement capture is not available in this installation")
        return self.placement.run_cell_on_device(argv[0], cell)


TfgpuMagics.tfgpu.__doc__ = dedent(TfgpuMagics.tfgpu.__doc__ or "") + "\n" + USAGE

_loaded: dict[int, TfgpuMagics] = {}


def load_extension(shell) -> None:
    if id(shell) in _loaded:
        return
    magics = TfgpuMagics(shell=shell)
    shell.register_magics(magics)
    shell.configurables.append(magics)
    try:
        from .placement_magic import PlacementController
    except ImportError:
        PlacementController = None
    if PlacementController is not None:
        magics.placement = PlacementController(shell)
        magics.placement.register()
    _loaded[id(shell)] = magics
    magics.apply_defaults()


def unload_extension(shell) -> None:
    magics = _loaded.pop(id(shell), None)
    if magics is None:
        return
    if magics.placement is not None:
        magics.placement.unregister()
    if probe().state < TFState.IMPORTED and not magics.controller.plan.is_empty():
        dropped = magics.controller.reset()
        print(f"tfgpu: unloaded; dropped settings that had not taken effect: {', '.join(dropped)}")
    magics.controller.unhook()
    for kind in ("line", "cell"):
        shell.magics_manager.magics[kind].pop("tfgpu", None)
    if magics in shell.configurables:
        shell.configurables.remove(magics)


__all__ = ["TfgpuMagics", "load_extension", "unload_extension"]
