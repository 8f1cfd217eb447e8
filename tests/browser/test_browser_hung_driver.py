"""The sidebar in Chromium while the driver hangs: the server answers within its bound (here 1 s) with the last
figures, and the sidebar says how old they are and why, instead of showing them as current; when the server
itself does not answer (its process stopped), the sidebar's own request times out and it says "Server not
answering". Light and dark screenshots of the stale line go to the test's tmp folder (and $TFGPU_SCREENSHOTS)."""

from __future__ import annotations

import os
import re
import signal

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import Lab, element_screenshot, keep_screenshot, require_browser, set_theme

pytestmark = [pytest.mark.browser]

SIDEBAR = "#tfgpu-sidebar"
SIDEBAR_TAB = '.jp-SideBar [data-id="tfgpu-sidebar"]'


@pytest.fixture(scope="module")
def hung_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("hung_nvml") / "fake_nvml.cfg", three_gpus())
    args = ["--TfgpuServer.stale_after=1", "--TfgpuServer.snapshot_max_age=0"]
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={}), extra_args=args) as lab:
        yield lab, config


def test_the_sidebar_marks_old_figures_and_a_server_that_does_not_answer(hung_lab, tmp_path):
    from playwright.sync_api import expect

    lab, config = hung_lab
    with lab.browser_page(width=1200, height=900) as page:
        tab = page.locator(SIDEBAR_TAB)
        expect(tab).to_have_attribute("title", re.compile("GPUs"), timeout=60_000)
        tab.click()
        sidebar = page.locator(SIDEBAR)
        expect(sidebar).to_contain_text("30,000 / 40,960 MiB", timeout=30_000)
        expect(sidebar.locator(".tfgpu-stale")).to_have_count(0)

        # The driver hangs (8 s per count) while memory grows: the old figures stay, marked with their age.
        hung = three_gpus()
        hung["gpus"][0]["memory_used"] = 39000 * MIB
        write_config(config, {**hung, "delays": {"nvmlDeviceGetCount_v2": 8000}})
        stale = sidebar.locator(".tfgpu-stale")
        expect(stale).to_contain_text(re.compile(r"Figures from \d+ s ago: the driver has not answered for \d+ s"),
                                      timeout=20_000)
        expect(sidebar).to_contain_text("30,000 / 40,960 MiB")
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            set_theme(page, theme)
            expect(stale).to_be_visible()
            shot = tmp_path / f"sidebar-stale-{theme.split()[-1].lower()}.png"
            element_screenshot(sidebar, shot)
            keep_screenshot(shot)

        # The driver answers again: the new figures, no stale line.
        write_config(config, hung)
        expect(sidebar).to_contain_text("39,000 / 40,960 MiB", timeout=30_000)
        expect(stale).to_have_count(0)

        # The server itself stops answering: the sidebar's request times out (10 s) and it says so.
        os.kill(lab.server.pid, signal.SIGSTOP)
        try:
            expect(sidebar).to_contain_text("Server not answering", timeout=40_000)
        finally:
            os.kill(lab.server.pid, signal.SIGCONT)
        expect(sidebar).not_to_contain_text("Server not answering", timeout=60_000)
