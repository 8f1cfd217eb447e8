"""The registry: every setting, one file each in this folder, in the order they are applied (visibility decides which
GPUs the others touch; the CPU settings; then each GPU's memory). Every face reads the settings from here: the
magic's syntax, help and Tab words, the panel's controls, ``configure()``'s keywords, the saved settings' order and
the sidebar's words (``wire_words``). Adding a setting is a file here and a line in REGISTRY."""

from __future__ import annotations

from ..plan import Plan
from .allocator import ALLOCATOR
from .base import Change, Setting, _registered
from .cpus import CPU_FIGURES, CPUS
from .growth import GROWTH
from .memory import LIMIT, VIRTUAL
from .visible import VISIBLE

REGISTRY: tuple[Setting, ...] = (VISIBLE, CPUS, CPU_FIGURES, ALLOCATOR, GROWTH, LIMIT, VIRTUAL)
_registered[:] = REGISTRY

# Saved in a notebook beside the settings, applied after them: the placement log's switch (not a TensorFlow setting).
SAVED_AFTER = ("placement",)


def settings() -> tuple[Setting, ...]:
    """The registered settings, in apply order (a test may register one more: ``register``)."""
    return tuple(_registered)


def names() -> tuple[str, ...]:
    return tuple(s.name for s in _registered)


def get(name: str) -> Setting:
    """The setting called ``name``; KeyError for none (a face checks names first, with its own message)."""
    for setting in _registered:
        if setting.name == name:
            return setting
    raise KeyError(name)


def setting_of(change: Change) -> Setting:
    return get(change.setting)


def register(setting: Setting) -> None:
    """Add ``setting`` after the others (tests: a throwaway setting seen by every face); ``unregister`` takes it out."""
    if setting.name in names():
        raise ValueError(f"a setting called {setting.name!r} is registered already")
    _registered.append(setting)


def unregister(setting: Setting) -> None:
    if setting in _registered and setting not in REGISTRY:
        _registered.remove(setting)


def asked(plan: Plan) -> list[Setting]:
    """The settings ``plan`` says something about, in the order they are applied."""
    return [s for s in _registered if s.asked(plan)]


def describe(plan: Plan) -> list[tuple[str, str]]:
    """(row key, asked value) pairs in the order they are applied: ``limit[0]`` for a per-GPU setting's GPU 0."""
    return [row for s in _registered for row in s.describe(plan)]


def saved_order() -> tuple[str, ...]:
    """The names a notebook's saved settings may carry, in the order a kernel start applies them."""
    return (*names(), *SAVED_AFTER)


def environment_notes(environ) -> list[str]:
    """Sentences on the environment variables that change what the settings do, for every view."""
    return [note for s in _registered for note in s.notes(environ)]


def wire_words() -> list[dict]:
    """What the sidebar needs of each saved setting, in the order a kernel applies them: the names, which are per
    GPU, the editor's placeholders and the usage lines."""
    words = [{"name": s.name, "per_gpu": s.per_gpu, "placeholder": s.words.placeholder, "usage": s.words.usage}
             for s in _registered]
    return [*words, *({"name": name, "per_gpu": False, "placeholder": "on|off", "usage": f"%tfgpu {name} on|off"}
                      for name in SAVED_AFTER)]
