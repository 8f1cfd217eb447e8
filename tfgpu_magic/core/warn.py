"""The package's own warning class, and warnings that point at the user's line rather than ours."""

from __future__ import annotations

import sys


class TfgpuWarning(UserWarning):
    """Warnings this package raises (a setting that could not take effect, a conflicting env var)."""


# Frames a warning must not point at: ours, and the machinery between the user's line and us.
_NOT_THE_USER = ("tfgpu_magic", "importlib", "IPython", "traitlets", "decorator", "tensorflow", "keras", "tf_keras")


def warn(message: str) -> None:
    """Warn with the location of the user's own line (the cell, the script), not of this package's
    source: the frame that called into tfgpu, or that imported TensorFlow."""
    import warnings

    def internal(frame) -> bool:  # the frames `warnings` itself leaves out when it counts stacklevel
        name = frame.f_code.co_filename
        return "importlib" in name and "_bootstrap" in name

    frame, level = sys._getframe(1), 2
    while frame is not None and (frame.f_globals.get("__name__") or "").split(".")[0] in _NOT_THE_USER:
        frame = frame.f_back
        while frame is not None and internal(frame):
            frame = frame.f_back
        level += 1
    warnings.warn(message, TfgpuWarning, stacklevel=level if frame is not None else 2)
