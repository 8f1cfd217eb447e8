"""The GPU-aware idle culler in Chromium, against a real server whose NVML is the fake library (issue "Idle means
idle").

One Lab for the module, with a culler that shuts down a kernel idle 10 s while it holds GPU memory and warns 6 s
before (it looks every 0.5 s, the kernels' activity is read every second). Each test opens a notebook of its own and
makes the fake NVML list that notebook's kernel on GPU 1, holding 4096 MiB at 0% SM utilization: idle by tfgpu's
rule. Checked: the warning reaches the page as a notification naming the notebook while the kernel is alive; after
the shutdown the sidebar says so, and still does after a page load; "Keep running" (the notification's button,
then the sidebar's) keeps the kernel past the time it would have been shut down, closes that notification at once,
and a later warning (idle that long again) is one new notification. And the kernel's pause: the sidebar's kernel
channel says when the kernel stops its pushes (idle, or the page hidden: the link tells the kernel) and when they
start again.

Screenshots in the light and dark themes (the page with a warning in the sidebar and its notification, the
notification alone, the sidebar's "shut down" line) go to the test's tmp folder and, when TFGPU_SCREENSHOTS names
a folder, there too. Skipped where the browser is missing, failed with CI=true.
"""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    SIDEBAR,
    Lab,
    keep_screenshot,
    kernel_id,
    kernel_pid,
    open_notebook,
    open_sidebar,
    require_browser,
    run_cell,
    set_page_visible,
    set_theme,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser]

AFTER_S = 10  # c.TfgpuServer.cull_idle_gpu_kernels_after
WARNING_S = 6  # c.TfgpuServer.cull_warning
HELD_MIB = 4096
WARNING_TOAST = ".Toastify__toast"


def holding(pid: int | None, sm: int = 0) -> dict:
    """Three fake GPUs; GPU 1 lists ``pid`` holding HELD_MIB at ``sm`` % SM utilization (0: computing nothing)."""
    config = three_gpus()
    h100 = copy.deepcopy(config["gpus"][1])
    h100["processes"] = [{"pid": pid, "used": HELD_MIB * MIB, "sm": sm}] if pid else []
    return {**config, "gpus": [config["gpus"][0], h100, config["gpus"][2]]}


class CullerLab:
    def __init__(self, lab: Lab, config_path: Path):
        self.lab = lab
        self.config_path = config_path

    def hold(self, notebook: str, sm: int = 0) -> tuple[str, int]:
        """The fake NVML lists ``notebook``'s kernel on GPU 1 (at ``sm`` % SM utilization): its id and pid."""
        pid = kernel_pid(self.lab, notebook)
        write_config(self.config_path, holding(pid, sm))
        return kernel_id(self.lab, notebook), pid

    def alive(self, kernel: str) -> bool:
        return kernel in {k["id"] for k in self.lab.api("GET", "/api/kernels")}

    def warning(self, kernel: str) -> dict | None:
        """The server's warning of ``kernel`` now (None: not warned)."""
        culler = self.lab.api("GET", "/tfgpu/api/gpus")["culler"]
        return next((w for w in culler["warnings"] if w["kernel_id"] == kernel), None)


@pytest.fixture(scope="module")
def culler_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("culler_nvml") / "fake_nvml.cfg", holding(None))
    args = [f"--TfgpuServer.cull_idle_gpu_kernels_after={AFTER_S}", f"--TfgpuServer.cull_warning={WARNING_S}",
            "--TfgpuServer.cull_interval=0.5", "--TfgpuServer.activity_interval=1"]
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={}), extra_args=args) as lab:
        for name in ("train.ipynb", "keep.ipynb", "pause.ipynb", "busy.ipynb"):
            write_notebook(lab.root / name)
        yield CullerLab(lab, config)


@pytest.fixture
def page(culler_lab):
    with watched_page(culler_lab.lab) as page:
        yield page



def warning_toasts(page, notebook: str):
    return page.locator(WARNING_TOAST, has_text=re.compile(rf"{re.escape(notebook)} will be shut down in"))


def shoot(page, locator, tmp_path: Path, name: str) -> Path:
    """``locator``'s picture (the page's where None) as ``name``.png, kept with keep_screenshot."""
    page.mouse.move(0, 0)  # no hover
    page.wait_for_timeout(300)  # the theme's colours settle
    shot = tmp_path / f"{name}.png"
    (locator or page).screenshot(path=str(shot))
    keep_screenshot(shot)
    assert shot.stat().st_size > 3_000, shot
    return shot


