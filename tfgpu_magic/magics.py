"""``%tfgpu``: the IPython face. Loading it is cheap: the subcommands and the core they call are
imported on the first ``%tfgpu`` call (see commands.py). Every user mistake is a one-line
``UsageError`` starting ``tfgpu:``; nothing here decides what a setting means."""

from __future__ import annotations

import argparse
import sys

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.text import dedent
from traitlets import Bool, Int, observe

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



@magics_class
class TfgpuMagics(Magics):
    """The ``%tfgpu`` magic. Options a user sets once per machine are traitlets: set them with
    ``%config TfgpuMagics.default_growth = True`` or in ``ipython_config.py``."""

    default_growth = Bool(False, help="Turn memory growth on when the extension loads.").tag(config=True)
    default_cpus = Int(0, help="Split the CPU into this many logical devices when the extension loads "
                              "(0: leave TensorFlow's default).").tag(config=True)
    quiet = Bool(False, help="Do not print a line after each configuring magic.").tag(config=True)

    def __init__(self, shell=None, controller=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self._controller = controller
        self.placement = None  # the placement face, attached by load_extension when available

    @property
    def controller(self):
        if self._controller is None:
            from .control import default_controller

            self._controller = default_controller()
        return self._controller

    @controller.setter
    def controller(self, value):
        self._controller = value

    # -- traitlets ---------------------------------------------------------------------------------
    def apply_defaults(self) -> None:
        if not (self.default_growth or self.default_cpus):
            return  # the usual case: keep %load_ext from importing the core
        from .commands import _configure

        if self.default_growth and self.controller.plan.growth is None:
            _configure(self, "growth", True, "%tfgpu growth on")
        if self.default_cpus and self.controller.plan.cpus is None:
            _configure(self, "cpus", self.default_cpus, f"%tfgpu cpus {self.default_cpus}")

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
        from .commands import dispatch

        return dispatch(self, line, cell)

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
    if magics._controller is not None:
        _drop_pending(magics.controller)
    for kind in ("line", "cell"):
        shell.magics_manager.magics[kind].pop("tfgpu", None)
    if magics in shell.configurables:
        shell.configurables.remove(magics)


def _drop_pending(controller) -> None:
    """Without the extension nothing would report on settings waiting for import: drop them, say so,
    and remove the import hook."""
    from .runtime import TFState

    if controller.probe().state < TFState.IMPORTED and not controller.plan.is_empty():
        dropped = controller.reset()
        print(f"tfgpu: unloaded; dropped settings that had not taken effect: {', '.join(dropped)}")
    controller.unhook()


__all__ = ["TfgpuMagics", "load_extension", "unload_extension"]
