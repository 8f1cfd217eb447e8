"""Imported at the start of every Python process a fast-tier test starts (tests/support/tierguard.py puts this folder
on the child's PYTHONPATH): a real ``import tensorflow`` (its module run, not a lookup such as find_spec) is
noted in the file named by TFGPU_TEST_TIER_LOG, which the test reads when it ends. The import itself goes on
unchanged. Another sitecustomize further on sys.path (a distribution's) is run too."""

import os
import sys


class _NotingLoader:
    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        try:
            with open(os.environ["TFGPU_TEST_TIER_LOG"], "a", encoding="utf-8") as log:
                log.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:200]!r}\n")
        except (KeyError, OSError):
            pass
        # TensorFlow and importlib.resources look at the loader: let them see the real one.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        return self._loader.exec_module(module)


class _TensorFlowWatcher:
    _searching = False

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or self._searching:
            return None
        self._searching = True
        try:  # the finders after us find it; we only wrap its loader
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _NotingLoader(spec.loader)
                    return spec
        finally:
            self._searching = False
        return None


def _run_the_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get("TFGPU_TEST_TIER_LOG"):
    sys.meta_path.insert(0, _TensorFlowWatcher())
_run_the_next_sitecustomize()
