"""tfgpu_magic: see and control TensorFlow's GPU configuration from a notebook.

Importing this package is cheap on purpose: it never imports TensorFlow, never initialises NVML and
never starts a thread. The heavy parts load on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"


class TfgpuWarning(UserWarning):
    """Warnings this package raises (a setting that could not take effect, a conflicting env var)."""


def load_ipython_extension(ipython):
    from .magics import load_extension

    load_extension(ipython)


def unload_ipython_extension(ipython):
    from .magics import unload_extension

    unload_extension(ipython)
