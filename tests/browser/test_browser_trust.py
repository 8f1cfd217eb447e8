"""A notebook's saved settings apply at kernel start only with the user's agreement, in JupyterLab in Chromium.

The sidebar sends a notebook's saved settings to its kernel only when this user agreed to those settings for that
notebook ("Apply saved settings" in the sidebar) or wrote them there (Check & save), and the server keeps that, for
the user (POST tfgpu/api/consent, core/consent.py). JupyterLab's trust is not consent: the server signs a notebook
without outputs at its first save, so a received one is "trusted" as soon as it is saved. Nor is an answer kept in a
workspace: another workspace, or `/lab?reset`, starts without it. So each case here is tried in another workspace
too. Every notebook has a `tfgpu_magic/` folder beside it whose modules leave a marker when imported: whatever is
applied, it is the installed package.

"Write as first cell" turns the saved settings into code that nbconvert and papermill run unseen: it writes only
values the kernel's own check accepted, and nothing without a kernel that can check.

The notebooks are signed as `jupyter trust` does, with the notary of the server's JUPYTER_DATA_DIR. Autosave is off:
each test says when a save happens. Each test has its own page (`/lab?reset`). Skipped where the browser is missing,
failed instead with CI=true (labsession.require_browser). With TFGPU_SCREENSHOTS set, the consent box's pictures
(light and dark) go there too (docs/security.md's sidebar-consent-*.png).
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
    consent_box,
    kernel_expression,
    notebook_signed,
    open_notebook,
    open_workspace,
    plant_shadow,
    require_browser,
    restart_kernel,
    run_cell,
    saved_metadata,
    scroll_into_view,
    shoot_in_both_themes,
    shut_down_kernel,
    sidebar,
    sign_notebook,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

COUNT_CPUS = "import tensorflow as tf\nprint('logical CPUs:', len(tf.config.list_logical_devices('CPU')))"
# What the sidebar's apply would have left in the kernel: the package loaded (and, later, TensorFlow).
LOADED = "sorted(m for m in __import__('sys').modules if m.split('.')[0] in ('tfgpu_magic', 'tensorflow'))"
NOT_AGREED = "Not applied: you have not agreed to this notebook’s saved settings (cpus 2)."
OTHER = "other"  # another JupyterLab workspace of the same user and server


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
    """A received notebook: one code cell without outputs, these saved settings; ``signed``: trusted, as after
    `jupyter trust` or a save."""
    path = write_notebook(lab.root / name, source="print('hello')", metadata=saved_metadata(settings))
    return sign_notebook(lab, path) if signed else path


def signed(lab: Lab, name: str) -> bool:
    try:
        return notebook_signed(lab, lab.root / name)
    except (OSError, ValueError):  # read while the server writes it (nbformat's NotJSONError is a ValueError)
        return False


def load_extension(page) -> None:
    """`%load_ext tfgpu_magic` in the first cell, run, and the sidebar's link to it open (Check & save usable)."""
    from playwright.sync_api import expect

    run_cell(page, 0, "%load_ext tfgpu_magic")
    expect(sidebar(page).get_by_role("button", name="Check & save")).to_be_enabled(timeout=30_000)


def trust_status(page, trusted: bool):
    """JupyterLab's own trust item in the status bar (its tooltip), for the notebook in front."""
    prefix = "Notebook trusted" if trusted else "Notebook not trusted"
    return page.locator(f"#jp-main-statusbar [title^='{prefix}']")


def verdict(page):
    return page.locator(f"{SIDEBAR} .tfgpu-saved .tfgpu-verdict")


def expect_cpus(page, index: int, count: int) -> None:
    from playwright.sync_api import expect

    run_cell(page, index, COUNT_CPUS)
    expect(cell_output(page, index)).to_contain_text(f"logical CPUs: {count}")


