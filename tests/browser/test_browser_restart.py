"""Settings carried by the notebook, in JupyterLab in Chromium: "too late" becomes one click (Restart kernel and
apply), saved settings apply at every kernel start before the user's first cell, a notebook without them is
untouched, and the faults (a bad saved value, a kernel without the package) are said in the sidebar.

Each test opens one notebook in its own page of one Lab (the page helpers expect one notebook open). Skipped where
the browser is missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from labsession import (
    CELL,
    NOTEBOOK,
    SIDEBAR,
    Lab,
    add_cell_below,
    apply_status,
    cell_output,
    close_notebook,
    keep_screenshot,
    open_notebook,
    require_browser,
    run_cell,
    scroll_into_view,
    shoot_in_both_themes,
    sidebar,
    write_notebook,
    write_saved,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

COUNT_CPUS = "import tensorflow as tf\nprint('logical CPUs:', len(tf.config.list_logical_devices('CPU')))"
NO_PACKAGE = {"name": "noext", "display_name": "No tfgpu here", "language": "python"}
SLOW = {"name": "slowapply", "display_name": "Slow to apply", "language": "python"}


@pytest.fixture(scope="module")
def lab():
    require_browser()
    with Lab() as lab:
        write_notebook(lab.root / "refused.ipynb")
        write_saved(lab, "saved.ipynb", {"cpus": "2", "placement": "on"})
        write_notebook(lab.root / "plain.ipynb")
        write_saved(lab, "bad.ipynb", {"cpus": "3", "limit": "2XB"})
        # A kernel whose apply takes seconds (the real one takes milliseconds), to interrupt it while it runs.
        slow = lab.tmp / "data" / "kernels" / "slowapply"
        slow.mkdir(parents=True)
        (slow / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-c", "import time, tfgpu_magic.ipython.apply as s; apply = s.apply_json; "
                     "s.apply_json = lambda *a, **k: (time.sleep(6), apply(*a, **k))[1]; "
                     "from ipykernel import kernelapp; kernelapp.launch_new_instance()", "-f", "{connection_file}"],
            "display_name": SLOW["display_name"], "language": "python"}))
        write_saved(lab, "slow.ipynb", {"cpus": "2"}, kernelspec=SLOW)
        # A kernel whose Python cannot import tfgpu_magic, as in an environment where it is not installed.
        spec = lab.tmp / "data" / "kernels" / "noext"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-c", "import sys; sys.modules['tfgpu_magic'] = None; "
                     "from ipykernel import kernelapp; kernelapp.launch_new_instance()", "-f", "{connection_file}"],
            "display_name": NO_PACKAGE["display_name"], "language": "python"}))
        yield lab


def expect_cpus(page, index: int, count: int) -> None:
    from playwright.sync_api import expect

    run_cell(page, index, COUNT_CPUS)
    expect(cell_output(page, index)).to_contain_text(f"logical CPUs: {count}")


def test_a_refused_setting_becomes_restart_and_apply(page, lab, tmp_path):
    from playwright.sync_api import expect

    open_notebook(page, "refused.ipynb")
    run_cell(page, 0, "%load_ext tfgpu_magic")
    add_cell_below(page)
    run_cell(page, 1, "import tensorflow as tf\ntf.constant(1)")
    add_cell_below(page)
    run_cell(page, 2, "%tfgpu cpus 3")
    expect(cell_output(page, 2)).to_contain_text("is too late")

    refused = sidebar(page).locator(".tfgpu-refused")
    expect(refused).to_contain_text("`%tfgpu cpus 3` is too late", timeout=30_000)
    shot = tmp_path / "sidebar-refused.png"
    page.screenshot(path=str(shot))
    keep_screenshot(shot)
    refused.get_by_role("button", name="Restart kernel and apply").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("variables are lost")
    dialog.get_by_role("button", name="Restart and apply").click()
    expect(apply_status(page)).to_contain_text("Kernel restarted; saved settings applied", timeout=60_000)
    expect(apply_status(page)).to_contain_text("cpus 3")
    scroll_into_view(page.locator(f"{SIDEBAR} .tfgpu-saved"))
    # The saved-settings section after the restart, in both themes.
    shoot_in_both_themes(page, tmp_path, "sidebar-saved",
                         lambda: expect(page.locator(f"{SIDEBAR} .tfgpu-saved")).to_contain_text("cpus"))

    # No cell ran since the restart, yet the kernel has three logical CPUs: the first cell run now shows them.
    page.locator(CELL).nth(2).locator(".jp-InputPrompt").click()  # the notebook has the focus again
    add_cell_below(page)
    expect_cpus(page, 3, 3)
    prompt = page.locator(CELL).nth(3).locator(".jp-InputPrompt")
    expect(prompt).to_have_text("[1]:")  # the apply took no execution count: it ran silently

    # The notebook carries them: saved to disk, in its metadata.
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+s")
    text = ""
    for _ in range(50):
        text = (lab.root / "refused.ipynb").read_text()
        if '"tfgpu"' in text:
            break
        page.wait_for_timeout(200)
    meta = json.loads(text)["metadata"]["tfgpu"]
    assert meta["apply_on_start"] is True and meta["settings"]["cpus"] == "3", meta

    # A second restart, JupyterLab's own (Kernel menu), applies them again.
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…$|^Restart Kernel\.\.\.$")).first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()  # "Restart" (aria-label: Confirm Kernel Restart)
    expect(apply_status(page)).to_contain_text("Applied at kernel start", timeout=60_000)
    expect_cpus(page, 3, 3)


def test_saved_settings_apply_at_the_first_kernel_start_and_a_plain_notebook_is_untouched(page, lab):
    from playwright.sync_api import expect

    open_notebook(page, "saved.ipynb")
    sidebar(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start", timeout=60_000)
    expect(apply_status(page)).to_contain_text("cpus 2")
    expect_cpus(page, 0, 2)  # the user's very first cell already has them
    expect(page.locator(CELL).nth(0).locator(".jp-InputPrompt")).to_have_text("[1]:")
    close_notebook(page, "saved.ipynb")

    open_notebook(page, "plain.ipynb")
    run_cell(page, 0, "import sys\nprint('loaded:', 'tfgpu_magic' in sys.modules)")
    expect(cell_output(page, 0)).to_contain_text("loaded: False")  # no %load_ext ran in it
    expect(sidebar(page).locator(".tfgpu-saved")).to_contain_text("none saved")


def test_a_bad_saved_value_applies_nothing_and_says_why(page):
    from playwright.sync_api import expect

    open_notebook(page, "bad.ipynb")
    sidebar(page)
    status = apply_status(page)
    expect(status).to_contain_text("Saved settings refused at kernel start, none applied", timeout=60_000)
    expect(status).to_contain_text("2XB")
    expect_cpus(page, 0, 1)  # cpus 3 was valid, but nothing is applied when one value is refused


def test_a_kernel_without_the_package_is_told_how_to_install_it(page, lab):
    from playwright.sync_api import expect

    write_saved(lab, "noext-saved.ipynb", {"cpus": "2"}, kernelspec=NO_PACKAGE)
    open_notebook(page, "noext-saved.ipynb")
    sidebar(page)
    status = apply_status(page)
    expect(status).to_contain_text("tfgpu_magic is not installed in this kernel's environment", timeout=60_000)
    expect(status).to_contain_text("No tfgpu here")
    expect(status).to_contain_text("%pip install tfgpu_magic")


def test_an_interrupted_apply_says_so_and_try_again_applies(page, lab):
    from playwright.sync_api import expect

    open_notebook(page, "slow.ipynb", wait_idle=False)
    sidebar(page)
    expect(apply_status(page)).to_contain_text("Applying the saved settings", timeout=30_000)
    kernel = next(s for s in lab.api("GET", "/api/sessions") if s["path"] == "slow.ipynb")["kernel"]
    for _ in range(300):  # the kernel has started; the apply, sent first, now runs (6 s in this kernel)
        if lab.api("GET", f"/api/kernels/{kernel['id']}")["execution_state"] != "starting":
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(1500)
    expect(apply_status(page)).to_contain_text("Applying the saved settings", timeout=1)
    lab.api("POST", f"/api/kernels/{kernel['id']}/interrupt")  # Kernel > Interrupt, while it applies
    expect(apply_status(page)).to_contain_text("applying the saved settings was interrupted", timeout=30_000)
    page.locator(f"{SIDEBAR} .tfgpu-retry").click()
    page.locator(".jp-Dialog").get_by_role("button", name="Restart and apply").click()
    expect(apply_status(page)).to_contain_text("saved settings applied", timeout=60_000)
    expect_cpus(page, 0, 2)
