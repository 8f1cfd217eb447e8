"""A saved `visible auto --min-free SIZE --wait DURATION` at kernel start, in JupyterLab in Chromium: while the
start's apply waits for a GPU, the sidebar shows the kernel's latest progress line (never an output area) with a
Cancel; Cancel interrupts the kernel, the verdict says the wait was interrupted and nothing changed, and a cell then
runs at once (it waited behind the apply).

The kernels see two fake GPUs (the fake NVML library) whose free memory is below the asked --min-free while their
total is above it: enough could come free, so the kernel waits rather than refuses. Screenshots of the waiting state
in the light and dark themes go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a folder, there too (the
docs/server.md's sidebar-wait-*.png). Skipped where the browser is missing, failed instead with CI=true.
"""

from __future__ import annotations

import copy
import time

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    CELL,
    SIDEBAR,
    Lab,
    apply_status,
    cell_output,
    open_notebook,
    require_browser,
    run_cell,
    scroll_into_view,
    shoot_in_both_themes,
    sidebar,
    write_saved,
)

pytestmark = [pytest.mark.browser]

WAIT = "auto --min-free 30GiB --wait 60s"


def busy_gpus() -> dict:
    """An A100 (40 GiB) and an H100 (80 GiB), each with 2 GiB free: 30 GiB could come free, not now."""
    config = three_gpus()
    gpus = [copy.deepcopy(g) for g in config["gpus"][:2]]
    for gpu in gpus:
        gpu["memory_used"] = gpu["memory_total"] - 2048 * MIB
    return {**config, "gpus": gpus}


@pytest.fixture(scope="module")
def lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("wait_nvml") / "fake_nvml.cfg", busy_gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        write_saved(lab, "wait.ipynb", {"visible": WAIT})  # the user's own: applied without asking
        yield lab


def test_a_saved_wait_shows_its_progress_and_cancel_ends_it(page, lab, tmp_path):
    from playwright.sync_api import expect

    started = time.monotonic()
    open_notebook(page, "wait.ipynb", wait_idle=False)  # the kernel is busy with the apply: never idle while it waits
    bar = sidebar(page)
    status = apply_status(page)
    progress = bar.locator(".tfgpu-apply-progress")
    expect(status).to_contain_text("Waiting to apply the saved settings; cells run once it ends", timeout=60_000)
    expect(progress).to_contain_text("30", timeout=10_000)
    first = progress.inner_text()
    assert not first.startswith("tfgpu:"), first
    assert "of 1 m" in first or "of 60 s" in first, first  # how long it has waited, of how long
    expect(progress).not_to_have_text(first, timeout=10_000)  # it moves: the latest line replaces the last
    # The kernel's lines go to the sidebar only: the notebook's cell has no output.
    expect(cell_output(page, 0)).to_have_text("")
    # The apply loads tfgpu_magic: no "Load" button meanwhile (its cell would only wait behind the apply).
    expect(bar.locator(".tfgpu-link-status")).to_have_text(
        "tfgpu_magic loads with the saved settings, once they are applied.")
    expect(bar.locator(".tfgpu-load")).to_have_count(0)
    cancel = bar.get_by_role("button", name="Cancel")
    expect(cancel).to_be_enabled()
    print(f"waiting shown {time.monotonic() - started:.1f} s after opening")

    scroll_into_view(bar.locator(".tfgpu-saved"))
    shoot_in_both_themes(page, tmp_path, "sidebar-wait", lambda: expect(progress).to_be_visible())

    cancel.click()
    verdict = bar.locator(".tfgpu-saved .tfgpu-verdict")
    expect(verdict).to_contain_text("Cancelled; saved settings not applied:", timeout=15_000)
    expect(verdict).to_contain_text("interrupted")
    expect(verdict).to_contain_text("nothing changed")
    expect(progress).to_have_count(0)
    expect(bar.get_by_role("button", name="Try again")).to_be_visible()
    # The kernel is free: a cell runs at once, and the wait chose no GPU.
    started = time.monotonic()
    run_cell(page, 0, "import os; print('visible:', os.environ.get('CUDA_VISIBLE_DEVICES'))", timeout=20)
    expect(cell_output(page, 0)).to_contain_text("visible: None")
    assert time.monotonic() - started < 20
    expect(page.locator(CELL)).to_have_count(1)
    expect(page.locator(f"{SIDEBAR} .tfgpu-consent")).to_have_count(0)
