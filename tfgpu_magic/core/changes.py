"""Text to Change: the one parser set of the configuring settings.

``%tfgpu limit 2GB --gpu 1`` in a cell, ``configure(limit="2GB", gpu=1)``, a panel control, a notebook's saved
settings and the sidebar's check all become a :class:`Change` here, with the same messages. Argument
parsing is argparse's, set to raise :class:`PlanError` (one ``tfgpu:`` line with the usage) instead of
exiting; the faces turn that into their own error type (IPython's ``UsageError``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass

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
from .waiting import parse_duration


@dataclass(frozen=True)
class Change:
    """One requested change, as the faces describe it."""

    setting: str  # visible | growth | limit | virtual | cpus | cpumem
    value: object  # VisibleSpec, bool, size, sizes tuple, int, or None for off
    gpu: int | str = ALL
    command: str = ""  # how the user would type it, for messages: "%tfgpu growth on"

    @property
    def asked(self) -> str:
        """The command's argument text, as saved in a notebook: "2GB --gpu 1" for "%tfgpu limit 2GB --gpu 1"."""
        return self.command.split(" ", 2)[2] if self.command.count(" ") >= 2 else ""


class ArgParser(argparse.ArgumentParser):
    """argparse whose every complaint is one ``tfgpu:`` line (a PlanError) with the usage of that subcommand."""

    def __init__(self, name: str):
        super().__init__(prog=f"%tfgpu {name}", add_help=False, formatter_class=argparse.HelpFormatter)

    def error(self, message):
        usage = " ".join(self.format_usage().split()).replace("usage: ", "")
        # argparse quotes the user's words whole; a 100 KB word is shortened like every other bad value.
        message = _LONG_WORD.sub(lambda m: shown(m.group(0)), " ".join(message.splitlines()))
        raise PlanError(f"tfgpu: {self.prog.replace('%tfgpu ', '')}: {message}; usage: {usage}")


_LONG_WORD = re.compile(r"\S{60,}")


class Once(argparse.Action):
    """An option that may be given once: `--gpu 0 --gpu 1` is a mistake, not "the last one wins"."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest)} and {values}); give it once")
        setattr(namespace, self.dest, values)


def parser(name: str, value: str | None = None, gpu: bool = False) -> ArgParser:
    """A subcommand's parser: an optional positional ``value`` and, for per-GPU settings, ``--gpu``."""
    made = ArgParser(name)
    if value:
        made.add_argument(value)
    if gpu:
        made.add_argument("--gpu", default=None, action=Once, help="physical GPU index; default: every visible GPU")
    return made


# -- each setting: its argument text to a Change ----------------------------------------------------------
def _gpu(text: str | None) -> int | str:
    return ALL if text is None else parse_index(text)


def _off(text: str) -> bool:
    return text.lower() == "off"


def visible_change(spec: str, min_free: str | None, command: str, wait: str | None = None) -> Change:
    parsed = parse_visible(spec)
    if min_free is not None or wait is not None:
        if parsed.every or (parsed.auto is None and not parsed.indices):
            option = "--min-free" if min_free is not None else "--wait"
            raise PlanError(f"{option} goes with auto, auto:N or GPU indices, not {shown(spec)}")
        if wait is not None and parsed.auto is None and min_free is None:
            raise PlanError(f"--wait with GPU indices needs --min-free SIZE (what to wait for), like "
                            f"`%tfgpu visible {spec} --min-free 10GB --wait 10m`")
        floor = None if min_free is None else parse_size(min_free, allow_percent=False, what="--min-free size")
        parsed = VisibleSpec(indices=parsed.indices, auto=parsed.auto, min_free_mib=floor,
                             wait_s=None if wait is None else parse_duration(wait))
    return Change("visible", parsed, ALL, command)


def growth_change(state: str, command: str) -> Change:
    return Change("growth", parse_on_off(state, what="growth"), ALL, command)


def limit_change(size: str, gpu: str | None, command: str) -> Change:
    return Change("limit", None if _off(size) else parse_size(size, what="limit"), _gpu(gpu), command)


def virtual_change(spec: str, gpu: str | None, command: str) -> Change:
    return Change("virtual", None if _off(spec) else parse_virtual(spec), _gpu(gpu), command)


def cpus_change(count: str, command: str) -> Change:
    return Change("cpus", None if _off(count) else parse_count(count, what="CPU count"), ALL, command)


def cpumem_change(state: str, command: str) -> Change:
    return Change("cpumem", parse_on_off(state, what="cpumem"), ALL, command)


