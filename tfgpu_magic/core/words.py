"""The words every view uses for a state and for a value that is missing: one vocabulary, so the text views,
the HTML views, the panel and the sidebar (which gets these through the comm's data and the server's answer,
``to_dict()``, never its own copy) call one state by one name.

Keys are what the data carries (``Outcome.to_dict()["status"]``, the snapshot's ``tensorflow.state``); the
words are what a person reads. A level says how a view colours a state: ``ok``, ``info``, ``warn`` or ``error``.
"""

from __future__ import annotations

from typing import Any

# What became of a setting (runtime.Status, by its lower-cased name).
SETTING_STATES: dict[str, tuple[str, str]] = {
    "applied": ("applied", "ok"),
    "unchanged": ("already in force", "ok"),
    "pending": ("waiting for import", "info"),
    "no_gpu": ("no GPU to apply to", "warn"),
    "refused": ("refused", "error"),
    "no_device": ("no such device", "error"),
    "failed": ("failed", "error"),
    "not_asked": ("not asked", "info"),  # no setting made: the value in force is TensorFlow's default
    "notebook": ("set by the notebook", "info"),  # the notebook's own tf.config call, read back from TensorFlow
}

# TensorFlow's state in this kernel (runtime.TFState, by its lower-cased name).
TF_STATES: dict[str, str] = {
    "not_installed": "not installed",
    "not_imported": "not imported",
    "importing": "being imported",
    "imported": "imported",
    "enumerated": "devices listed",
    "initialized": "initialized",
}

# A value that could not be read: this word, then its reason in parentheses where one is known.
MISSING = "n/a"
# Why NVML could not give a value (nvml.REASONS), for a reason that came without NVML's own words.
MISSING_REASONS: dict[str, str] = {
    "not_supported": "not supported",
    "no_permission": "no permission",
    "gpu_lost": "GPU lost",
    "function_not_found": "not in this driver",
    "error": "NVML error",
}
# Where the GPU memory a kernel holds was read (the snapshot's kernel_gpu_memory[].source).
MEMORY_SOURCES: dict[str, str] = {
    "nvml_process": "NVML's process list",
    "tensorflow_allocator": "TensorFlow's allocator",
}
# A GPU or process whose name could not be read: shown by its number, with this word for the name.
NO_NAME = "unnamed"


def setting_state(status: str) -> str:
    """``"pending"`` -> ``"waiting for import"``; a status this file does not know reads as its own name."""
    return SETTING_STATES.get(status, (status.replace("_", " "), "info"))[0]


def setting_level(status: str) -> str:
    return SETTING_STATES.get(status, ("", "info"))[1]


def tf_state(state: str) -> str:
    return TF_STATES.get(state, state.replace("_", " "))


def memory_source(source: str) -> str:
    return MEMORY_SOURCES.get(source, source.replace("_", " "))


def why(reason: str = "", detail: str = "") -> str:
    """Why a value is missing: NVML's own words, else the vocabulary's for its reason ("" when neither is known)."""
    return detail or MISSING_REASONS.get(reason, reason.replace("_", " "))


def missing(reason: str = "", detail: str = "") -> str:
    """``n/a``, ``n/a (no permission)``, or ``n/a (NVML's own words)``."""
    because = why(reason, detail)
    return f"{MISSING} ({because})" if because else MISSING


def to_dict() -> dict[str, Any]:
    """The vocabulary as the comm's state and the server's answer carry it (key ``words``), for the sidebar."""
    return {
        "setting_states": {k: {"words": w, "level": lv} for k, (w, lv) in SETTING_STATES.items()},
        "tf_states": dict(TF_STATES),
        "missing": MISSING,
        "missing_reasons": dict(MISSING_REASONS),
        "no_name": NO_NAME,
        "memory_sources": dict(MEMORY_SOURCES),
    }


# Why memory could not be given to anybody, by the PID view's mode (pidns): said after the line's figures.
UNATTRIBUTED_WHY: dict[str, str] = {
    "none": "its PID namespace differs from the driver's",
    "host_proc": "they are not in this PID namespace and the host /proc does not show them",
}


def unattributed_line(count: int, used_mib: int | None, who: str, view: str) -> str:
    """"12,288 MiB held by 2 processes this server cannot attribute: its PID namespace differs from the driver's".
    ``who``: "this server" or "this kernel"; ``view``: the PID view's mode; ``used_mib`` None: NVML gave no figure."""
    held = f"{used_mib:,} MiB" if isinstance(used_mib, int) else "memory (NVML gives no figure)"
    processes = "1 process" if count == 1 else f"{count} processes"
    return f"{held} held by {processes} {who} cannot attribute: {UNATTRIBUTED_WHY.get(view, UNATTRIBUTED_WHY['none'])}"
