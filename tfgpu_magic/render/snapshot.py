"""The snapshot with its views: what ``tfgpu_magic.snapshot()``, ``%tfgpu status`` and the CLI hand out.

The core's Snapshot is data; this subclass adds the text and HTML forms, so the object a user holds prints
as text in a terminal and renders as tables in a notebook, wherever it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import snapshot as core
from . import text, views


@dataclass(frozen=True)
class ShownSnapshot(core.Snapshot):
    def to_text(self) -> str:
        return text.status_text(self)

    def devices_text(self) -> str:
        return text.devices_text(self)

    def memory_lines(self) -> list[str]:
        return text.memory_lines(self)

    def _repr_pretty_(self, printer, cycle):
        printer.text(self.to_text())

    def _repr_html_(self) -> str:
        return views.status_html(self)

    def devices_html(self) -> str:
        return views.devices_html(self)

    def memory_html(self) -> str:
        return views.memory_html(self)


def take(controller=None, *, kind: type[ShownSnapshot] = ShownSnapshot, **kwargs) -> ShownSnapshot:
    """``core.snapshot.take`` (same arguments), as a ShownSnapshot or the subclass ``kind`` (the shell's)."""
    return core.take(controller, kind=kind, **kwargs)


__all__ = ["ShownSnapshot", "take"]
