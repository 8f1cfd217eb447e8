"""The Python API: the configuring magics' forms as keyword arguments, through the same controller."""

from __future__ import annotations

from .control import Change, default_controller
from .plan import ALL, PlanError, parse_count, parse_index, parse_on_off, parse_size, parse_virtual, parse_visible
from .runtime import Outcome


def _text(value) -> str:
    """A keyword argument in the magic's form, so both faces share one parser and its messages."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"  # str() of a huge int raises past 4,300 digits
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def configure(*, visible=None, growth=None, limit=None, virtual=None, cpus=None, cpumem=None,
              gpu=None) -> tuple[Outcome, ...]:
    target = ALL if gpu is None else parse_index(_text(gpu))
    suffix = "" if gpu is None else f" --gpu {gpu}"
    changes = []
    # Parse everything first: one bad value changes nothing.
    if visible is not None:
        text = "none" if isinstance(visible, (list, tuple)) and not visible else _text(visible)
        changes.append(Change("visible", parse_visible(text), ALL, f"visible {text}"))
    if cpus is not None:
        text = _text(cpus)
        changes.append(Change("cpus", None if text == "off" else parse_count(text, what="CPU count"), ALL,
                              f"cpus {text}"))
    if cpumem is not None:
        changes.append(Change("cpumem", parse_on_off(_text(cpumem), what="cpumem"), ALL, f"cpumem {_text(cpumem)}"))
    if growth is not None:
        changes.append(Change("growth", parse_on_off(_text(growth), what="growth"), ALL, f"growth {_text(growth)}"))
    if limit is not None:
        text = _text(limit)
        changes.append(Change("limit", None if text == "off" else parse_size(text, what="limit"), target,
                              f"limit {text}{suffix}"))
    if virtual is not None:
        text = _text(virtual)
        changes.append(Change("virtual", None if text == "off" else parse_virtual(text), target,
                              f"virtual {text}{suffix}"))
    if not changes:
        raise PlanError("configure() needs at least one of visible, growth, limit, virtual, cpus, cpumem")
    # All or nothing before import: one bad value puts the plan and the environment back.
    return default_controller().change_all([Change(c.setting, c.value, c.gpu, f"%tfgpu {c.command}") for c in changes])
