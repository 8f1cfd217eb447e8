"""Issue 37 in Chromium, items 3, 8 and 11: Restart kernel and apply says what it saves, Cancel is its default; a
refusal at kernel start reaches the user as a JupyterLab notification; Check & save shows every refusal at once;
at a laptop's 1280x800 with the GPUs sidebar open, names keep their full text and `%tfgpu status` fits beside it.

A real server whose NVML is the fake library (three GPUs: 0, 1 and 2), real kernels. Screenshots in the light and
dark themes go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a folder, there too.
"""

from __future__ import annotations

import copy
import json

import pytest
from a11y import DIALOG_OF, assert_no_violations
from fakenvml import MIB, fake_env, mig_gpu, n_gpus, three_gpus, write_config
from labsession import (
    SIDEBAR,
    Lab,
    apply_status,
    element_screenshot,
    keep_screenshot,
    kernel_pid,
    open_notebook,
    open_sidebar,
    require_browser,
    restart_kernel,
    run_cell,
    scroll_into_view,
    set_theme,
    watched_page,
    write_notebook,
    write_saved,
)

pytestmark = [pytest.mark.browser]

BAD_START = {"visible": "9", "growth": "on"}  # GPU 9 is not among the fake's three: a start refuses the whole
LONG_NAME = "a notebook with a rather long name for the lesson on memory growth.ipynb"


@pytest.fixture(scope="module")
def lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("apply_dialog_nvml") / "fake_nvml.cfg", three_gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        lab.nvml_config = config
        write_saved(lab, "refused.ipynb", BAD_START)
        write_notebook(lab.root / "editor.ipynb", source="%load_ext tfgpu_magic")
        write_notebook(lab.root / LONG_NAME, source="%load_ext tfgpu_magic\n%tfgpu status")
        yield lab


def shoot(page, locator, folder, name: str, prepare=None, after=None, axe: str | None = None) -> None:
    """``locator`` in the light and the dark theme, ``prepare()`` after the theme is set, ``after()`` after; where
    ``axe`` is a selector of tfgpu's part shown, axe-core finds no WCAG A/AA violation in it in either theme."""
    from playwright.sync_api import expect

    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        if prepare:
            prepare()
        expect(locator).to_be_visible()
        if axe:
            assert_no_violations(page, [axe], f"{name} ({theme})")
        page.mouse.move(0, 0)
        page.wait_for_timeout(400)  # the theme's colours settle
        shot = folder / f"{name}-{theme.split()[-1].lower()}.png"
        element_screenshot(locator, shot)
        keep_screenshot(shot)
        if after:
            after()
    set_theme(page, "JupyterLab Light")


def metadata_of(lab: Lab, name: str) -> dict:
    return json.loads((lab.root / name).read_text())["metadata"]


def test_a_refusal_at_start_notifies_and_the_dialog_leaves_the_refused_value_out(lab, tmp_path):
    from playwright.sync_api import expect

    with watched_page(lab, width=1280, height=800) as page:
        open_notebook(page, "refused.ipynb")
        # The start's apply refused the document: a notification says so with the reason, not only the sidebar.
        toast = page.locator(".Toastify__toast", has_text="refused at kernel start")
        expect(toast).to_be_visible(timeout=60_000)
        expect(toast).to_contain_text("refused.ipynb")
        expect(toast).to_contain_text("GPU 9")
        action = toast.get_by_role("button", name="Show in GPUs sidebar")
        expect(action).to_be_visible()
        shoot(page, toast, tmp_path, "start-refusal-notification")
        action.click()
        sidebar = page.locator(SIDEBAR)
        expect(sidebar).to_be_visible()
        expect(apply_status(page)).to_contain_text("refused at kernel start")
        pid = kernel_pid(lab, "refused.ipynb")

        # Restart kernel and apply (the command palette's, on the saved settings): the kernel checks them first.
        dialog = page.locator(".jp-Dialog")

        def ask():
            page.keyboard.press("Control+Shift+c")
            page.locator(".lm-CommandPalette-input").fill("Restart kernel and apply saved GPU settings")
            page.keyboard.press("Enter")
            expect(dialog.locator(".tfgpu-restart-dialog")).to_be_visible(timeout=30_000)

        def cancel():
            page.keyboard.press("Enter")  # Cancel has the focus: Enter keeps the kernel
            expect(dialog).to_have_count(0)

        ask()
        kept = dialog.locator(".tfgpu-restart-kept .tfgpu-restart-value")
        expect(kept).to_have_text(["growth on"])
        left = dialog.locator(".tfgpu-restart-left .tfgpu-restart-item")
        expect(left).to_have_count(1)
        expect(left.locator(".tfgpu-restart-value")).to_have_text("visible 9")
        expect(left.locator(".tfgpu-restart-reason")).to_contain_text("GPU 9")
        focused = page.evaluate("document.activeElement && document.activeElement.textContent")
        assert focused == "Cancel", focused
        cancel()
        assert kernel_pid(lab, "refused.ipynb") == pid  # not restarted
        assert metadata_of(lab, "refused.ipynb")["tfgpu"]["settings"] == BAD_START  # nothing saved
        shoot(page, dialog.locator(".jp-Dialog-content"), tmp_path, "restart-dialog", prepare=ask, after=cancel,
              axe=DIALOG_OF.format(".tfgpu-restart-dialog"))

        # Accepted: only what the kernel accepts is saved, and the start applies it (no refusal, no notification).
        ask()
        dialog.get_by_role("button", name="Restart and apply").click()
        expect(apply_status(page)).to_contain_text("saved settings applied", timeout=120_000)
        expect(toast).to_have_count(0)
        page.keyboard.press("Control+s")
        expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
        assert metadata_of(lab, "refused.ipynb")["tfgpu"]["settings"] == {"growth": "on"}