def test_the_warning_reaches_the_page_before_the_shutdown_which_the_sidebar_then_says(page, culler_lab, tmp_path):
    """A notification names the notebook, its memory and the time left while the kernel is still alive; after the
    shutdown the sidebar's top line says which notebook was shut down, and a page load keeps it there."""
    from playwright.sync_api import expect

    set_theme(page, "JupyterLab Light")
    open_notebook(page, "train.ipynb")
    sidebar = open_sidebar(page)
    kernel, _ = culler_lab.hold("train.ipynb")
    toast = warning_toasts(page, "train.ipynb")
    # Warned once idle AFTER_S - WARNING_S: the page asks every 2 s (never slower than a third of the warning).
    expect(toast).to_have_count(1, timeout=(AFTER_S + 10) * 1000)
    assert culler_lab.alive(kernel), "warned only after the shutdown"
    expect(toast).to_contain_text("GPU 1")
    expect(toast).to_contain_text("4.0 GiB")
    expect(toast.locator("button", has_text="Keep running")).to_be_visible()
    # The sidebar lists it too, for a user who closed the notification; the row says how long it has been idle.
    warned = sidebar.locator(".tfgpu-cull-warning", has_text="train.ipynb will be shut down in")
    expect(warned.locator("button.tfgpu-keep")).to_have_text("Keep running")
    row = sidebar.locator(f'.tfgpu-notebook[data-kernel-id="{kernel}"]')
    expect(row.locator(".tfgpu-activity")).to_have_text(re.compile(r"^idle"))
    shoot(page, None, tmp_path, "culler-warning-light")
    shoot(page, toast, tmp_path, "culler-notification-light")
    assert culler_lab.alive(kernel)
    text = toast.inner_text()
    page.wait_for_timeout(2500)  # a poll or two: the time left counts down in the same notification
    expect(toast).to_have_count(1)
    assert culler_lab.alive(kernel), "shut down before the warning's time"
    assert toast.inner_text() != text or not culler_lab.alive(kernel)

    # Shut down: the notification goes, the sidebar's line names the notebook and what was freed.
    deadline = time.monotonic() + WARNING_S + 15
    while culler_lab.alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not culler_lab.alive(kernel), f"not shut down:\n{culler_lab.lab.log_tail()}"
    expect(toast).to_have_count(0, timeout=10_000)
    released = sidebar.locator(".tfgpu-cull-released", has_text=re.compile(r"Shut down train\.ipynb at \d\d:\d\d"))
    expect(released).to_have_count(1, timeout=10_000)
    expect(released).to_contain_text("GPU 1")
    expect(sidebar.locator(".tfgpu-cull-warning")).to_have_count(0)
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        shoot(page, sidebar, tmp_path, f"culler-released-{theme.split()[-1].lower()}")

    # The server keeps it: a page load (the next visit) shows it again, until dismissed here.
    page.reload()
    sidebar = open_sidebar(page)
    released = sidebar.locator(".tfgpu-cull-released", has_text="Shut down train.ipynb")
    expect(released).to_have_count(1, timeout=30_000)
    released.locator("button.tfgpu-released-dismiss").click()
    expect(released).to_have_count(0)
    page.reload()
    sidebar = open_sidebar(page)
    expect(sidebar.locator(".tfgpu-gpu").first).to_be_visible(timeout=30_000)  # an answer came
    page.wait_for_timeout(1000)
    expect(sidebar.locator(".tfgpu-cull-released", has_text="Shut down train.ipynb")).to_have_count(0)


def test_a_kernel_computing_without_a_cell_is_busy_never_warned(page, culler_lab, tmp_path):
    """No cell runs, but the kernel computes on GPU 1 (90 % SM): its row says so, emphasised, and it is neither
    warned nor shut down past the culler's timeout."""
    from playwright.sync_api import expect

    open_notebook(page, "busy.ipynb")
    sidebar = open_sidebar(page)
    kernel, pid = culler_lab.hold("busy.ipynb", sm=90)
    row = sidebar.locator(f'.tfgpu-notebook[data-kernel-id="{kernel}"]')
    activity = row.locator(".tfgpu-activity")
    expect(activity).to_have_text(f"busy on GPU 1 (pid {pid}, 90% SM)", timeout=30_000)
    expect(row).to_have_class(re.compile("tfgpu-gpu-busy"))
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        shoot(page, row, tmp_path, f"culler-busy-row-{theme.split()[-1].lower()}")
    set_theme(page, "JupyterLab Light")
    deadline = time.monotonic() + AFTER_S + 2  # an idle kernel is warned after AFTER_S - WARNING_S
    while time.monotonic() < deadline:
        assert culler_lab.warning(kernel) is None and culler_lab.alive(kernel)
        expect(warning_toasts(page, "busy.ipynb")).to_have_count(0)
        time.sleep(1)
    write_config(culler_lab.config_path, holding(None))  # the next tests start from no holder