def shut(page, lab: Lab, name: str) -> None:
    """Close the notebook (``name``: its path) unsaved and shut its kernel down: its next opening starts a new
    kernel."""
    close_notebook(page, Path(name).name)
    shut_down_kernel(lab, name)


def reopen(page, lab: Lab, name: str, workspace: str | None = None) -> None:
    """Close the notebook, shut its kernel down, and open it again (in ``workspace``, reset, when given)."""
    shut(page, lab, name)
    if workspace is not None:
        open_workspace(lab, page, workspace)
    open_notebook(page, name)


def open_own(page, lab: Lab, name: str, workspace: str | None = None) -> str:
    """Write (once) and open the notebook ``own/<name>`` through its URL, in ``workspace`` (reset): a folder without
    the planted package, since `%load_ext tfgpu_magic` in a cell imports what is beside the notebook, as Python
    does. Returns its path."""
    from playwright.sync_api import expect

    path = f"own/{name}"
    if not (lab.root / path).exists():
        (lab.root / "own").mkdir(exist_ok=True)
        write_notebook(lab.root / path, source="print('hello')")
    where = f"/lab/workspaces/{workspace}" if workspace else "/lab"
    page.goto(f"{lab.url}{where}/tree/{path}?reset")
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name)).to_be_visible(
        timeout=60_000)
    expect(page.locator(f"{NOTEBOOK} .jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible(
        timeout=60_000)
    return path


def save(page, lab: Lab, name: str) -> None:
    """The user saves the notebook (Ctrl+S); the server signs it when nothing in it is to distrust."""
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+s")
    for _ in range(50):
        if "tfgpu" in (lab.root / name).read_text() and signed(lab, name):
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"{name} was not saved signed")


def expect_asked(page, lab: Lab, name: str, text: str = NOT_AGREED) -> None:
    """The sidebar asks, and a few seconds after its start the kernel has neither tfgpu_magic nor TensorFlow loaded
    (the apply, sent first at a start, would have loaded the package by then)."""
    from playwright.sync_api import expect

    sidebar(page)
    expect(consent_box(page)).to_contain_text(text, timeout=60_000)
    page.wait_for_timeout(3000)
    assert kernel_expression(lab, name, LOADED) == "[]"
    assert not lab.marker.exists(), lab.marker.read_text()
    expect(consent_box(page)).to_be_visible()


def expect_applied_without_asking(page, lab: Lab, text: str = "Applied at kernel start: cpus 2") -> None:
    from playwright.sync_api import expect

    sidebar(page)
    expect(apply_status(page)).to_contain_text(text, timeout=60_000)
    expect(consent_box(page)).to_have_count(0)
    expect_cpus(page, 0, 2)  # the user's very first cell already has them
    assert not lab.marker.exists(), lab.marker.read_text()  # the installed package, not the folder beside


def test_a_received_notebook_signed_at_a_save_still_asks_in_another_workspace(page, lab):
    """Failed before the consent moved to the server: a save signs the notebook, and in another workspace (or after
    `/lab?reset`) nothing said the user had been asked, so the settings applied silently."""
    write(lab, "received.ipynb", {"cpus": "2"}, signed=False)
    open_notebook(page, "received.ipynb")
    expect_asked(page, lab, "received.ipynb")
    save(page, lab, "received.ipynb")  # the server signs it: no output to distrust
    for workspace in (OTHER, ""):  # "": the default workspace, reset
        reopen(page, lab, "received.ipynb", workspace)
        expect_asked(page, lab, "received.ipynb")


def test_a_signed_notebook_received_with_settings_asks(page, lab):
    from playwright.sync_api import expect

    write(lab, "signed.ipynb", {"cpus": "2"}, signed=True)
    open_notebook(page, "signed.ipynb")
    expect(trust_status(page, True)).to_have_count(1)
    expect_asked(page, lab, "signed.ipynb")


