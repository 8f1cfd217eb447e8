"""The ``%tfgpu`` subcommand table, written once: usage, the subcommands, what ``help`` says of each, the words
Tab offers, and (built on first use) the argument parsers. The router (commands.py), the magic's docstring
(magics.py), ``%tfgpu help`` and the completer (completion.py) all read it from here.

Plain data at import: ``%load_ext`` reads the usage and the names; the parsers, which load the core, are made
by the first ``%tfgpu`` call or Tab.
"""

from __future__ import annotations

import functools
import re
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.changes import ArgParser

_HEAD = """\
%tfgpu [status]                      TensorFlow's state, the settings and what became of them, the devices
%tfgpu devices                       physical and logical devices; GPUs with physical index and TF name"""
_TAIL = """\
%tfgpu placement on|off|show|clear   capture TensorFlow's placement log into the notebook
%%tfgpu device DEVICE                run the cell under tf.device(DEVICE) and show where its ops ran
%tfgpu memory [--reset]              TensorFlow allocator memory per device, current and peak; recent cells
%tfgpu oom                           the last out-of-memory card again: the ask, who holds it, what to do
%tfgpu free [--keras]                let go of what the last error keeps alive; the memory before and after
%tfgpu panel [--close]               the live panel: devices, memory over time, cells, placement, controls
%tfgpu log [quiet|all|raw]           TensorFlow's own log: the recent cells' full text, or how cells show it
%tfgpu export [--tf1]                the settings as plain Python to paste into a script
strategy = %tfgpu strategy           a MirroredStrategy over the logical devices
%tfgpu reset                         drop settings that have not taken effect yet
%tfgpu help [SUBCOMMAND]             this text, or one subcommand's usage and examples (also %tfgpu NAME?)

Configuring magics take effect when TensorFlow is imported (run them first); after TensorFlow's first
operation a changed setting is refused: restart the kernel and put the magic first.
GB means GiB (1024 MiB). GPU indices are nvidia-smi's; every view also shows TensorFlow's GPU:N."""
_COLUMN = 37  # where a usage line's summary starts, unless its left part is longer


def usage() -> str:
    """The usage table: the views, each registered setting's line (core/settings/), then the rest."""
    from ..core import settings as registry

    lines = [f"{s.words.usage:<{_COLUMN - 1}} {s.words.summary}" if len(s.words.usage) < _COLUMN - 1
             else f"{s.words.usage}  {s.words.summary}" for s in registry.settings()]
    return "\n".join([_HEAD, *lines, _TAIL])


_BEFORE = ("status", "devices")
_AFTER = ("placement", "device", "memory", "oom", "free", "panel", "log", "export", "strategy", "reset", "help")


def subcommands() -> tuple[str, ...]:
    from ..core import settings as registry

    return (*_BEFORE, *registry.names(), *_AFTER)


def __getattr__(name: str):
    # The table as it is now: a setting registered after import (a test's) is in it.
    if name == "USAGE":
        return usage()
    if name == "SUBCOMMANDS":
        return subcommands()
    raise AttributeError(name)


