"""The words every view uses for a state and for a value that is missing: one vocabulary, so the text views,
the HTML views, the panel and the sidebar (which gets these through the comm's data and the server's answer,
``to_dict()``, never its own copy) call one state by one name.

Keys are what the data carries (``Outcome.to_dict()["status"]``, the snapshot's ``tensorflow.state``); the
words are what a person reads. A level says how a view colours a state: ``ok``, ``info``, ``warn`` or ``error``.
"""

from __future__ import annotations

from typing import Any

from .i18n import N_, _, ngettext

# What became of a setting (runtime.Status, by its lower-cased name).
SETTING_STATES: dict[str, tuple[str, str]] = {
    "applied": (N_("applied"), "ok"),
    "unchanged": (N_("already in force"), "ok"),
    "pending": (N_("waiting for import"), "info"),
    "no_gpu": (N_("no GPU to apply to"), "warn"),
    "refused": (N_("refused"), "error"),
    "no_device": (N_("no such device"), "error"),
    "failed": (N_("failed"), "error"),
    "not_asked": (N_("not asked"), "info"),  # no setting made: the value in force is TensorFlow's default
    "notebook": (N_("set by the notebook"), "info"),  # the notebook's own tf.config call, read back from TensorFlow
}

# TensorFlow's state in this kernel (runtime.TFState, by its lower-cased name).
TF_STATES: dict[str, str] = {
    "not_installed": N_("not installed"),
    "not_imported": N_("not imported"),
    "importing": N_("being imported"),
    "imported": N_("imported"),
    "enumerated": N_("devices listed"),
    "initialized": N_("initialized"),
}

# A value that could not be read: this word, then its reason in parentheses where one is known.
_MISSING = N_("n/a")
# Why NVML could not give a value (nvml.REASONS), for a reason that came without NVML's own words.
MISSING_REASONS: dict[str, str] = {
    "not_supported": N_("not supported"),
    "no_permission": N_("no permission"),
    "gpu_lost": N_("GPU lost"),
    "function_not_found": N_("not in this driver"),
    "error": N_("NVML error"),
}
# Where the GPU memory a kernel holds was read (the snapshot's kernel_gpu_memory[].source).
MEMORY_SOURCES: dict[str, str] = {
    "nvml_process": N_("NVML's process list"),
    "tensorflow_allocator": N_("TensorFlow's allocator"),
}
# A GPU or process whose name could not be read: shown by its number, with this word for the name.
_NO_NAME = N_("unnamed")


def __getattr__(name: str) -> str:
    """``words.MISSING`` and ``words.NO_NAME``: the word in the language now in force (core/i18n.py)."""
    if name == "MISSING":
        return _(_MISSING)
    if name == "NO_NAME":
        return _(_NO_NAME)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def setting_state(status: str) -> str:
    """``"pending"`` -> ``"waiting for import"``; a status this file does not know reads as its own name."""
    known = SETTING_STATES.get(status)
    return _(known[0]) if known else status.replace("_", " ")


def setting_level(status: str) -> str:
    return SETTING_STATES.get(status, ("", "info"))[1]


def tf_state(state: str) -> str:
    return _(TF_STATES[state]) if state in TF_STATES else state.replace("_", " ")


def memory_source(source: str) -> str:
    return _(MEMORY_SOURCES[source]) if source in MEMORY_SOURCES else source.replace("_", " ")


def why(reason: str = "", detail: str = "") -> str:
    """Why a value is missing: NVML's own words, else the vocabulary's for its reason ("" when neither is known)."""
    return detail or (_(MISSING_REASONS[reason]) if reason in MISSING_REASONS else reason.replace("_", " "))


def missing(reason: str = "", detail: str = "") -> str:
    """``n/a``, ``n/a (no permission)``, or ``n/a (NVML's own words)``."""
    because = why(reason, detail)
    word = _(_MISSING)
    return _("{missing} ({why})").format(missing=word, why=because) if because else word


def to_dict() -> dict[str, Any]:
    """The vocabulary as the comm's state and the server's answer carry it (key ``words``), for the sidebar."""
    return {
        "setting_states": {k: {"words": _(w), "level": lv} for k, (w, lv) in SETTING_STATES.items()},
        "tf_states": {k: _(w) for k, w in TF_STATES.items()},
        "missing": _(_MISSING),
        "missing_reasons": {k: _(w) for k, w in MISSING_REASONS.items()},
        "no_name": _(_NO_NAME),
        "memory_sources": {k: _(w) for k, w in MEMORY_SOURCES.items()},
    }


# Why memory could not be given to anybody, by the PID view's mode (pidns): said after the line's figures.
UNATTRIBUTED_WHY: dict[str, str] = {
    "none": N_("its PID namespace differs from the driver's"),
    "host_proc": N_("they are not in this PID namespace and the host /proc does not show them"),
}


def unattributed_line(count: int, used_mib: int | None, who: str, view: str) -> str:
    """"12,288 MiB held by 2 processes this server cannot attribute: its PID namespace differs from the driver's".
    ``who``: "this server" or "this kernel"; ``view``: the PID view's mode; ``used_mib`` None: NVML gave no figure."""
    held = f"{used_mib:,} MiB" if isinstance(used_mib, int) else _("memory (NVML gives no figure)")
    because = _(UNATTRIBUTED_WHY.get(view, UNATTRIBUTED_WHY["none"]))
    line = ngettext("{held} held by {count} process {who} cannot attribute: {why}",
                    "{held} held by {count} processes {who} cannot attribute: {why}", count)
    return line.format(held=held, count=count, who=who, why=because)