def test_apply_in_the_box_is_remembered_on_the_server_for_every_workspace(page, lab, tmp_path):
    from playwright.sync_api import expect

    write(lab, "agreed.ipynb", {"cpus": "2"}, signed=False)
    open_notebook(page, "agreed.ipynb")
    expect(trust_status(page, False)).to_have_count(1)
    expect_asked(page, lab, "agreed.ipynb")
    box = consent_box(page)
    expect(box).to_contain_text("A notebook from elsewhere can carry any settings")
    expect(box).to_contain_text("remembers your answer on this server, in every workspace")
    expect(box.get_by_role("button", name="Apply saved settings")).to_be_enabled()

    scroll_into_view(box)
    shoot_in_both_themes(page, tmp_path, "sidebar-consent", lambda: expect(box).to_be_visible())

    box.get_by_role("button", name="Apply saved settings").click()
    expect(apply_status(page)).to_contain_text("Saved settings applied: cpus 2", timeout=60_000)
    expect(consent_box(page)).to_have_count(0)
    expect_cpus(page, 0, 2)  # the user's first cell already has them
    assert not lab.marker.exists(), lab.marker.read_text()

    # The next kernel applies them without asking: in another workspace, and after a reset of the default one.
    for workspace in (OTHER, ""):
        reopen(page, lab, "agreed.ipynb", workspace)
        assert not signed(lab, "agreed.ipynb")
        expect_applied_without_asking(page, lab)

    # Other settings in the file: asked again, in any workspace.
    shut(page, lab, "agreed.ipynb")
    write(lab, "agreed.ipynb", {"cpus": "3"}, signed=True)
    open_workspace(lab, page, OTHER)
    open_notebook(page, "agreed.ipynb")
    expect_asked(page, lab, "agreed.ipynb", "this notebook’s saved settings (cpus 3)")


def test_settings_written_with_check_and_save_apply_at_the_next_start_without_asking(page, lab):
    from playwright.sync_api import expect

    path = open_own(page, lab, "mine.ipynb")
    load_extension(page)  # the kernel checks the values
    bar = sidebar(page)
    bar.locator(".tfgpu-input[data-setting='cpus']").fill("2")
    bar.get_by_role("button", name="Check & save").click()
    expect(verdict(page)).to_contain_text("Saved in the notebook", timeout=60_000)
    save(page, lab, path)
    assert json.loads((lab.root / path).read_text())["metadata"]["tfgpu"]["settings"] == {"cpus": "2"}
    shut(page, lab, path)
    open_own(page, lab, "mine.ipynb", OTHER)
    expect_applied_without_asking(page, lab)


