"""The sidebar of a server in a container (issue 33), in Chromium: JupyterLab runs under `unshare --pid --fork
--mount-proc` (a PID namespace of its own, as a container gives; root only, as CI runs) while the fake NVML lists
host PIDs that nothing there names. Each GPU (and each MIG device of a GPU in MIG mode) shows one line, "12,288 MiB
held by 2 processes this server cannot attribute: ...", where its processes are listed; no row of those numbers, no
"No process."; the PID note once above the GPUs.

Screenshots in the light and dark themes go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a folder,
there too. Skipped where the browser or unshare is missing, failed with CI=true."""

from __future__ import annotations

import os
import re

import pytest
from container import unshare_available
from fakenvml import MIB, fake_env, mig_gpu, write_config
from labsession import (
    SIDEBAR,
    SIDEBAR_TAB,
    Lab,
    element_screenshot,
    keep_screenshot,
    require_browser,
    set_theme,
    watched_page,
)

pytestmark = pytest.mark.browser

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]
FOREIGN = (3999901, 3999902)  # host PIDs: no process has them here, inside or out
LINE = "12,288 MiB held by 2 processes this server cannot attribute: its PID namespace differs from the driver's"
MIG_LINE = "500 MiB held by 1 process this server cannot attribute: its PID namespace differs from the driver's"


def container_config() -> dict:
    """GPU 0 an H100 with two foreign processes (8,192 + 4,096 MiB); GPU 1 an A100 in MIG mode whose slot 1 holds a
    foreign one (500 MiB) and slot 0 none."""
    mig = mig_gpu()
    mig["mig"]["devices"][0]["processes"] = []
    mig["mig"]["devices"][0]["memory_used"] = 0
    h100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "pci_bus_id": "00000000:05:00.0",
            "memory_total": 81920 * MIB, "memory_used": 12800 * MIB, "utilization_gpu": 40, "temperature": 52,
            "processes": [{"pid": FOREIGN[0], "used": 8192 * MIB}, {"pid": FOREIGN[1], "used": 4096 * MIB}]}
    return {"driver_version": "550.54.15", "cuda_driver_version": 12040, "gpus": [h100, mig]}


@pytest.fixture(scope="module")
def container_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    why = unshare_available()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, so browser tests must run: {why}", pytrace=False)
        pytest.skip(why)
    config = write_config(tmp_path_factory.mktemp("container_nvml") / "fake_nvml.cfg", container_config())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={}), prefix=UNSHARE) as lab:
        yield lab


@pytest.fixture
def page(container_lab):
    with watched_page(container_lab) as page:
        yield page


def test_the_server_is_in_a_pid_namespace_of_its_own(container_lab):
    pids = container_lab.api("GET", "/tfgpu/api/gpus")["pids"]
    assert pids["comparable"] is False and pids["view"] == "none", pids


def test_memory_nobody_here_can_be_given_is_one_line_per_device(page, tmp_path):
    from playwright.sync_api import expect

    expect(page.locator(SIDEBAR_TAB)).to_have_attribute("title", re.compile("GPUs"), timeout=60_000)
    page.locator(SIDEBAR_TAB).click()
    sidebar = page.locator(SIDEBAR)
    expect(sidebar).to_be_visible()
    h100 = sidebar.locator('.tfgpu-gpu[data-gpu="gpu-0"]')
    a100 = sidebar.locator('.tfgpu-gpu[data-gpu="gpu-1"]')
    expect(h100.locator(".tfgpu-unattributed")).to_have_text(LINE, timeout=30_000)
    for pid in FOREIGN:
        expect(sidebar).not_to_contain_text(f"pid {pid}")
    expect(h100).not_to_contain_text("No process.")
    # MIG mode: the device holding the process says it, its GPU and the idle device say nothing of it.
    slots = a100.locator(".tfgpu-mig")
    expect(slots).to_have_count(2)
    expect(slots.nth(1).locator(".tfgpu-unattributed")).to_have_text(MIG_LINE)
    expect(slots.nth(0).locator(".tfgpu-unattributed")).to_have_count(0)
    expect(a100.locator(".tfgpu-unattributed")).to_have_count(1)
    note = sidebar.locator(".tfgpu-pids-note")
    expect(note).to_have_count(1)
    expect(note).to_contain_text("PID namespace differs from the driver's")

    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        expect(h100.locator(".tfgpu-unattributed")).to_be_visible()
        page.mouse.move(0, 0)
        page.wait_for_timeout(400)  # the theme's colours settle
        shot = tmp_path / f"sidebar-container-{theme.split()[-1].lower()}.png"
        element_screenshot(sidebar, shot)
        keep_screenshot(shot)
        assert shot.stat().st_size > 3_000, shot
    set_theme(page, "JupyterLab Light")
