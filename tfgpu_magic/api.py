"""The Python API: the configuring magics' forms as keyword arguments, through the same parsers (core/changes.py)
and the same controller; the snapshot with its views."""

from __future__ import annotations

import inspect

from .core import settings as registry
from .core.changes import from_keywords
from .core.control import default_controller
from .core.runtime import Outcome
from .render.snapshot import ShownSnapshot, take


def signature() -> inspect.Signature:
    """configure()'s keywords as the registry has them now: each setting, its options, and gpu."""
    names = [*registry.names(), "gpu", *(o for s in registry.settings() for o in s.options)]
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names],
                             return_annotation="tuple[Outcome, ...]")


def configure(*, gpu=None, **settings) -> tuple[Outcome, ...]:
    changes = from_keywords(gpu=gpu, **settings)
    # All or nothing before import: one bad value puts the plan and the environment back. A refusal as too late
    # is recorded by the controller, so the panel and the sidebar offer "Restart kernel and apply" for it.
    return default_controller().change_all(changes)


def snapshot(*, list_devices: bool = False) -> ShownSnapshot:
    return take(list_devices=list_devices)
