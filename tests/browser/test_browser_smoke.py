"""JupyterLab in Chromium renders what the magics display: the whole path a user sees, not only the HTML strings.

The server is the module-scoped `lab` fixture of conftest.py (starting it costs seconds), so more browser tests in
this module share it; each test gets its own browser page and notebook. Its kernels see three fake GPUs
(tests/support/fakenvml), which also proves that Lab(extra_env=...) reaches them. Skipped where the browser is missing,
failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import pytest
from labsession import add_cell_below, cell_output, open_new_notebook, run_cell

pytestmark = pytest.mark.browser


@pytest.fixture
def page(lab):
    with lab.browser_page() as page:
        yield page
    # Shown by pytest only when the test failed: what the server and its kernels logged.
    print(f"--- jupyter lab log (tail) ---\n{lab.log_tail()}")


def test_status_renders_as_html_table(page):
    from playwright.sync_api import expect

    open_new_notebook(page)
    run_cell(page, 0, "%load_ext tfgpu_magic", count=1)
    add_cell_below(page)
    run_cell(page, 1, "%tfgpu status", count=2)
    status = cell_output(page, 1).locator(".tfgpu-status")
    # Rendered as HTML, not the text/plain fallback: the GPU table, with its TensorFlow column and a fake GPU.
    gpus = status.locator("table").filter(has_text="TensorFlow")
    expect(gpus).to_be_visible()
    expect(gpus).to_contain_text("NVIDIA H100 80GB HBM3")
