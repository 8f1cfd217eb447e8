"""Working beside a thread that is importing TensorFlow.

These run in any thread, maybe while another imports TensorFlow: they import nothing that might not be
loaded yet (the ``importlib`` package itself may not be), using the always-present frozen bootstrap.
"""

from __future__ import annotations

import _thread
import sys

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


def apart_from_tensorflow_import(name: str):
    """CPython's per-module import locks can deadlock when two threads import a package and its submodule
    in opposite orders: seen here when a thread's first snapshot() imported `html` (or `importlib`) while
    the main thread's `import tensorflow` reached them through setuptools. So a first call, which imports
    the core, holds importlib's own lock for `tensorflow`: it waits for an import of TensorFlow under way
    in another thread, and one starting meanwhile waits for it (re-entrant in the thread that imports
    TensorFlow, so the import hook never blocks). The caller marks the call done with ``first_run_over``."""
    if name in _loaded_by:
        return _Unguarded()
    try:
        return _bootstrap._ModuleLockManager("tensorflow")
    except Exception:  # private machinery gone: go on unguarded
        return _Unguarded()


def first_run_over(name: str) -> None:
    _loaded_by.add(name)


def _working_folder_entry(entry: object, here: str) -> bool:
    import os

    return isinstance(entry, str) and (entry in ("", ".") or os.path.realpath(entry) == here)


def import_installed(name: str):
    """Import the top-level module ``name`` as installed, never from the working directory: a kernel's is the
    notebook's folder and comes first on sys.path (as ''), so a ``pynvml.py`` a received notebook brought
    would run when a thread of ours first reads NVML. One already loaded is used as it is (the user's own
    import is the user's). ImportError when it is not installed."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.realpath(os.getcwd())
    path = [entry for entry in list(sys.path) if not _working_folder_entry(entry, here)]
    with _bootstrap._ModuleLockManager(name):
        module = sys.modules.get(name)
        if module is not None:
            return module
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"No module named {name!r}", name=name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
