"""After every cell the controller reads back what TensorFlow has (a split the notebook made itself). Without
TensorFlow imported there is nothing to read, and nothing may be asked: a probe of a TensorFlow not imported looks
for it on disk (importlib's find_spec over sys.path), which cost every cell of every kernel about 100 µs."""

from __future__ import annotations

import sys

from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.runtime import Probe, TFState


def test_read_back_without_tensorflow_imported_asks_nothing():
    asked = []

    def prober() -> Probe:
        asked.append(1)
        return Probe(TFState.NOT_IMPORTED)

    assert "tensorflow" not in sys.modules
    controller = Controller(environ={}, prober=prober, hooks_import=False)
    for _ in range(3):
        controller.read_back()
    assert asked == []
