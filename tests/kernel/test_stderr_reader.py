"""fd 2 in a real kernel, read by one reader for the kernel's life with each cell's start and end marked on
it (core/placement/capture.py StderrTap): nothing lost, reordered or given to the wrong cell."""

from __future__ import annotations

import pytest
from test_placement_kernel import run_notebook

pytestmark = pytest.mark.kernel


BURST = 40_000  # lines: half the user's, half in TensorFlow's log format, interleaved, in one write


def test_a_burst_at_the_end_of_a_cell_is_all_that_cells_and_in_order():
    """fd 2 is read by one reader for the kernel's life and each cell's end is marked on it: every line
    written before a cell ends belongs to that cell (the mark waits for the reader), the user's lines
    arrive once and in order, and the next cell starts with nothing of it."""
    burst = (
        "import os\n"
        f"os.write(2, b''.join(b'user %06d\\n' % i + b'W0000 00:00:1796027620.100000   13837 burst.cc:%d] "
        f"tf %06d\\n' % (i, i) for i in range({BURST // 2})))"
    )
    one_each = ("import os\nos.write(2, b'user {n}\\n')\n"
                "_ = os.write(2, b'W0000 00:00:1796027620.100000   13837 small.cc:1] tf {n}\\n')")
    cells = run_notebook(["%load_ext tfgpu_magic", burst, "print('next')",
                          *[one_each.format(n=n) for n in range(20)]])
    out = cells[1]
    assert out["stderr"].splitlines() == [f"user {i:06d}" for i in range(BURST // 2)], out["stderr"][-300:]
    (block,) = [p for p in out["plain"] if p.startswith("TensorFlow log")]
    kept = 2000
    assert block.startswith(f"TensorFlow log, cell 2: {kept} warnings ({BURST // 2 - kept} more not kept)"), block
    assert "burst.cc:0] tf 000000" in block and f"burst.cc:{kept - 1}] tf {kept - 1:06d}" in block
    assert cells[2]["stderr"] == "" and cells[2]["plain"] == [] and cells[2]["stdout"] == "next\n"
    for n, small in enumerate(cells[3:]):  # a line in flight at a cell's end is that cell's, not the next's
        assert small["stderr"] == f"user {n}\n", (n, small)
        (block,) = small["plain"]
        assert "1 warning" in block and f"tf {n}" in block and f"tf {n + 1}" not in block, (n, block)
