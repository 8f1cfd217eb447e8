"""The GPUs sidebar in JupyterLab (and Notebook 7) in Chromium, against a real server whose NVML is the fake library.

One Lab for the module. The fake lists three GPUs; once the notebooks' kernels run, the test rewrites the fake's
config so that two kernels hold GPU memory, and checks the sidebar shows that memory under each notebook's name,
including one named ``<img src=x onerror=alert(1)>`` (as text: no element, no dialog). The front notebook's
section goes from "not loaded" (its Load button inserts and runs ``%load_ext tfgpu_magic``) to its TensorFlow
settings after ``%tfgpu cpus 2``. Screenshots in the light and dark themes go to the test's tmp folder and, when
TFGPU_SCREENSHOTS names a folder, there too (docs/server.md's sidebar-*.png are made that way).
Skipped where the browser is missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    CELL,
    Lab,
    add_cell_below,
    close_notebook,
    keep_screenshot,
    kernel_pid,
    open_notebook,
    require_browser,
    run_cell,
    set_theme,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

SIDEBAR = "#tfgpu-sidebar"
SIDEBAR_TAB = '.jp-SideBar [data-id="tfgpu-sidebar"]'
HOSTILE = "<img src=x onerror=alert(1)>"
TRAIN, HOSTILE_NB = "train.ipynb", f"{HOSTILE}.ipynb"
GPU_NAMES = [gpu["name"] for gpu in three_gpus()["gpus"]]


class SidebarLab:
    def __init__(self, lab: Lab, config_path: Path):
        self.lab = lab
        self.config_path = config_path

    def kernel_pid(self, notebook: str, timeout: float = 60) -> int:
        return kernel_pid(self.lab, notebook, timeout)

    def hold_memory(self, holders: dict[int, int]) -> None:
        """GPU 1 (the H100) lists each kernel pid with the MiB given, beside the usual processes."""
        config = three_gpus()
        config["gpus"][1]["processes"] = [{"pid": pid, "used": mib * MIB} for pid, mib in holders.items()]
        write_config(self.config_path, config)


@pytest.fixture(scope="module")
def sidebar_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("sidebar_nvml") / "fake_nvml.cfg", three_gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        for name in (TRAIN, HOSTILE_NB):
            write_notebook(lab.root / name)
        yield SidebarLab(lab, config)


@pytest.fixture
def page(sidebar_lab):
    with sidebar_lab.lab.browser_page(width=1400, height=1000) as page:
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.dialogs = dialogs
        yield page
    print(f"--- jupyter lab log (tail) ---\n{sidebar_lab.lab.log_tail()}")


def open_sidebar(page):
    from playwright.sync_api import expect

    tab = page.locator(SIDEBAR_TAB)
    expect(tab).to_have_attribute("title", re.compile("GPUs"), timeout=60_000)
    tab.click()
    sidebar = page.locator(SIDEBAR)
    expect(sidebar).to_be_visible()
    return sidebar


def test_sidebar_shows_gpus_notebooks_and_the_front_kernels_settings(page, sidebar_lab, tmp_path):
    from playwright.sync_api import expect

    sidebar = open_sidebar(page)

    # Every GPU with its name and memory figures (the fake: A100 30,000 of 40,960 MiB, H100 2,048 of 81,920).
    for name in GPU_NAMES:
        expect(sidebar).to_contain_text(name, timeout=30_000)
    expect(sidebar).to_contain_text("30,000 / 40,960 MiB")
    expect(sidebar).to_contain_text("2,048 / 81,920 MiB")

    # Two notebooks with kernels; the fake then says both kernels hold memory on GPU 1.
    open_notebook(page, HOSTILE_NB)
    sidebar_lab.kernel_pid(HOSTILE_NB)
    # Closing its tab leaves its kernel running (JupyterLab's default), so its memory stays; and the page helpers
    # then see one notebook's cells.
    close_notebook(page, HOSTILE_NB)
    open_notebook(page, TRAIN)
    sidebar_lab.hold_memory({sidebar_lab.kernel_pid(TRAIN): 4096, sidebar_lab.kernel_pid(HOSTILE_NB): 1536})
    page.locator(SIDEBAR_TAB).click()
    expect(sidebar).to_be_visible()
    train_row = sidebar.get_by_role("button", name=re.compile(r"Open train\.ipynb"))
    expect(train_row).to_be_visible(timeout=30_000)
    expect(train_row).to_contain_text("4,096 MiB")
    hostile_row = sidebar.get_by_role("button", name=re.compile(re.escape(f"Open {HOSTILE_NB}")))
    expect(hostile_row).to_contain_text(HOSTILE)  # the name as text ...
    expect(hostile_row).to_contain_text("1,536 MiB")
    expect(sidebar.locator("img")).to_have_count(0)  # ... and never an element
    assert page.dialogs == [], page.dialogs

    # The front notebook (train.ipynb) has not loaded the extension: the Load button inserts and runs it.
    load = sidebar.get_by_role("button", name="Load tfgpu_magic")
    expect(load).to_be_visible(timeout=30_000)
    load.click()
    first = page.locator(CELL).first
    expect(first.locator(".cm-content")).to_have_text("%load_ext tfgpu_magic", timeout=30_000)
    expect(first.locator(".jp-InputPrompt")).to_have_text(re.compile(r"^\[\d+\]:$"), timeout=60_000)
    expect(load).to_have_count(0, timeout=30_000)
    expect(sidebar.locator(".tfgpu-tf")).to_contain_text("TensorFlow", timeout=30_000)  # the comm is connected

    # Settings asked in the notebook show in the sidebar, then what became of them once TensorFlow runs.
    page.locator(CELL).first.click()
    add_cell_below(page)
    run_cell(page, 1, "%tfgpu cpus 2\n%tfgpu placement on")
    expect(sidebar.locator("table", has_text="cpus")).to_contain_text("waiting for import", timeout=30_000)
    add_cell_below(page)
    run_cell(page, 2, "import tensorflow as tf\n"
                      "with tf.device('CPU:1'):\n    x = tf.matmul(tf.ones((2, 2)), tf.ones((2, 2)))")
    settings = sidebar.locator("table", has_text="cpus")
    expect(settings).to_contain_text("applied", timeout=60_000)
    expect(settings).to_contain_text("2 logical CPUs")
    expect(sidebar).to_contain_text("CPU:1")
    placement = sidebar.locator(".tfgpu-placement")  # the tail of the placement log, through the comm
    expect(placement).to_contain_text(re.compile(r"MatMul"), timeout=30_000)
    expect(placement).to_contain_text("CPU:1")

    shots = []
    for theme in ("light", "dark"):
        if theme == "dark":
            set_theme(page, "JupyterLab Dark")
            expect(sidebar).to_contain_text(GPU_NAMES[0])
        shot = tmp_path / f"sidebar-{theme}.png"
        page.screenshot(path=str(shot))
        keep_screenshot(shot)
        shots.append(shot)
    set_theme(page, "JupyterLab Light")
    assert all(s.stat().st_size > 10_000 for s in shots)

    # Hidden (another panel in the left area), the sidebar asks the server nothing; shown, it asks at once.
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/tfgpu/api/gpus" in r.url else None)
    page.locator('.jp-SideBar [data-id="filebrowser"]').click()
    expect(sidebar).to_be_hidden()
    time.sleep(1)  # a request already under way may still land
    asked.clear()
    time.sleep(6)  # three refresh intervals (2 s by default)
    assert asked == [], asked
    page.locator(SIDEBAR_TAB).click()
    expect(sidebar).to_be_visible()
    deadline = time.monotonic() + 5
    while not asked and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert asked, "the sidebar did not ask the server when shown again"

    # A click on a notebook's row opens it.
    hostile_row.click()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=HOSTILE)).to_be_visible(
        timeout=30_000)
    assert page.dialogs == [], page.dialogs


def test_the_sidebar_loads_in_notebook_7(sidebar_lab):
    """Notebook 7 serves the same frontend extensions: the sidebar is in its left area and fills from the server."""
    from playwright.sync_api import expect

    lab = sidebar_lab.lab
    with lab.browser_page(width=1400, height=1000) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{lab.url}/notebooks/{urllib.parse.quote(TRAIN)}?token={lab.token}")
        expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=60_000)
        sidebar = page.locator(SIDEBAR)
        expect(sidebar).to_be_attached(timeout=60_000)
        # Notebook 7 keeps side panels closed: View > Left Sidebar > Show GPUs opens it, as a user would.
        page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
        page.locator(".lm-Menu-itemLabel", has_text="Left Sidebar").first.hover()
        page.locator(".lm-Menu-itemLabel", has_text="GPUs").first.click()
        expect(sidebar).to_be_visible(timeout=30_000)
        expect(sidebar).to_contain_text(GPU_NAMES[1], timeout=30_000)
        assert not [e for e in errors if "tfgpu" in e.lower()], errors
