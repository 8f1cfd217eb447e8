"""The browser tests' page: Chromium on a module's own JupyterLab (its `lab` fixture), at the size most of them
use; a module that needs another size or listeners defines its own `page`."""

from __future__ import annotations

import pytest


@pytest.fixture
def page(lab):
    with lab.browser_page(width=1400, height=1000) as page:
        yield page
    # Shown by pytest only when the test failed: what the server and its kernels logged.
    print(f"--- jupyter lab log (tail) ---\n{lab.log_tail()}")
