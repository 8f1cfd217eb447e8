"""A notebook saved with a live panel, opened again (its kernel, and so the widget's model, long gone). Trusted (the
user's own notebook: JupyterLab signs what it saves), ipywidgets draws the output as "Error displaying widget:
model not found", and the sidebar's extension puts the panel's own text under it, in JupyterLab and in Notebook 7,
light and dark; other widgets' outputs are left as they are. Not trusted, JupyterLab draws no widget and shows the
output's HTML, which is the panel's text already.

The saved output is the bundle a real panel gives (`with_fallback`, as `Panel._repr_mimebundle_` builds it) with a
model id no kernel has. Skipped where the browser is missing, failed instead with CI=true.
"""

from __future__ import annotations

import urllib.parse

import nbformat
import pytest
from labsession import (
    NOTEBOOK,
    element_screenshot,
    keep_screenshot,
    open_notebook,
    require_browser,
    set_theme,
    sign_notebook,
)

from tfgpu_magic.ipython.panel import Panel, with_fallback

pytestmark = [pytest.mark.browser]

VIEW = "application/vnd.jupyter.widget-view+json"
NAME = "saved_panel.ipynb"
UNTRUSTED = "saved_panel_untrusted.ipynb"


def saved_notebook(path):
    panel = with_fallback({VIEW: {"model_id": "4a1b2c3d", "version_major": 2, "version_minor": 0},
                           "text/plain": "Panel(children=(HTML(value='...'),))"})
    slider = {VIEW: {"model_id": "5e6f7a8b", "version_major": 2, "version_minor": 0},
              "text/plain": "IntSlider(value=3)"}
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("%tfgpu panel", execution_count=1, outputs=[
                    nbformat.v4.new_output("display_data", data=panel)]),
                nbformat.v4.new_code_cell("import ipywidgets\nipywidgets.IntSlider(3)", execution_count=2, outputs=[
                    nbformat.v4.new_output("display_data", data=slider)])]
    nbformat.write(nb, path)
    return path


def check(page) -> None:
    from playwright.sync_api import expect

    cells = page.locator(f"{NOTEBOOK} .jp-Cell")
    note = cells.nth(0).locator(".tfgpu-saved-panel-note")
    expect(note).to_have_text(Panel.DEAD_TEXT.replace("`", ""), timeout=60_000)
    expect(note).to_be_visible()
    expect(cells.nth(0)).to_contain_text("Error displaying widget")
    expect(cells.nth(1)).to_contain_text("Error displaying widget")  # not ours: left as ipywidgets drew it
    assert cells.nth(1).locator(".tfgpu-saved-panel-note").count() == 0
    assert note.count() == 1  # once, however often the output area changes


def test_a_saved_panel_says_what_it_was_in_jupyterlab_and_notebook_7(lab, tmp_path):
    from playwright.sync_api import expect

    require_browser()
    saved_notebook(lab.root / UNTRUSTED)
    sign_notebook(lab, saved_notebook(lab.root / NAME))
    with lab.browser_page(width=1000, height=500) as page:
        open_notebook(page, UNTRUSTED, wait_idle=False)
        first = page.locator(f"{NOTEBOOK} .jp-Cell").nth(0)
        expect(first.locator(".tfgpu-panel-fallback")).to_have_text(Panel.DEAD_TEXT.replace("`", ""),
                                                                    timeout=60_000)
        assert first.locator(".tfgpu-saved-panel-note").count() == 0  # said once, by the output itself
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        open_notebook(page, NAME, wait_idle=False)
        check(page)
        element_screenshot(page.locator(NOTEBOOK), tmp_path / "saved-panel-light.png")
        keep_screenshot(tmp_path / "saved-panel-light.png")
        set_theme(page, "JupyterLab Dark")
        check(page)
        element_screenshot(page.locator(NOTEBOOK), tmp_path / "saved-panel-dark.png")
        keep_screenshot(tmp_path / "saved-panel-dark.png")
        # Notebook 7 serves the same extensions.
        page.goto(f"{lab.url}/notebooks/{urllib.parse.quote(NAME)}?token={lab.token}")
        check(page)
