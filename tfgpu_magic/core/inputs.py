"""Reading numbers and quoting values in messages, for every parser. Tiny and dataclass-free, so the
placement face can use it at ``%load_ext`` without loading the core (plan.py re-exports it)."""

from __future__ import annotations

import re

# TensorFlow parses device and GPU indices as 32-bit ints.
MAX_INDEX = (1 << 31) - 1
_SHOWN_CHARS = 40
# The words a switch takes, in the magic (`growth on`) and in a traitlets option alike.
ON_WORDS = ("on", "true", "1", "yes")
OFF_WORDS = ("off", "false", "0", "no")


def shown(text: object) -> str:
    """A value as an error message quotes it: ``repr``, shortened when long (a 100 KB argument is not
    echoed back whole)."""
    text = str(text)
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return repr(text[:_SHOWN_CHARS]) + f"... ({len(text):,} characters)"


# C0 controls, DEL and C1 controls: what a terminal acts on (ESC starts its escape sequences; C1's CSI does too);
# and the Unicode line and paragraph separators, where IPython splits a cell's lines as at a newline.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a control character (printable would escape it)."""
    return _CONTROLS.search(text) is not None


def printable(text: object) -> str:
    """``text`` with every control character written as Python does (``\\x1b``), so a name from NVML or /proc
    (any user can name their process) cannot clear a reader's terminal or set its title. Idempotent."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 0x100 else
                         f"\\u{ord(m.group(0)):04x}", str(text))


def short_repr(value: object) -> str:
    """``repr(value)`` cut at the same length, for values that are not text (a config option's)."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def whole_number(text: str, *, low: int = 0, high: int = MAX_INDEX) -> int | None:
    """``text`` as an int in [low, high], or None. Never converts an overlong digit string (Python refuses
    those past 4,300 digits, and no valid value has more digits than ``high``)."""
    t = text.strip()
    negative = t.startswith("-")
    digits = t[1:] if negative else t
    if not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(max(abs(low), abs(high)))):
        return None
    value = -int(significant) if negative else int(significant)
    return value if low <= value <= high else None


__all__ = ["MAX_INDEX", "OFF_WORDS", "ON_WORDS", "printable", "short_repr", "shown", "whole_number"]