# The argparse form of each (the magic's), and how its parsed arguments become a Change.
PARSERS: dict[str, ArgParser] = {
    "visible": parser("visible", "spec"),
    "growth": parser("growth", "state"),
    "limit": parser("limit", "size", gpu=True),
    "virtual": parser("virtual", "spec", gpu=True),
    "cpus": parser("cpus", "count"),
    "cpumem": parser("cpumem", "state"),
}
PARSERS["visible"].add_argument("--min-free", default=None, action=Once,
                                help="auto: GPUs with this much free memory qualify, in place of half free (with "
                                     "indices: wait until they have it)")
PARSERS["visible"].add_argument("--wait", default=None, action=Once,
                                help="wait up to this long (30s, 10m, 2h) for GPUs that qualify (auto: no other "
                                     "process computing there, and half its memory free or --min-free)")

_FROM_ARGS: dict[str, Callable[[argparse.Namespace, str], Change]] = {
    "visible": lambda a, command: visible_change(a.spec, a.min_free, command, a.wait),
    "growth": lambda a, command: growth_change(a.state, command),
    "limit": lambda a, command: limit_change(a.size, a.gpu, command),
    "virtual": lambda a, command: virtual_change(a.spec, a.gpu, command),
    "cpus": lambda a, command: cpus_change(a.count, command),
    "cpumem": lambda a, command: cpumem_change(a.state, command),
}
CONFIGURING = tuple(PARSERS)


def from_args(name: str, args: argparse.Namespace, command: str) -> Change:
    """A Change from ``PARSERS[name]``'s parsed arguments; ``command`` is the line as the user typed it."""
    return _FROM_ARGS[name](args, command)


def parse_change(line: str) -> Change:
    """One configuring line (``cpus 3``, ``limit 2GB --gpu 1``) as the magic parses it, applying nothing.
    Raises PlanError with the magic's own one-line message."""
    words = line.split()
    name = words[0].lower() if words else ""
    if name not in PARSERS:
        raise PlanError(f"tfgpu: {shown(name or line)} is not a setting; valid: {', '.join(CONFIGURING)}")
    return from_args(name, PARSERS[name].parse_args(words[1:]), f"%tfgpu {line.strip()}")


# -- the Python API's keyword forms -------------------------------------------------------------------------
def keyword_text(value) -> str:
    """A keyword argument in the magic's form, so both faces share one parser and its messages."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"  # str() of a huge int raises past 4,300 digits
    if isinstance(value, (list, tuple)):
        return ",".join(keyword_text(v) for v in value)
    return str(value)


def from_keywords(*, visible=None, growth=None, limit=None, virtual=None, cpus=None, cpumem=None,
                  gpu=None, min_free=None, wait=None) -> list[Change]:
    """``configure()``'s keywords as Changes, in the order the API applies them; parses everything first, so
    one bad value raises (PlanError) before anything is applied."""
    gpu_text = None if gpu is None else keyword_text(gpu)
    if gpu_text is not None:
        parse_index(gpu_text)  # a bad --gpu is said first, whatever else is wrong
    suffix = "" if gpu is None else f" --gpu {gpu}"
    changes = []
    if (min_free is not None or wait is not None) and visible is None:
        raise PlanError("min_free and wait go with visible, like "
                        "configure(visible='auto', min_free='20GB', wait='10m')")
    if visible is not None:
        text = "none" if isinstance(visible, (list, tuple)) and not visible else keyword_text(visible)
        floor = None if min_free is None else keyword_text(min_free)
        patience = None if wait is None else keyword_text(wait)
        options = "".join(f" --{name} {value}" for name, value in (("min-free", floor), ("wait", patience)) if value)
        changes.append(visible_change(text, floor, f"%tfgpu visible {text}{options}", patience))
    if cpus is not None:
        changes.append(cpus_change(keyword_text(cpus), f"%tfgpu cpus {keyword_text(cpus)}"))
    if cpumem is not None:
        changes.append(cpumem_change(keyword_text(cpumem), f"%tfgpu cpumem {keyword_text(cpumem)}"))
    if growth is not None:
        changes.append(growth_change(keyword_text(growth), f"%tfgpu growth {keyword_text(growth)}"))
    if limit is not None:
        text = keyword_text(limit)
        changes.append(limit_change(text, gpu_text, f"%tfgpu limit {text}{suffix}"))
    if virtual is not None:
        text = keyword_text(virtual)
        changes.append(virtual_change(text, gpu_text, f"%tfgpu virtual {text}{suffix}"))
    if not changes:
        raise PlanError("configure() needs at least one of visible, growth, limit, virtual, cpus, cpumem")
    return changes