def test_keep_running_keeps_the_kernel_past_its_shutdown(page, culler_lab, tmp_path):
    """"Keep running" in the notification: the notification closes at once, "keep.ipynb keeps running" says so, and
    the kernel lives past the time it would have been shut down. Idle that long again, it is warned again: one new
    notification, and the sidebar's own "Keep running" keeps it once more."""
    from playwright.sync_api import expect

    set_theme(page, "JupyterLab Dark")  # this test's pictures are the dark ones (a warning lasts 6 s)
    try:
        open_notebook(page, "keep.ipynb")
        sidebar = open_sidebar(page)
        kernel, _ = culler_lab.hold("keep.ipynb")
        toast = warning_toasts(page, "keep.ipynb")
        expect(toast).to_have_count(1, timeout=(AFTER_S + 10) * 1000)
        first = culler_lab.warning(kernel)
        assert first is not None, "the page shows a warning the server does not have"
        shoot(page, None, tmp_path, "culler-warning-dark")
        shoot(page, toast, tmp_path, "culler-notification-dark")
        toast.locator("button", has_text="Keep running").click()
        expect(page.locator(WARNING_TOAST, has_text="keep.ipynb keeps running")).to_be_visible(timeout=5_000)
        expect(toast).to_have_count(0, timeout=2_000)  # at once: the next warning comes AFTER_S - WARNING_S later
        assert culler_lab.warning(kernel) is None or culler_lab.warning(kernel)["shutdown_at"] != first["shutdown_at"]

        # Past the time it would have been shut down, it runs.
        time.sleep(max(0.0, first["shutdown_at"] + 3 - time.time()))
        assert culler_lab.alive(kernel), f"shut down although kept:\n{culler_lab.lab.log_tail()}"

        # Idle AFTER_S - WARNING_S again: warned again, a new notification (one), and the sidebar's button keeps it.
        expect(toast).to_have_count(1, timeout=(AFTER_S + 5) * 1000)
        second = culler_lab.warning(kernel)
        assert second is not None and second["shutdown_at"] > first["shutdown_at"] + 1, (first, second)
        warned = sidebar.locator(".tfgpu-cull-warning", has_text="keep.ipynb will be shut down in")
        warned.locator("button.tfgpu-keep").click()
        expect(toast).to_have_count(0, timeout=3_000)
        expect(warned).to_have_count(0, timeout=5_000)
        time.sleep(max(0.0, second["shutdown_at"] + 3 - time.time()))
        assert culler_lab.alive(kernel), f"shut down although kept:\n{culler_lab.lab.log_tail()}"
        expect(sidebar.locator(".tfgpu-cull-released", has_text="keep.ipynb")).to_have_count(0)
    finally:
        write_config(culler_lab.config_path, holding(None))  # nothing held: not culled behind the next test
        set_theme(page, "JupyterLab Light")


def test_the_sidebar_says_when_the_kernel_pauses_its_pushes(page, culler_lab):
    """Idle ``live_pause_after`` seconds, the kernel pauses its live pushes and the sidebar says so ("paused: the kernel
    is idle"); a cell resumes them. The page hidden, the link tells the kernel, which pauses ("paused: the page is
    hidden"), and shown again, resumes. No GPU memory held here: the culler leaves this kernel alone."""
    from playwright.sync_api import expect

    set_theme(page, "JupyterLab Light")
    open_notebook(page, "pause.ipynb")
    sidebar = open_sidebar(page)
    run_cell(page, 0, "%load_ext tfgpu_magic\n%config TfgpuMagics.live_pause_after = 3", count=1)
    section = sidebar.locator(".tfgpu-this-notebook")
    paused = section.locator(".tfgpu-link-paused")
    expect(section.locator(".tfgpu-link-status")).to_have_count(0, timeout=30_000)  # connected: the kernel answered
    expect(paused).to_have_text("paused: the kernel is idle", timeout=20_000)
    # A cell: the kernel pushes its whole state again, and never pauses for idleness now.
    run_cell(page, 0, "%config TfgpuMagics.live_pause_after = 0", count=2)
    expect(paused).to_have_count(0, timeout=20_000)

    set_page_visible(page, False)
    expect(paused).to_have_text("paused: the page is hidden", timeout=20_000)
    set_page_visible(page, True)
    expect(paused).to_have_count(0, timeout=20_000)
    page.wait_for_timeout(4000)  # idle well past 3 s: no idle pause any more
    expect(paused).to_have_count(0)


def test_an_idle_server_is_asked_less_often_until_a_cell_runs(fake_nvml_lib, tmp_path):
    """No culler, every kernel idle: the page (status-bar item on, sidebar closed) asks every idleRefreshInterval
    (60 s) instead of every 2 s; a cell run from the page brings the usual interval back at once."""
    from playwright.sync_api import expect

    require_browser()
    config = write_config(tmp_path / "fake_nvml.cfg", holding(None))
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        write_notebook(lab.root / "quiet.ipynb")
        with watched_page(lab) as page:
            asked: list[float] = []
            page.on("request", lambda r: asked.append(time.monotonic()) if "/tfgpu/api/gpus" in r.url else None)
            open_notebook(page, "quiet.ipynb")
            page.wait_for_timeout(3000)  # the first answers (every kernel idle) set the pace
            expect(page.locator(SIDEBAR)).to_be_hidden()
            start = time.monotonic()
            page.wait_for_timeout(10_000)
            quiet = [t for t in asked if t >= start]
            assert len(quiet) <= 1, f"{len(quiet)} requests in 10 s while every kernel is idle"
            before = len(asked)
            ran = time.monotonic()
            run_cell(page, 0, "import time; time.sleep(3)", count=1)
            busy = [t for t in asked[before:] if t >= ran]
            assert busy and busy[0] - ran < 2, "the cell did not bring the usual interval back at once"
            assert len(busy) >= 2, f"{len(busy)} requests while the cell ran 3 s"
