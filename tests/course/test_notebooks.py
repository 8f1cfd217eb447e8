"""Every notebook is committed without outputs. They run in test_course.py, in a working copy the way
`make lab` runs them, with their own checks.

Outputs are never committed: `test_outputs_are_stripped` enforces it, so what a reader sees comes
from their own run."""


import nbformat
import pytest
from harness import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_outputs_are_stripped(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} keep outputs; clear them before committing"