def test_applied_after_cells_ran_it_waits_for_the_next_start(page, lab):
    from playwright.sync_api import expect

    write(lab, "ran-first.ipynb", {"cpus": "2"}, signed=False)
    open_notebook(page, "ran-first.ipynb")
    expect_asked(page, lab, "ran-first.ipynb")
    expect_cpus(page, 0, 1)  # nothing was applied
    assert not lab.marker.exists(), lab.marker.read_text()
    consent_box(page).get_by_role("button", name="Apply saved settings").click()
    status = apply_status(page)
    expect(status).to_contain_text("Saved settings not applied", timeout=60_000)
    expect(status).to_contain_text("this kernel has run cells already")
    restart_kernel(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start: cpus 2", timeout=60_000)
    page.locator(CELL).nth(0).locator(".jp-InputPrompt").click()
    expect_cpus(page, 0, 2)
    assert not lab.marker.exists(), lab.marker.read_text()


def test_trust_notebook_is_not_consent(page, lab):
    """JupyterLab's Trust Notebook trusts outputs (HTML, JavaScript); its dialog says nothing of GPU settings."""
    from playwright.sync_api import expect

    write(lab, "to-trust.ipynb", {"cpus": "2"}, signed=False)
    open_notebook(page, "to-trust.ipynb")
    expect_asked(page, lab, "to-trust.ipynb")
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+Shift+c")
    page.locator(".lm-CommandPalette-input").fill("Trust Notebook")
    page.locator(".lm-CommandPalette-item", has_text="Trust Notebook").first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()  # "Trust"
    expect(trust_status(page, True)).to_have_count(1)
    for _ in range(50):  # the command saves it, signed
        if signed(lab, "to-trust.ipynb"):
            break
        page.wait_for_timeout(200)
    assert signed(lab, "to-trust.ipynb")
    expect(consent_box(page)).to_contain_text(NOT_AGREED)
    restart_kernel(page)
    page.wait_for_timeout(1000)
    expect_asked(page, lab, "to-trust.ipynb")


# -- "Write as first cell": only values the kernel's check accepted --------------------------------------------------


def first_cell_button(page):
    return page.locator(f"{SIDEBAR} .tfgpu-write-cell")


def run_command(page, label: str) -> None:
    """Run a command from the command palette, as a user does."""
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+Shift+c")
    page.locator(".lm-CommandPalette-input").fill(label)
    page.locator(".lm-CommandPalette-item", has_text=label).first.click()


def cell_sources(page) -> list[str]:
    return [cell.inner_text() for cell in page.locator(f"{CELL} .cm-content").all()]


def received_own(page, lab: Lab, name: str, settings: dict) -> None:
    """A received notebook with these saved settings in ``own/`` (see ``open_own``), opened."""
    (lab.root / "own").mkdir(exist_ok=True)
    write_notebook(lab.root / "own" / name, source="print('hello')", metadata=saved_metadata(settings))
    open_own(page, lab, name)


def test_a_value_with_a_line_break_is_never_written_as_a_line_of_code(page, lab):
    from playwright.sync_api import expect

    received_own(page, lab, "newline.ipynb", {"visible": "0\nimport os"})
    load_extension(page)
    bar = sidebar(page)
    problem = "saved visible is \"0\\nimport os\": it holds a control character (\\n)"
    expect(bar.locator(".tfgpu-saved-problem")).to_contain_text(problem)
    expect(first_cell_button(page)).to_be_disabled()
    run_command(page, "Write saved GPU settings as first cell")  # the command says why rather than nothing
    expect(verdict(page)).to_contain_text(f"Nothing written: {problem}")
    assert cell_sources(page) == ["%load_ext tfgpu_magic"]


def test_a_value_the_kernel_refuses_is_never_written(page, lab):
    from playwright.sync_api import expect

    received_own(page, lab, "expr.ipynb", {"cpus": "{__import__('os').getpid()}"})
    sidebar(page)
    expect(consent_box(page)).to_be_visible(timeout=60_000)  # a received notebook: not applied either
    # tfgpu_magic not loaded: the kernel cannot check, so nothing is written, and the sidebar says how to fix it.
    first_cell_button(page).click()
    expect(verdict(page)).to_contain_text(
        "Nothing written: start the kernel and load tfgpu_magic so it can check the values first.")
    assert cell_sources(page) == ["print('hello')"]
    load_extension(page)
    first_cell_button(page).click()
    expect(verdict(page)).to_contain_text(
        "Nothing written: the kernel refused the saved settings: tfgpu: bad CPU count", timeout=30_000)
    assert cell_sources(page) == ["%load_ext tfgpu_magic"]


def test_values_the_kernel_accepts_are_written_one_setting_a_line(page, lab):
    from playwright.sync_api import expect

    received_own(page, lab, "good.ipynb", {"cpus": "2", "placement": "on"})
    sidebar(page)
    expect(consent_box(page)).to_be_visible(timeout=60_000)
    load_extension(page)
    run_command(page, "Write saved GPU settings as first cell")
    expect(verdict(page)).to_contain_text("The first cell now sets the saved settings up (checked by the kernel).",
                                          timeout=30_000)
    assert cell_sources(page) == ["%load_ext tfgpu_magic\n%tfgpu cpus 2\n%tfgpu placement on"]
