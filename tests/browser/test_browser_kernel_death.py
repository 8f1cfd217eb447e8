"""A dead kernel is explained (issue 36), in Chromium, against a real server whose NVML is the fake library.

The fake NVML lists a notebook's kernel on GPU 1 holding 4 GiB; the test kills that kernel with SIGKILL (what the
system's out-of-memory killer sends). The sidebar's top line then names the notebook, the time, the memory and the
GPU it held and the likely cause, readable in the light and dark themes (screenshots); the line can be hidden, and
stays hidden after a page load in this browser. jupyter_server restarts the kernel meanwhile (JupyterLab says so in
its own dialog, closed here).

Screenshots go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a folder, there too. Skipped where the
browser is missing, failed with CI=true.
"""

from __future__ import annotations

import copy
import os
import re
import signal
import time

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    Lab,
    element_screenshot,
    keep_screenshot,
    kernel_id,
    kernel_pid,
    open_notebook,
    open_sidebar,
    require_browser,
    set_theme,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser]

HELD_MIB = 4096


def holding(pid: int | None) -> dict:
    """Three fake GPUs; GPU 1 lists ``pid`` holding HELD_MIB."""
    config = three_gpus()
    h100 = copy.deepcopy(config["gpus"][1])
    h100["processes"] = [{"pid": pid, "used": HELD_MIB * MIB, "sm": 0}] if pid else []
    return {**config, "gpus": [config["gpus"][0], h100, config["gpus"][2]]}


@pytest.fixture(scope="module")
def death_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("death_nvml") / "fake_nvml.cfg", holding(None))
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={}),
             extra_args=["--TfgpuServer.activity_interval=1"]) as lab:
        write_notebook(lab.root / "train.ipynb")
        yield lab, config


@pytest.fixture
def page(death_lab):
    with watched_page(death_lab[0]) as page:
        yield page



def close_dialogs(page) -> None:
    """JupyterLab's own "the kernel appears to have died / restarting" dialog, if it opened."""
    for _ in range(3):
        dialog = page.locator(".jp-Dialog")
        if dialog.count() == 0:
            return
        dialog.locator("button.jp-mod-accept, button.jp-mod-reject").first.click()
        page.wait_for_timeout(300)


def test_a_kernel_killed_holding_gpu_memory_is_explained_in_the_sidebar_and_can_be_hidden(page, death_lab, tmp_path):
    from playwright.sync_api import expect

    lab, config = death_lab
    set_theme(page, "JupyterLab Light")
    open_notebook(page, "train.ipynb")
    sidebar = open_sidebar(page)
    pid = kernel_pid(lab, "train.ipynb")
    kernel = kernel_id(lab, "train.ipynb")
    write_config(config, holding(pid))
    # The sidebar shows the notebook holding its memory: an answer saw it before the death.
    row = sidebar.locator(f'.tfgpu-notebook[data-kernel-id="{kernel}"]')
    expect(row).to_be_visible(timeout=30_000)
    expect(sidebar.locator(".tfgpu-death")).to_have_count(0)
    os.kill(pid, signal.SIGKILL)

    line = sidebar.locator(".tfgpu-death", has_text="train.ipynb's kernel died at")
    expect(line).to_have_count(1, timeout=40_000)
    close_dialogs(page)
    text = line.inner_text()
    assert re.search(r"train\.ipynb's kernel died at \d\d:\d\d holding 4\.0 GiB on GPU 1\. Killed by SIGKILL: most "
                     r"often the system's out-of-memory killer \(host memory\), or someone ended it\. It was "
                     r"restarted: its variables are gone\.", text), text
    assert line.get_attribute("data-kernel-id") == kernel
    assert "ended by signal 9 (SIGKILL)" in line.locator(".tfgpu-death-text").get_attribute("title")

    # Readable in both themes: the text against its background, the red mark at its left.
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        close_dialogs(page)
        page.mouse.move(0, 0)
        page.wait_for_timeout(400)  # the theme's colours settle
        name = theme.split()[-1].lower()
        for what, locator in (("line", line), ("sidebar", sidebar)):
            shot = tmp_path / f"kernel-death-{what}-{name}.png"
            element_screenshot(locator, shot)
            keep_screenshot(shot)
            assert shot.stat().st_size > 3_000, shot
        colours = line.locator(".tfgpu-death-text").evaluate(
            "n => [getComputedStyle(n).color, getComputedStyle(n.parentElement).backgroundColor]")
        assert colours[0] != colours[1], colours
    set_theme(page, "JupyterLab Light")

    # Hidden in this browser, on this page and the next.
    close_dialogs(page)
    line.locator("button.tfgpu-death-dismiss").click()
    expect(line).to_have_count(0)
    page.reload()
    sidebar = open_sidebar(page)
    expect(sidebar.locator(".tfgpu-gpu").first).to_be_visible(timeout=30_000)  # an answer came
    page.wait_for_timeout(1500)
    expect(sidebar.locator(".tfgpu-death")).to_have_count(0)
    # The server still has it (another browser would show it).
    deaths = lab.api("GET", "/tfgpu/api/gpus")["dead_kernels"]
    assert [d["kernel_id"] for d in deaths] == [kernel] and deaths[0]["signal"] == 9, deaths
    assert deaths[0]["died_at"] <= time.time()
