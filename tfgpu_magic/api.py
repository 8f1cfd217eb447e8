"""The Python API: the configuring magics' forms as keyword arguments, through the same parsers (core/changes.py)
and the same controller; the snapshot with its views."""

from __future__ import annotations

from .core.changes import from_keywords
from .core.control import default_controller
from .core.runtime import Outcome
from .render.snapshot import ShownSnapshot, take


def configure(*, visible=None, growth=None, limit=None, virtual=None, cpus=None, cpumem=None,
              gpu=None, min_free=None, wait=None) -> tuple[Outcome, ...]:
    changes = from_keywords(visible=visible, growth=growth, limit=limit, virtual=virtual, cpus=cpus, cpumem=cpumem,
                            gpu=gpu, min_free=min_free, wait=wait)
    # All or nothing before import: one bad value puts the plan and the environment back. A refusal as too late
    # is recorded by the controller, so the panel and the sidebar offer "Restart kernel and apply" for it.
    return default_controller().change_all(changes)


def snapshot(*, list_devices: bool = False) -> ShownSnapshot:
    return take(list_devices=list_devices)
