"""Text to Change: the one parser set of the configuring settings, read from the registry (core/settings/).

``%tfgpu limit 2GB --gpu 1`` in a cell, ``configure(limit="2GB", gpu=1)``, a panel control, a notebook's saved
settings and the sidebar's check all become a :class:`Change` here, with the same messages. Argument
parsing is argparse's, set to raise :class:`PlanError` (one ``tfgpu:`` line with the usage) instead of
exiting; the faces turn that into their own error type (IPython's ``UsageError``).
"""

from __future__ import annotations

import argparse

from . import settings as registry
from .i18n import _
from .plan import PlanError, parse_index, shown
from .settings.base import ArgParser, Change, Once, keyword_text

__all__ = ["ArgParser", "Change", "Once", "from_args", "from_keywords", "keyword_text", "parse_change", "parsers"]


def parsers() -> dict[str, ArgParser]:
    """Each registered setting's argparse form (the magic's); made again when the registry changed (a test's
    throwaway setting), so none is ever missed."""
    key = registry.settings()
    if _made.get("key") != key:
        made = {}
        for setting in key:
            parser = made[setting.name] = ArgParser(setting.name)
            setting.add_arguments(parser)
        _made.update(key=key, parsers=made)
    return dict(_made["parsers"])


_made: dict = {}


def from_args(name: str, args: argparse.Namespace, command: str) -> Change:
    """A Change from the setting's parsed arguments; ``command`` is the line as the user typed it."""
    return registry.get(name).from_args(args, command)


def parse_change(line: str) -> Change:
    """One configuring line (``cpus 3``, ``limit 2GB --gpu 1``) as the magic parses it, applying nothing.
    Raises PlanError with the magic's own one-line message."""
    words = line.split()
    name = words[0].lower() if words else ""
    if name not in registry.names():
        raise PlanError("tfgpu: " + _("{name} is not a setting; valid: {names}").format(
            name=shown(name or line), names=", ".join(registry.names())))
    return from_args(name, parsers()[name].parse_args(words[1:]), f"%tfgpu {line.strip()}")


# -- the Python API's keyword forms -------------------------------------------------------------------------
def from_keywords(gpu=None, **keywords) -> list[Change]:
    """``configure()``'s keywords as Changes, in the order the API applies them (the registry's); parses
    everything first, so one bad value raises (PlanError) before anything is applied. A setting's options (visible's
    ``min_free`` and ``wait``) go with it."""
    settings = registry.settings()
    options = {option: setting for setting in settings for option in setting.options}
    unknown = [k for k in keywords if k not in options and k not in registry.names()]
    if unknown:
        valid = ", ".join([*registry.names(), "gpu", *options])
        raise PlanError(_("configure() got an unknown keyword {keyword}; valid: {valid}").format(
            keyword=shown(unknown[0]), valid=valid))
    gpu_text = None if gpu is None else keyword_text(gpu)
    if gpu_text is not None:
        parse_index(gpu_text)  # a bad --gpu is said first, whatever else is wrong
    for option, owner in options.items():
        if keywords.get(option) is not None and keywords.get(owner.name) is None:
            together = ", ".join(f"{o}=..." for o in owner.options)
            raise PlanError(_("{options} go with {setting}, like {example}").format(
                options=" and ".join(owner.options), setting=owner.name,
                example=f"configure({owner.name}=..., {together})"))
    changes = [setting.from_keyword(keywords[setting.name], gpu_text,
                                    {option: keywords.get(option) for option in setting.options})
               for setting in settings if keywords.get(setting.name) is not None]
    if not changes:
        raise PlanError(_("configure() needs at least one of {names}").format(names=", ".join(registry.names())))
    return changes
