"""tfgpu_magic: see and control TensorFlow's GPU configuration from a notebook.

Importing this package is cheap on purpose: it never imports TensorFlow, never initialises NVML and
never starts a thread. The heavy parts load on first use.
"""

from __future__ import annotations

import _thread
import sys

__version__ = "0.1.0"


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


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt sidebar (shipped by the wheel as shared-data too)."""
    return [{"src": "labextension", "dest": "tfgpu_magic"}]


def _jupyter_server_extension_points():
    return [{"module": "tfgpu_magic"}]


def _load_jupyter_server_extension(server_app):
    # Imported here, not at package import: `%load_ext` in a kernel must not import jupyter_server or tornado.
    from .server import load

    load(server_app)


def load_ipython_extension(ipython):
    from .magics import load_extension

    load_extension(ipython)


def unload_ipython_extension(ipython):
    from .magics import unload_extension

    unload_extension(ipython)


# These run in any thread, maybe while another imports TensorFlow: they import nothing that might not be
# loaded yet (the `importlib` package itself may not be), using the always-present frozen bootstrap.
_bootstrap = sys.modules.get("_frozen_importlib")


def importing_tensorflow_elsewhere() -> bool:
    """True while another thread runs `import tensorflow` (the module is in sys.modules, half made)."""
    spec = getattr(sys.modules.get("tensorflow"), "__spec__", None)
    if not getattr(spec, "_initializing", False):
        return False
    try:  # importlib's per-module lock knows which thread is importing
        ref = _bootstrap._module_locks.get("tensorflow")
        lock = ref() if ref is not None else None
        return not (lock is not None and getattr(lock, "owner", None) == _thread.get_ident())
    except Exception:  # without that machinery, assume another thread
        return True


class _Unguarded:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_loaded_by: set[str] = set()  # the public calls whose first run, which imports the core and pynvml, is over


def _apart_from_tensorflow_import(name: str):
    """CPython's per-module import locks can deadlock when two threads import a package and its submodule
    in opposite orders: seen here when a thread's first snapshot() imported `html` (or `importlib`) while
    the main thread's `import tensorflow` reached them through setuptools. So a first call, which imports
    the core, holds importlib's own lock for `tensorflow`: it waits for an import of TensorFlow under way
    in another thread, and one starting meanwhile waits for it (re-entrant in the thread that imports
    TensorFlow, so the import hook never blocks)."""
    if name in _loaded_by:
        return _Unguarded()
    try:
        return _bootstrap._ModuleLockManager("tensorflow")
    except Exception:  # private machinery gone: go on unguarded
        return _Unguarded()


def configure(*, visible=None, growth=None, limit=None, virtual=None, cpus=None, cpumem=None, gpu=None):
    """The configuring magics as one call: ``configure(cpus=3, growth=True, limit="2GB")``.

    Values take the magics' forms (``visible="1,3"`` or ``[1, 3]``, ``limit="40%"`` or MiB as an
    int, ``virtual="2x2GB"``, ``"off"``). Returns one Outcome per setting given; a bad value raises
    ``ValueError`` (a ``PlanError``) before anything changes."""
    with _apart_from_tensorflow_import("configure"):
        from .api import configure as _configure

        try:
            return _configure(visible=visible, growth=growth, limit=limit, virtual=virtual, cpus=cpus, cpumem=cpumem,
                              gpu=gpu)
        finally:
            _loaded_by.add("configure")


def snapshot(*, list_devices=False):
    """Everything the kernel knows now, as one object with ``to_dict()``, ``to_text()`` and HTML."""
    with _apart_from_tensorflow_import("snapshot"):
        from .state import take

        try:
            return take(list_devices=list_devices)
        finally:
            _loaded_by.add("snapshot")


def __getattr__(name: str):
    # The panel imports ipywidgets: loaded when asked for (`tfgpu_magic.Panel()`), never at `import tfgpu_magic`.
    if name == "Panel":
        from .panel import Panel

        return Panel
    raise AttributeError(f"module 'tfgpu_magic' has no attribute {name!r}")


__all__ = ["Panel", "TfgpuWarning", "__version__", "configure", "snapshot"]
