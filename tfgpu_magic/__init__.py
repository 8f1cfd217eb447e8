"""tfgpu_magic: see and control TensorFlow's GPU configuration from a notebook.

Importing this package is cheap on purpose: it never imports TensorFlow, never initialises NVML and
never starts a thread. The heavy parts load on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"


class TfgpuWarning(UserWarning):
    """Warnings this package raises (a setting that could not take effect, a conflicting env var)."""


# Frames a warning must not point at: ours, and the machinery between the user's line and us.
_NOT_THE_USER = ("tfgpu_magic", "importlib", "IPython", "traitlets", "decorator", "tensorflow", "keras", "tf_keras")


def warn(message: str) -> None:
    """Warn with the location of the user's own line (the cell, the script), not of this package's
    source: the frame that called into tfgpu, or that imported TensorFlow."""
    import sys
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


def load_ipython_extension(ipython):
    from .magics import load_extension

    load_extension(ipython)


def unload_ipython_extension(ipython):
    from .magics import unload_extension

    unload_extension(ipython)


def configure(*, visible=None, growth=None, limit=None, virtual=None, cpus=None, gpu=None):
    """The configuring magics as one call: ``configure(cpus=3, growth=True, limit="2GB")``.

    Values take the magics' forms (``visible="1,3"`` or ``[1, 3]``, ``limit="40%"`` or MiB as an
    int, ``virtual="2x2GB"``, ``"off"``). Returns one Outcome per setting given; a bad value raises
    ``ValueError`` (a ``PlanError``) before anything changes."""
    from .api import configure as _configure

    return _configure(visible=visible, growth=growth, limit=limit, virtual=virtual, cpus=cpus, gpu=gpu)


def snapshot(*, list_devices=False):
    """Everything the kernel knows now, as one object with ``to_dict()``, ``to_text()`` and HTML."""
    from .state import take

    return take(list_devices=list_devices)


__all__ = ["TfgpuWarning", "__version__", "configure", "snapshot"]