# What `%tfgpu help NAME` says beyond the usage line: why one would run it, and examples.
DETAILS: dict[str, tuple[str, tuple[str, ...]]] = {
    "status": ("Whether TensorFlow is imported or running, each setting asked for and what became of it, "
               "and one line per device. --json returns the same as a dict.",
               ("%tfgpu", "%tfgpu status --json")),
    "devices": ("Every physical and logical device; each GPU with nvidia-smi's index, TensorFlow's GPU:N, "
                "memory, utilization and processes.",
                ("%tfgpu devices", "info = %tfgpu devices --json")),
    "placement": ("Capture TensorFlow's placement log into the notebook: each cell then shows where its ops "
                  "ran. show lists the records kept, filtered by --device, --op, --cell, without TensorFlow's internal "
                  "ones (_Arg, _Retval, a oneDNN _Mkl op beside the op it stands for) unless --all; clear drops "
                  "them.",
                  ("%tfgpu placement on", "%tfgpu placement show --device GPU:0 --op MatMul",
                   "%tfgpu placement status")),
    "device": ("A cell magic: runs the cell under tf.device(DEVICE) and shows where each op ran, flagging "
               "any op placed elsewhere.",
               ("%%tfgpu device /GPU:0", "%%tfgpu device /CPU:1")),
    "memory": ("TensorFlow's allocator figures per logical device, current and peak; --reset starts the "
               "peaks again.",
               ("%tfgpu memory", "%tfgpu memory --reset")),
    "oom": ("When a cell runs out of memory (TensorFlow's ResourceExhaustedError, on a GPU or the CPU), a card under "
            "it says what TensorFlow asked for, this kernel's TensorFlow memory, the GPU's free memory and who holds "
            "it (other notebooks' kernels by name), the likely cause and the next steps as magics. This shows the last "
            "card again.",
            ("%tfgpu oom",)),
    "free": ("Let go of what the last error keeps alive: its traceback's frames (the failed cell's local variables), "
             "sys.last_value and IPython's reference to it; then collect garbage and, with --keras, clear Keras' "
             "session. Prints TensorFlow's bytes per device, this process's host memory and NVML's figure for it "
             "before and after. TensorFlow's GPU allocator keeps what it reserved: only a restart returns it.",
             ("%tfgpu free", "%tfgpu free --keras")),
    "panel": ("The live panel (ipywidgets): devices in both numberings, each GPU's memory (what TensorFlow reserved "
              "against what it uses) with a chart of the last minutes, the recent cells' memory, the placement log, "
              "and controls for the settings while they can still change. It refreshes while cells run; --close "
              "closes every panel and stops the refresh. In a terminal it prints the status.",
              ("%tfgpu panel", "%config TfgpuMagics.refresh_interval = 2.0", "%tfgpu panel --close")),
    "log": ("TensorFlow's own log under each cell: quiet folds information and shows warnings and errors, "
            "all shows every line, raw leaves it as TensorFlow writes it. Alone: the recent cells' log.",
            ("%tfgpu log", "%tfgpu log all")),
    "export": ("The settings as plain Python for a script: tf.config calls, or a tf.compat.v1 ConfigProto "
               "and Session with --tf1.",
               ("%tfgpu export", "%tfgpu export --tf1")),
    "strategy": ("A tf.distribute.MirroredStrategy over the logical GPUs (or CPUs when there is none), "
                 "returned so it can be assigned.",
                 ("strategy = %tfgpu strategy",)),
    "reset": ("Drop the settings that have not taken effect yet; what TensorFlow already applied stays.",
              ("%tfgpu reset",)),
    "help": ("Every subcommand in one table, or one subcommand's usage and examples. Tab completes "
             "subcommands, their words and GPU indices.",
             ("%tfgpu help", "%tfgpu help limit", "%tfgpu limit?")),
}


# The subcommands without a parser of their own: placement, whose words each have one ("placement show"), and
# panel, which reads its one option itself.
OWN_ARGUMENTS = ("placement", "panel")
PLACEMENT_WORDS = ("on", "off", "show", "clear", "status")
SHOW_OPTIONS = ("--device", "--op", "--cell", "--limit", "--all")
PANEL_OPTIONS = ("--close",)


def parsers() -> dict[str, ArgParser]:
    """Every subcommand's argument parser but OWN_ARGUMENTS': the registered settings' (made again when the registry
    changes, so a setting registered later is never missed), the views' and the placement words'."""
    from ..core.changes import parsers as setting_parsers

    return {**setting_parsers(), **_view_parsers(), **_placement_parsers()}


@functools.cache
def _view_parsers() -> dict[str, ArgParser]:
    """The views' own parsers, made once, on first use."""
    from ..core.changes import ArgParser

    made: dict[str, ArgParser] = {}
    for name in ("status", "devices", "reset", "help", "strategy", "memory", "export", "oom", "free"):
        made[name] = ArgParser(name)
    made["help"].add_argument("subcommand", nargs="?", default=None, help="the subcommand to explain, with examples")
    made["devices"].add_argument("--json", action="store_true")
    made["status"].add_argument("--json", action="store_true")
    made["memory"].add_argument("--reset", action="store_true", help="reset the peak figures")
    made["export"].add_argument("--tf1", action="store_true", help="ConfigProto + Session instead of tf.config")
    made["free"].add_argument("--keras", action="store_true", help="also clear Keras' session (its models, layers)")
    return made


@functools.cache
def _placement_parsers() -> dict[str, ArgParser]:
    """The placement face's: each placement word's ("placement show"), log's and device's, saying each mistake as
    these words always have (placement_args.py). Made once, on first use."""
    from ..core.tflog import MODES
    from .placement_args import device_parser, log_parser, no_arguments, show_parser

    made: dict[str, ArgParser] = {f"placement {word}": no_arguments(f"placement {word}") for word in PLACEMENT_WORDS}
    made["placement show"] = show_parser(SHOW_OPTIONS)
    made["log"] = log_parser(MODES)
    made["device"] = device_parser()
    return made


def subcommand_help(name: str) -> str:
    """``%tfgpu help NAME``: its lines of the usage table, what it is for, its options and examples."""
    pattern = re.compile(rf"%%?tfgpu \[?{re.escape(name)}\b")
    lines = [line for line in usage().splitlines() if pattern.search(line)]
    from ..core import settings as registry

    setting = next((s for s in registry.settings() if s.name == name), None)
    explanation, examples = (setting.words.help, setting.words.examples) if setting else DETAILS.get(name, ("", ()))
    if explanation:
        lines += ["", textwrap.fill(explanation, width=100)]
    parser = parsers().get(name)
    if parser is not None:
        lines += ["", parser.format_help().strip()]
    if examples:
        lines += ["", "examples:", *(f"  {example}" for example in examples)]
    return "\n".join(lines)
