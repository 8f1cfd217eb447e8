"""An untrusted notebook asks first, in JupyterLab in Chromium: the saved settings of a notebook JupyterLab does not
trust (its code cells are not signed in the server's notary database) are not sent to its kernel until the user
clicks "Apply saved settings" in the sidebar, and that answer is remembered for the notebook and those settings. A
signed notebook applies at once. Every notebook here has a `tfgpu_magic/` folder beside it whose modules leave a
marker when imported: whatever is applied, it is the installed package.

The notebooks are signed as `jupyter trust` does, with the notary of the server's JUPYTER_DATA_DIR. Autosave is
off: a save signs a notebook without rich outputs (nbformat's `check_cells`), so each test says when one happens.
Each test has its own page (`/lab?reset`: no answer remembered from another test). Skipped where the browser is
missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labsession import (
    CELL,
    NOTEBOOK,
    SIDEBAR,
    Lab,
    apply_status,
    cell_output,
    close_notebook,
    keep_screenshot,
    kernel_expression,
    notebook_signed,
    open_notebook,
    plant_shadow,
    require_browser,
    restart_kernel,
    run_cell,
    saved_metadata,
    set_theme,
    shut_down_kernel,
    sidebar,
    sign_notebook,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

COUNT_CPUS = "import tensorflow as tf\nprint('logical CPUs:', len(tf.config.list_logical_devices('CPU')))"
# What the sidebar's apply would have left in the kernel: the package loaded (and, later, TensorFlow).
LOADED = "sorted(m for m in __import__('sys').modules if m.split('.')[0] in ('tfgpu_magic', 'tensorflow'))"
NOT_TRUSTED = "This notebook is not trusted: its saved settings (cpus 2) were not applied."


@pytest.fixture(scope="module")
def lab():
    require_browser()
    with Lab() as lab:
        docmanager = lab.tmp / "settings" / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings"
        docmanager.parent.mkdir(parents=True, exist_ok=True)
        docmanager.write_text(json.dumps({"autosave": False}))
        lab.marker = plant_shadow(lab.root)
        yield lab
        assert not lab.marker.exists(), lab.marker.read_text()


def write(lab: Lab, name: str, settings: dict, *, signed: bool) -> Path:
    """A notebook with one code cell and saved settings; ``signed``: trusted, as after `jupyter trust`."""
    path = write_notebook(lab.root / name, source="print('hello')", metadata=saved_metadata(settings))
    return sign_notebook(lab, path) if signed else path


def signed(lab: Lab, name: str) -> bool:
    return notebook_signed(lab, lab.root / name)


def consent(page):
    return page.locator(f"{SIDEBAR} .tfgpu-consent")


def trust_status(page, trusted: bool):
    """JupyterLab's own trust item in the status bar (its tooltip), for the notebook in front."""
    prefix = "Notebook trusted" if trusted else "Notebook not trusted"
    return page.locator(f"#jp-main-statusbar [title^='{prefix}']")


def expect_cpus(page, index: int, count: int) -> None:
    from playwright.sync_api import expect

    run_cell(page, index, COUNT_CPUS)
    expect(cell_output(page, index)).to_contain_text(f"logical CPUs: {count}")


def reopen(page, lab: Lab, name: str) -> None:
    """Close the notebook unsaved, shut its kernel down, and open it again: a new kernel starts."""
    close_notebook(page, name)
    shut_down_kernel(lab, name)
    open_notebook(page, name)


def open_untrusted(page, lab: Lab, name: str) -> None:
    """Write an unsigned notebook with saved settings {cpus: 2}, open it: the sidebar asks first."""
    from playwright.sync_api import expect

    write(lab, name, {"cpus": "2"}, signed=False)
    open_notebook(page, name)
    sidebar(page)
    expect(consent(page)).to_contain_text(NOT_TRUSTED, timeout=60_000)


def expect_nothing_applied(page, lab: Lab, name: str) -> None:
    """A few seconds after its start the kernel still has neither tfgpu_magic nor TensorFlow loaded (the apply,
    sent first at a start, would have loaded the package by then)."""
    page.wait_for_timeout(3000)
    assert kernel_expression(lab, name, LOADED) == "[]"
    assert not lab.marker.exists(), lab.marker.read_text()


