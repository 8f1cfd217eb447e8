"""Every notebook is committed without outputs, and the start page runs top to bottom in a real kernel
(nbclient), with PYTHONUNBUFFERED unset. The lessons run in test_course.py, with their own checks.

Outputs are never committed: `test_outputs_are_stripped` enforces it, so what a reader sees comes
from their own run."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_outputs_are_stripped(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} keep outputs; clear them before committing"


START = [p for p in NOTEBOOKS if p.name == "00_start.ipynb"]


@pytest.mark.kernel
@pytest.mark.parametrize("path", START, ids=[p.name for p in START])
def test_notebook_runs(path, monkeypatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    text = "\n".join(o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    if path.name == "00_start.ipynb":
        assert "/device:CPU:2" in text
        assert "too late" in text and "restart the kernel" in text
        assert "MirroredStrategy over 3 device(s)" in text
    assert os.environ.get("PYTHONUNBUFFERED") is None
