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

USAGE = """\
%tfgpu [status]                      TensorFlow's state, the settings and what became of them, the devices
%tfgpu devices                       physical and logical devices; GPUs with physical index and TF name
%tfgpu visible SPEC [--min-free SIZE] [--wait TIME]  SPEC: 0 | 1,3 | all | none | auto | auto:N
%tfgpu growth on|off                 memory growth on every visible GPU
%tfgpu limit SIZE|off [--gpu I]      memory cap: 1024 (MiB), 1.5GB, 2GiB, 512MiB or 40% of the GPU
%tfgpu virtual NxSIZE|SIZE,...|off [--gpu I]  split a GPU into logical GPUs, e.g. 2x2GB
%tfgpu cpus N|off                    split the CPU into N logical devices (placement lessons without a GPU)
%tfgpu cpumem on|off                 TensorFlow's CPU allocator keeps memory figures (per-cell memory, no GPU)
%tfgpu placement on|off|show|clear   capture TensorFlow's placement log into the notebook
%%tfgpu device DEVICE                run the cell under tf.device(DEVICE) and show where its ops ran
%tfgpu memory [--reset]              TensorFlow allocator memory per device, current and peak; recent cells
%tfgpu panel [--close]               the live panel: devices, memory over time, cells, placement, controls
%tfgpu log [quiet|all|raw]           TensorFlow's own log: the recent cells' full text, or how cells show it
%tfgpu export [--tf1]                the settings as plain Python to paste into a script
strategy = %tfgpu strategy           a MirroredStrategy over the logical devices
%tfgpu reset                         drop settings that have not taken effect yet
%tfgpu help [SUBCOMMAND]             this text, or one subcommand's usage and examples (also %tfgpu NAME?)

Configuring magics take effect when TensorFlow is imported (run them first); after TensorFlow's first
operation a changed setting is refused: restart the kernel and put the magic first.
GB means GiB (1024 MiB). GPU indices are nvidia-smi's; every view also shows TensorFlow's GPU:N."""

SUBCOMMANDS = ("status", "devices", "visible", "growth", "limit", "virtual", "cpus", "cpumem", "placement", "device",
               "memory", "panel", "log", "export", "strategy", "reset", "help")

# What `%tfgpu help NAME` says beyond the usage line: why one would run it, and examples.
DETAILS: dict[str, tuple[str, tuple[str, ...]]] = {
    "status": ("Whether TensorFlow is imported or running, each setting asked for and what became of it, "
               "and one line per device. --json returns the same as a dict.",
               ("%tfgpu", "%tfgpu status --json")),
    "devices": ("Every physical and logical device; each GPU with nvidia-smi's index, TensorFlow's GPU:N, "
                "memory, utilization and processes.",
                ("%tfgpu devices", "info = %tfgpu devices --json")),
    "visible": ("Which physical GPUs TensorFlow may use, by nvidia-smi's numbers; auto:N takes the N freest GPUs "
                "among those that qualify: no other process computing on it (a graphics one does not count) and at "
                "least half its memory free; --min-free SIZE replaces the half. --wait waits (30s, 10m, 2h) for GPUs "
                "that qualify, showing the best so far; another kernel waiting too takes other GPUs. Without --wait, "
                "when none qualifies, auto takes the freest and says so. A kernel started with CUDA_VISIBLE_DEVICES "
                "(by Slurm, Kubernetes, a spawner) chooses among the GPUs it was given, read as CUDA reads it: up to "
                "the first entry that is no index, GPU- or MIG- UUID. Takes effect when TensorFlow is imported: run "
                "it first.",
                ("%tfgpu visible 1", "%tfgpu visible 0,2", "%tfgpu visible auto --wait 30m",
                 "%tfgpu visible auto:2 --min-free 10GB", "%tfgpu visible auto --min-free 20GB --wait 10m",
                 "%tfgpu visible 2 --min-free 20GB --wait 1h",
                 "%tfgpu visible none")),
    "growth": ("Memory growth: each GPU's memory is taken as needed instead of all at once, so other "
               "notebooks can share the GPU. Takes effect when TensorFlow is imported.",
               ("%tfgpu growth on",)),
    "limit": ("A cap on the memory TensorFlow takes on each visible GPU, or on one with --gpu; sizes in MiB "
              "unless a unit says otherwise, or a percentage of the GPU's total.",
              ("%tfgpu limit 4GB", "%tfgpu limit 40% --gpu 1", "%tfgpu limit off")),
    "virtual": ("Split a GPU into logical GPUs of the given sizes, to try multi-GPU code on one GPU.",
                ("%tfgpu virtual 2x2GB", "%tfgpu virtual 1GB,3GB --gpu 0", "%tfgpu virtual off")),
    "cpus": ("Split the CPU into N logical devices, so tf.device and MirroredStrategy lessons run without "
             "a GPU. Takes effect when TensorFlow is imported.",
             ("%tfgpu cpus 3", "%tfgpu cpus off")),
    "cpumem": ("TensorFlow's CPU allocator keeps memory figures (TF_CPU_ALLOCATOR_USE_BFC=true), so `%tfgpu memory` "
               "and the panel show per-cell memory on a machine without a GPU. Takes effect when TensorFlow's "
               "runtime starts.",
               ("%tfgpu cpumem on", "%tfgpu cpumem off")),
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


# The subcommands that read their own arguments (no parser of ours): the placement face's words, a device, a mode.
OWN_ARGUMENTS = ("placement", "device", "log", "panel")
PLACEMENT_WORDS = ("on", "off", "show", "clear", "status")
SHOW_OPTIONS = ("--device", "--op", "--cell", "--limit", "--all")
PANEL_OPTIONS = ("--close",)


@functools.cache
def parsers() -> dict[str, ArgParser]:
    """Every subcommand's argument parser but OWN_ARGUMENTS': the configuring ones are the core's (changes.py),
    the others the face's own. Made once, on first use."""
    from ..core.changes import PARSERS, ArgParser

    made: dict[str, ArgParser] = dict(PARSERS)
    for name in ("status", "devices", "reset", "help", "strategy", "memory", "export"):
        made[name] = ArgParser(name)
    made["help"].add_argument("subcommand", nargs="?", default=None, help="the subcommand to explain, with examples")
    made["devices"].add_argument("--json", action="store_true")
    made["status"].add_argument("--json", action="store_true")
    made["memory"].add_argument("--reset", action="store_true", help="reset the peak figures")
    made["export"].add_argument("--tf1", action="store_true", help="ConfigProto + Session instead of tf.config")
    return made


def subcommand_help(name: str) -> str:
    """``%tfgpu help NAME``: its lines of the usage table, what it is for, its options and examples."""
    pattern = re.compile(rf"%%?tfgpu \[?{re.escape(name)}\b")
    lines = [line for line in USAGE.splitlines() if pattern.search(line)]
    explanation, examples = DETAILS.get(name, ("", ()))
    if explanation:
        lines += ["", textwrap.fill(explanation, width=100)]
    parser = parsers().get(name)
    if parser is not None:
        lines += ["", parser.format_help().strip()]
    if examples:
        lines += ["", "examples:", *(f"  {example}" for example in examples)]
    return "\n".join(lines)