def test_a_signed_notebook_applies_its_saved_settings_at_once(page, lab):
    from playwright.sync_api import expect

    write(lab, "signed.ipynb", {"cpus": "2"}, signed=True)
    open_notebook(page, "signed.ipynb")
    expect(trust_status(page, True)).to_have_count(1)
    sidebar(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start: cpus 2", timeout=60_000)
    expect(consent(page)).to_have_count(0)
    expect_cpus(page, 0, 2)
    assert not lab.marker.exists(), lab.marker.read_text()  # the installed package, not the folder beside


def test_an_untrusted_notebook_asks_and_the_answer_is_remembered(page, lab, tmp_path):
    from playwright.sync_api import expect

    write(lab, "untrusted.ipynb", {"cpus": "2"}, signed=False)
    open_notebook(page, "untrusted.ipynb")
    expect(trust_status(page, False)).to_have_count(1)
    sidebar(page)
    expect_nothing_applied(page, lab, "untrusted.ipynb")
    box = consent(page)
    expect(box).to_contain_text(NOT_TRUSTED)
    expect(box).to_contain_text("remembers it for this notebook")
    expect(box.get_by_role("button", name="Apply saved settings")).to_be_enabled()

    box.scroll_into_view_if_needed()
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        expect(box).to_be_visible()
        page.mouse.move(0, 0)
        shot = tmp_path / f"sidebar-consent-{theme.split()[-1].lower()}.png"
        page.screenshot(path=str(shot))
        keep_screenshot(shot)

    box.get_by_role("button", name="Apply saved settings").click()
    expect(apply_status(page)).to_contain_text("Saved settings applied: cpus 2", timeout=60_000)
    expect(consent(page)).to_have_count(0)
    expect_cpus(page, 0, 2)  # the user's first cell already has them
    assert not lab.marker.exists(), lab.marker.read_text()

    # A page load (the workspace keeps the answer): the same kernel, nothing asked.
    page.goto(f"{lab.url}/lab?token={lab.token}")
    page.locator(f"{NOTEBOOK} .jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=60_000)
    sidebar(page)
    expect(apply_status(page)).to_contain_text("cpus 2", timeout=60_000)
    expect(consent(page)).to_have_count(0)

    # The next kernel of the notebook applies them without asking: still not trusted, but agreed to.
    reopen(page, lab, "untrusted.ipynb")
    assert not signed(lab, "untrusted.ipynb")
    expect(trust_status(page, False)).to_have_count(1)
    sidebar(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start: cpus 2", timeout=60_000)
    expect(consent(page)).to_have_count(0)
    expect_cpus(page, 0, 2)
    assert not lab.marker.exists(), lab.marker.read_text()

    # Other settings in the file: asked again.
    close_notebook(page, "untrusted.ipynb")
    shut_down_kernel(lab, "untrusted.ipynb")
    write(lab, "untrusted.ipynb", {"cpus": "3"}, signed=False)
    open_notebook(page, "untrusted.ipynb")
    sidebar(page)
    expect(consent(page)).to_contain_text("its saved settings (cpus 3) were not applied", timeout=60_000)
    expect_nothing_applied(page, lab, "untrusted.ipynb")
    expect(consent(page)).to_be_visible()


def test_a_save_signs_a_notebook_without_outputs_yet_it_still_asks(page, lab):
    from playwright.sync_api import expect

    open_untrusted(page, lab, "saved-here.ipynb")
    # The user saves it, as autosave would: the server signs it (no output to distrust) ...
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+s")
    for _ in range(50):
        if signed(lab, "saved-here.ipynb"):
            break
        page.wait_for_timeout(200)
    assert signed(lab, "saved-here.ipynb")
    # ... so JupyterLab trusts it at its next opening, but the user was asked about these settings and said nothing.
    reopen(page, lab, "saved-here.ipynb")
    expect(trust_status(page, True)).to_have_count(1)
    sidebar(page)
    expect(consent(page)).to_contain_text(NOT_TRUSTED, timeout=60_000)
    expect_nothing_applied(page, lab, "saved-here.ipynb")
    expect(consent(page)).to_be_visible()


def test_applied_after_cells_ran_it_waits_for_the_next_start(page, lab):
    from playwright.sync_api import expect

    open_untrusted(page, lab, "ran-first.ipynb")
    page.wait_for_timeout(3000)
    expect_cpus(page, 0, 1)  # nothing was applied
    assert not lab.marker.exists(), lab.marker.read_text()
    consent(page).get_by_role("button", name="Apply saved settings").click()
    status = apply_status(page)
    expect(status).to_contain_text("Saved settings not applied", timeout=60_000)
    expect(status).to_contain_text("this kernel has run cells already")
    restart_kernel(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start: cpus 2", timeout=60_000)
    page.locator(CELL).nth(0).locator(".jp-InputPrompt").click()
    expect_cpus(page, 0, 2)
    assert not lab.marker.exists(), lab.marker.read_text()


def test_trust_notebook_agrees_to_the_saved_settings(page, lab):
    from playwright.sync_api import expect

    open_untrusted(page, lab, "to-trust.ipynb")
    # JupyterLab's own Trust Notebook, from the command palette.
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+Shift+c")
    page.locator(".lm-CommandPalette-input").fill("Trust Notebook")
    page.locator(".lm-CommandPalette-item", has_text="Trust Notebook").first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()  # "Trust"
    expect(trust_status(page, True)).to_have_count(1)
    expect(consent(page)).to_contain_text(
        "This notebook is trusted now: its saved settings (cpus 2) apply at the next kernel start")
    for _ in range(50):  # the command saves it, signed
        if signed(lab, "to-trust.ipynb"):
            break
        page.wait_for_timeout(200)
    assert signed(lab, "to-trust.ipynb")
    assert kernel_expression(lab, "to-trust.ipynb", LOADED) == "[]"  # trusting applied nothing yet
    restart_kernel(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start: cpus 2", timeout=60_000)
    expect(consent(page)).to_have_count(0)
    page.locator(CELL).nth(0).locator(".jp-InputPrompt").click()
    expect_cpus(page, 0, 2)
    assert not lab.marker.exists(), lab.marker.read_text()