def test_check_and_save_shows_every_refusal_under_its_field(lab, tmp_path):
    from playwright.sync_api import expect

    with watched_page(lab, width=1280, height=800) as page:
        open_notebook(page, "editor.ipynb")
        run_cell(page, 0, "%load_ext tfgpu_magic")
        sidebar = open_sidebar(page)
        section = sidebar.locator(".tfgpu-saved")
        inputs = {name: section.locator(f'input.tfgpu-input[data-setting="{name}"]')
                  for name in ("visible", "cpus", "growth", "limit")}
        expect(inputs["visible"]).to_be_enabled(timeout=60_000)
        for name, value in {"visible": "9", "cpus": "0", "growth": "on", "limit": "2GB"}.items():
            inputs[name].fill(value)
        section.locator(".tfgpu-check-save").click()
        # The verdict first: where it is another (the kernel did not answer, say), the failure names it.
        expect(section.locator(".tfgpu-editor-message")).to_have_text(
            "The kernel refused these settings; nothing saved.", timeout=30_000)
        errors = section.locator(".tfgpu-field-error:not([hidden])")
        expect(errors).to_have_count(3)
        for name in ("visible", "cpus", "limit"):
            expect(section.locator(f'.tfgpu-field[data-setting="{name}"] .tfgpu-field-error')).to_be_visible()
        expect(section.locator('.tfgpu-field[data-setting="growth"] .tfgpu-field-error')).to_be_hidden()
        shoot(page, section, tmp_path, "check-and-save-every-refusal", axe=SIDEBAR)
        assert "tfgpu" not in metadata_of(lab, "editor.ipynb")
        # The verdict was this kernel's: once it restarts, the errors and the line go with it (the values stay).
        restart_kernel(page)
        expect(errors).to_have_count(0, timeout=60_000)
        expect(section.locator(".tfgpu-editor-message")).to_have_count(0)
        expect(inputs["cpus"]).to_have_value("0")


def test_names_and_status_tables_fit_beside_the_sidebar_at_1280x800(lab, tmp_path):
    with watched_page(lab, width=1280, height=800) as page:
        open_notebook(page, LONG_NAME)
        pid = kernel_pid(lab, LONG_NAME)
        # The server: four GPUs, GPU 0 in MIG mode, this kernel and others on them, settings asked.
        base = three_gpus()
        fourth = {**n_gpus(4)["gpus"][3], "processes": [{"pid": 1, "used": 4096 * MIB}]}
        gpus = [mig_gpu(pci_bus_id="00000000:05:00.0"), *copy.deepcopy(base["gpus"]), fourth]
        gpus[2]["processes"] = [{"pid": pid, "used": 2048 * MIB}, {"pid": 3999911, "used": 12288 * MIB}]
        write_config(lab.nvml_config, {**base, "gpus": gpus})
        try:
            run_cell(page, 0, "%load_ext tfgpu_magic\n%tfgpu visible 2\n%tfgpu growth on\n%tfgpu status")
            check_layout(page, tmp_path)
        finally:
            write_config(lab.nvml_config, base)


