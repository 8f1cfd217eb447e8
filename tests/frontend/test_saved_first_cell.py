"""The first cell the sidebar writes ("Write as first cell": labextension/src/model/saved.ts's firstCellSource,
compiled in lib/) is the one the kernel's tfgpu_magic.core.saved.first_cell writes."""

from __future__ import annotations

import pytest
from harness import first_cell_by_the_sidebar

from tfgpu_magic.core import saved


@pytest.mark.parametrize("document", [
    {"version": 1, "apply_on_start": True, "settings": {"placement": "on", "cpus": "3", "visible": "all"}},
    {"settings": {"limit": ["1GB --gpu 0", "2GB --gpu 1"], "virtual": "2x1GB --gpu 2", "growth": "off",
                  "cpumem": "on"}},
])
def test_the_sidebar_writes_the_first_cell_the_kernel_would(document):
    assert first_cell_by_the_sidebar(document) == saved.first_cell(document)