def check_layout(page, tmp_path) -> None:
    """The sidebar's names whole (wrapped, or in a tooltip) and the status output without a sideways scroll, then
    the page's picture in both themes."""
    from playwright.sync_api import expect

    sidebar = open_sidebar(page)
    row = sidebar.locator(".tfgpu-notebook", has_text="a notebook with")
    expect(row).to_be_visible(timeout=30_000)
    # Every name shows in full: wrapped, or (where a line keeps it on one row) in its tooltip.
    clipped = page.evaluate(
        """root => Array.from(document.querySelector(root).querySelectorAll('*'))
            .filter(n => n.scrollWidth > n.clientWidth + 1 && !(n instanceof HTMLInputElement)
                         && n.offsetParent !== null
                         && !n.title.replace(/\\s+/g, ' ').includes(n.textContent.replace(/\\s+/g, ' ').trim()))
            .map(n => n.className + ': ' + n.textContent.trim())""",
        SIDEBAR,
    )
    assert clipped == [], clipped
    # The status table fits its output beside the sidebar: nothing scrolls sideways.
    output = page.locator(".jp-NotebookPanel .jp-Cell .jp-OutputArea").first
    expect(output.locator("table").first).to_be_visible()
    widths = output.evaluate(
        """n => Array.from(n.querySelectorAll('.tfgpu-view')).map(v => [v.scrollWidth, v.clientWidth])""")
    assert widths and all(scroll <= client + 1 for scroll, client in widths), widths

    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        scroll_into_view(row)  # the long name, wrapped, in the picture beside the table
        expect(row).to_be_visible()
        page.mouse.move(0, 0)
        page.wait_for_timeout(400)
        shot = tmp_path / f"layout-1280x800-{theme.split()[-1].lower()}.png"
        page.screenshot(path=str(shot))
        keep_screenshot(shot)
    set_theme(page, "JupyterLab Light")


@pytest.mark.tf
def test_a_waiting_for_import_verdict_follows_the_import(lab, tmp_path):
    """The start applied `cpus 2` before TensorFlow was imported ("waiting for import"); once a cell imports it, the
    verdict says what became of it, as the kernel records it, instead of still waiting."""
    from playwright.sync_api import expect

    write_saved(lab, "waits.ipynb", {"cpus": "2"})
    with watched_page(lab, width=1280, height=800) as page:
        open_notebook(page, "waits.ipynb")
        open_sidebar(page)
        status = apply_status(page)
        expect(status).to_contain_text("cpus 2", timeout=60_000)
        expect(status).to_contain_text("waiting for import")
        run_cell(page, 0, "import tensorflow as tf\nlen(tf.config.list_logical_devices('CPU'))")
        expect(status).not_to_contain_text("waiting for import", timeout=120_000)
        expect(status).to_contain_text("cpus 2 → applied")
        shoot(page, page.locator(f"{SIDEBAR} .tfgpu-saved"), tmp_path, "verdict-after-import")


def test_a_value_nvml_cannot_check_is_saved_marked(tmp_path):
    """No NVML library at all (a laptop): `visible 9` cannot be checked, and a start takes it as given. The dialog
    saves it, marked with the kernel's reason, rather than as if it had been checked."""
    from playwright.sync_api import expect

    require_browser()
    with Lab() as bare:
        write_notebook(bare.root / "laptop.ipynb", source="%load_ext tfgpu_magic")
        with watched_page(bare, width=1280, height=800) as page:
            open_notebook(page, "laptop.ipynb")
            run_cell(page, 0, "%load_ext tfgpu_magic")
            section = open_sidebar(page).locator(".tfgpu-saved")
            visible = section.locator('input.tfgpu-input[data-setting="visible"]')
            expect(visible).to_be_enabled(timeout=60_000)
            visible.fill("9")
            section.locator('input.tfgpu-input[data-setting="cpus"]').fill("2")
            dialog = page.locator(".jp-Dialog")

            def ask():
                section.locator(".tfgpu-restart-apply").click()
                expect(dialog.locator(".tfgpu-restart-dialog")).to_be_visible(timeout=30_000)

            def cancel():
                dialog.get_by_role("button", name="Cancel").click()
                expect(dialog).to_have_count(0)

            ask()
            marked = dialog.locator(".tfgpu-restart-kept .tfgpu-restart-unchecked")
            expect(marked).to_have_count(1)
            expect(marked.locator(".tfgpu-restart-value")).to_have_text("visible 9")
            expect(marked.locator(".tfgpu-restart-reason")).to_contain_text("GPU 9 not checked")
            expect(dialog.locator(".tfgpu-restart-kept .tfgpu-restart-value")).to_have_text(["visible 9", "cpus 2"])
            expect(dialog.locator(".tfgpu-restart-left")).to_have_count(0)
            expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
            cancel()
            shoot(page, dialog.locator(".jp-Dialog-content"), tmp_path, "restart-dialog-unchecked",
                  prepare=ask, after=cancel, axe=DIALOG_OF.format(".tfgpu-restart-dialog"))
