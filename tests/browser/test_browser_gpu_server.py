"""The sidebar on a shared GPU server, in Chromium, against a real server whose NVML is the fake library.

One Lab for the module; its server samples every GPU each 0.5 s whether or not a sidebar is open. GPU 0 is an
A100 in MIG mode with two MIG devices, GPU 1 an H100, GPU 2 a T4. The tests check that each GPU (and MIG device)
has its chart the moment the sidebar opens, drawn from what the server sampled while it was closed, and that later
polls only ask for what is new; that "Shut down" on a notebook's row asks first (Cancel keeps the kernel), then
shuts down that kernel alone; that a process which is not this server's kernel (a foreign pid, a kernel's child)
offers no shut-down; that MIG devices are rows under their GPU with their own processes; and that a 403 (the
page's session ended) says so with a Reload button, and goes once a request succeeds.

Screenshots in the light and dark themes (the charts, a MIG GPU, the shut-down dialog) go to the test's tmp folder
and, when TFGPU_SCREENSHOTS names a folder, there too. Skipped where the browser is missing, failed with CI=true.
"""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
from fakenvml import MIB, fake_env, mig_gpu, three_gpus, write_config
from labsession import (
    SIDEBAR,
    SIDEBAR_TAB,
    Lab,
    close_notebook,
    element_screenshot,
    keep_screenshot,
    kernel_expression,
    kernel_id,
    kernel_pid,
    open_notebook,
    require_browser,
    set_theme,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

SAMPLE_S = 0.5  # the server's sampling interval here (2 s by default): a few seconds make a chart
MIG_UUIDS = ("MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d", "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f")
FOREIGN_PID = 3999901  # no such process here: NVML lists it, /proc does not know it


def shared_config(h100_processes: list[dict] | None = None, mig_processes: list[dict] | None = None,
                  h100_used_mib: int = 2048, h100_util: int = 3) -> dict:
    """GPU 0 an A100 in MIG mode (slot 0 3g.20gb, slot 1 2g.10gb), GPU 1 an H100, GPU 2 a T4. The H100 lists
    ``h100_processes`` (default: none) beside the foreign pid; MIG slot 0 lists ``mig_processes`` (default: its
    usual "self", the server, which is no kernel)."""
    base = three_gpus()
    a100 = mig_gpu()
    if mig_processes is not None:
        a100["mig"]["devices"][0]["processes"] = mig_processes
    h100 = copy.deepcopy(base["gpus"][1])
    h100["processes"] = [*(h100_processes or []), {"pid": FOREIGN_PID, "used": 900 * MIB}]
    h100["memory_used"] = h100_used_mib * MIB
    h100["utilization_gpu"] = h100_util
    return {**base, "gpus": [a100, h100, copy.deepcopy(base["gpus"][2])]}


class GpuServerLab:
    def __init__(self, lab: Lab, config_path: Path):
        self.lab = lab
        self.config_path = config_path

    def write(self, config: dict) -> None:
        write_config(self.config_path, config)

    def kernel_pid(self, notebook: str, timeout: float = 60) -> int:
        return kernel_pid(self.lab, notebook, timeout)

    def kernel_ids(self) -> set[str]:
        return {k["id"] for k in self.lab.api("GET", "/api/kernels")}


@pytest.fixture(scope="module")
def gpu_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("gpu_server_nvml") / "fake_nvml.cfg", shared_config())
    args = [f"--TfgpuServer.history_interval={SAMPLE_S}"]
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={}), extra_args=args) as lab:
        for name in ("keep.ipynb", "stop.ipynb", "child.ipynb", "mig.ipynb"):
            write_notebook(lab.root / name)
        yield GpuServerLab(lab, config)


@pytest.fixture
def page(gpu_lab):
    with watched_page(gpu_lab.lab) as page:
        yield page


def wait_for_app(page):
    from playwright.sync_api import expect

    expect(page.locator(SIDEBAR_TAB)).to_have_attribute("title", re.compile("GPUs"), timeout=60_000)


def open_sidebar(page):
    from playwright.sync_api import expect

    sidebar = page.locator(SIDEBAR)
    if not sidebar.is_visible():
        page.locator(SIDEBAR_TAB).click()
    expect(sidebar).to_be_visible()
    return sidebar


def gpu_block(sidebar, index: int):
    return sidebar.locator(f'.tfgpu-gpu[data-gpu="gpu-{index}"]')


def shoot(page, locator, tmp_path: Path, name: str, prepare=None, after=None) -> list[Path]:
    """``locator``'s picture in the light and the dark theme (then back to light). ``prepare()`` runs once the theme
    is set (the theme menu moves the pointer: a hover must be made again; a dialog opened), ``after()`` after the
    picture (a dialog closed: the theme menu cannot be reached under it)."""
    from playwright.sync_api import expect

    shots = []
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        if prepare:
            prepare()
        expect(locator).to_be_visible()
        page.wait_for_timeout(400)  # the theme's colours settle
        shot = tmp_path / f"{name}-{theme.split()[-1].lower()}.png"
        element_screenshot(locator, shot)
        keep_screenshot(shot)
        assert shot.stat().st_size > 3_000, shot
        shots.append(shot)
        if after:
            after()
    set_theme(page, "JupyterLab Light")
    return shots


def hover_at(page, chart, fraction: float) -> None:
    """The pointer on ``chart``'s plot, ``fraction`` of its width from the left."""
    box = chart.locator(".tfgpu-chart-plot").bounding_box()
    page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)


def with_made_up_past(history: dict, window_s: float = 600, step_s: float = 2) -> dict:
    """``history`` (the server's) with samples made up for the ``window_s`` before its first one: the module's server
    has sampled for seconds only, and a picture of the charts should show a whole window. Memory and utilization
    step through levels (equal for a while, to show they stay apart where they overlap) with an unreadable
    stretch (nulls: a gap)."""
    levels = [(10, 0), (45, 95), (45, 45), (80, 60), (None, None), (30, 5), (30, 70), (62, 62)]
    out = copy.deepcopy(history)
    for series in out["gpus"].values():
        first = series["t"][0] if series["t"] else time.time()
        total = series["memory_total_mib"] or 1
        times = [first - window_s + i * step_s for i in range(int(window_s / step_s))]
        used, util = [], []
        for i in range(len(times)):
            memory_pct, util_pct = levels[i * len(levels) // len(times)]
            used.append(None if memory_pct is None else int(total * memory_pct / 100))
            util.append(util_pct)
        series["t"] = times + series["t"]
        series["memory_used_mib"] = used + series["memory_used_mib"]
        if series["utilization_gpu_pct"] is not None:
            series["utilization_gpu_pct"] = util + series["utilization_gpu_pct"]
    return out


def test_each_gpu_has_a_chart_the_moment_the_sidebar_opens(page, gpu_lab, tmp_path):
    """The server sampled while the sidebar was closed: the first answer (?history=600) draws every chart at once,
    with the steps the GPU went through; later polls ask only for what is new (&since=)."""
    from playwright.sync_api import expect

    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/tfgpu/api/gpus" in r.url else None)
    page.reload()  # every request of the page seen, from its first
    wait_for_app(page)
    # The H100's memory and utilization step up and down while nobody looks.
    for used, util in ((2048, 3), (30000, 85), (30000, 20), (12000, 60), (12000, 5)):
        gpu_lab.write(shared_config(h100_used_mib=used, h100_util=util))
        time.sleep(1.5)
    # Closed, the sidebar asks only for the status-bar item (its poll goes on then), and its first request asks
    # for the whole window: the server kept sampling whoever asked.
    sidebar = open_sidebar(page)
    for index in range(3):
        chart = gpu_block(sidebar, index).locator(".tfgpu-gpu-heading ~ .tfgpu-chart").first
        expect(chart).to_be_visible(timeout=30_000)
    assert "history=600" in asked[0] and "since=" not in asked[0], asked
    h100 = gpu_block(sidebar, 1).locator(".tfgpu-chart")
    memory = h100.locator("path.tfgpu-chart-line.tfgpu-series-memory")
    utilization = h100.locator("path.tfgpu-chart-line.tfgpu-series-utilization")
    # Drawn from the first answer: the steps of the last seconds, horizontal holds joined by vertical edges.
    for line in (memory, utilization):
        d = line.get_attribute("d")
        assert d and re.fullmatch(r"(M[\d.]+ [\d.]+(?:[HV][\d.]+)+)+", d), d
        assert d.count("V") >= 2, d
    expect(h100.locator(".tfgpu-chart-xaxis")).to_have_text(re.compile(r"-10 min.*-5 min.*now"))
    expect(h100.locator(".tfgpu-chart-legend")).to_contain_text("memory used")
    expect(h100.locator(".tfgpu-chart-legend")).to_contain_text("utilization")
    # MIG devices: memory only.
    for uuid in MIG_UUIDS:
        mig_chart = sidebar.locator(f'.tfgpu-mig[data-mig="{uuid}"] .tfgpu-chart')
        expect(mig_chart.locator("path.tfgpu-chart-line.tfgpu-series-memory")).to_have_count(1)
        expect(mig_chart.locator("path.tfgpu-chart-line.tfgpu-series-utilization")).to_have_count(0)

    # The next polls ask only for samples after the last one kept, and the line grows.
    deadline = time.monotonic() + 15
    while not any("since=" in url for url in asked) and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert any("since=" in url and "history=600" in url for url in asked), asked

    # Hover: a vertical line and a label with the time and both values.
    plot = h100.locator(".tfgpu-chart-plot")
    box = plot.bounding_box()
    # One pixel from the right edge: a couple of seconds ago (the server has sampled for seconds only).
    page.mouse.move(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2)
    hover = h100.locator(".tfgpu-chart-hover")
    expect(hover).to_be_visible()
    expect(hover.locator(".tfgpu-chart-hover-time")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    expect(hover.locator(".tfgpu-chart-hover-values")).to_have_text(re.compile(r"^mem \d+% · util \d+%$"))
    # Inside the plot, however narrow the sidebar: never cut off at its edge.
    plot_box, hover_box = h100.locator(".tfgpu-chart-plot").bounding_box(), hover.bounding_box()
    assert plot_box["x"] <= hover_box["x"]
    assert hover_box["x"] + hover_box["width"] <= plot_box["x"] + plot_box["width"] + 1
    cursor = h100.locator(".tfgpu-chart-cursor")  # a vertical line: no width, so no Playwright "visible"
    assert cursor.evaluate("n => getComputedStyle(n).display") != "none"
    assert float(cursor.get_attribute("x1")) > 290, cursor.get_attribute("x1")  # at the pointer (the box is 300 wide)
    page.mouse.move(5, 500)
    expect(hover).to_be_hidden()
    assert cursor.evaluate("n => getComputedStyle(n).display") == "none"


def test_a_whole_window_of_charts_in_light_and_dark(page, gpu_lab, tmp_path):
    """The charts over a whole 10 minutes, for the eye: the server's first answer with a made-up past (the server has
    sampled for seconds only). Steps, the gap, both series where they overlap, the hover label; light and dark."""
    from playwright.sync_api import expect

    def made_up(route):
        answer = route.fetch()
        document = answer.json()
        if "since=" not in route.request.url and document.get("history"):
            document["history"] = with_made_up_past(document["history"])
        route.fulfill(response=answer, json=document)

    gpu_lab.write(shared_config(h100_used_mib=20000, h100_util=62))
    page.route("**/tfgpu/api/gpus*", made_up)
    page.reload()  # the page's first answer, whenever it comes (the status-bar item asks with the sidebar closed)
    wait_for_app(page)
    sidebar = open_sidebar(page)
    h100 = gpu_block(sidebar, 1).locator(".tfgpu-chart")
    memory = h100.locator("path.tfgpu-chart-line.tfgpu-series-memory")
    expect(memory).to_have_attribute("d", re.compile(r"^M0 "), timeout=30_000)  # from the left edge
    assert memory.get_attribute("d").count("M") == 2  # the unreadable stretch is a gap
    area = h100.locator("path.tfgpu-chart-area")
    assert area.get_attribute("d").count("Z") == 2

    def hover():
        hover_at(page, h100, 0.33)
        expect(h100.locator(".tfgpu-chart-hover-values")).to_have_text(re.compile(r"^mem 45% · util (95|45)%$"))

    shoot(page, sidebar, tmp_path, "sidebar-charts", prepare=hover)
    shoot(page, h100, tmp_path, "chart-h100", prepare=hover)


def test_shut_down_asks_then_shuts_down_that_kernel_only(page, gpu_lab, tmp_path):
    from playwright.sync_api import expect

    lab = gpu_lab.lab
    wait_for_app(page)
    open_notebook(page, "keep.ipynb")
    keep_pid = gpu_lab.kernel_pid("keep.ipynb")
    close_notebook(page, "keep.ipynb")  # its kernel keeps running, as JupyterLab's default is
    open_notebook(page, "stop.ipynb")
    stop_pid = gpu_lab.kernel_pid("stop.ipynb")
    keep_id, stop_id = kernel_id(lab, "keep.ipynb"), kernel_id(lab, "stop.ipynb")
    gpu_lab.write(shared_config([{"pid": keep_pid, "used": 1536 * MIB}, {"pid": stop_pid, "used": 4096 * MIB}]))

    sidebar = open_sidebar(page)
    stop_row = sidebar.locator(f'.tfgpu-notebook[data-kernel-id="{stop_id}"]')
    keep_row = sidebar.locator(f'.tfgpu-notebook[data-kernel-id="{keep_id}"]')
    expect(stop_row).to_contain_text("4,096 MiB", timeout=30_000)
    expect(stop_row).to_contain_text(re.compile(r"idle|busy"))  # how long it has been idle
    expect(keep_row).to_contain_text("1,536 MiB")
    button = stop_row.locator(".tfgpu-shutdown")
    expect(button).to_have_attribute("aria-label", "Shut down the kernel of stop.ipynb")

    # The dialog names the notebook and what it frees; Cancel changes nothing (twice: in each theme's picture).
    dialog = page.locator(".jp-Dialog")

    def ask():
        button.click()
        expect(dialog.locator(".tfgpu-shutdown-dialog")).to_contain_text("Shut down the kernel of stop.ipynb?")
        expect(dialog).to_contain_text("This frees 4,096 MiB on GPU 1.")

    def cancel():
        dialog.locator("button.tfgpu-shutdown-cancel").click()
        expect(dialog).to_have_count(0)

    shoot(page, dialog.locator(".jp-Dialog-content"), tmp_path, "shutdown-dialog", prepare=ask, after=cancel)
    time.sleep(1)
    assert {keep_id, stop_id} <= gpu_lab.kernel_ids()
    expect(stop_row).to_be_visible()

    # Confirmed: that kernel is shut down (the server's REST API no longer has it), the other runs on.
    button.click()
    dialog.locator("button.tfgpu-shutdown-confirm").click()
    expect(dialog).to_have_count(0)
    deadline = time.monotonic() + 30
    while stop_id in gpu_lab.kernel_ids() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stop_id not in gpu_lab.kernel_ids()
    assert keep_id in gpu_lab.kernel_ids()
    expect(stop_row).to_have_count(0, timeout=10_000)  # within one refresh
    expect(keep_row).to_contain_text("1,536 MiB")
    expect(sidebar.locator(".tfgpu-shutdown-error")).to_have_count(0)


def test_only_this_servers_kernels_offer_shut_down(page, gpu_lab):
    """A foreign pid (no process here) and a kernel's child process holding GPU memory have no shut-down action."""
    from playwright.sync_api import expect

    lab = gpu_lab.lab
    wait_for_app(page)
    open_notebook(page, "child.ipynb")
    gpu_lab.kernel_pid("child.ipynb")  # its session is there (open_notebook may return before)
    child_pid = int(kernel_expression(lab, "child.ipynb",
                                      "__import__('subprocess').Popen(['sleep', '600']).pid"))
    child_kernel = kernel_id(lab, "child.ipynb")
    gpu_lab.write(shared_config([{"pid": child_pid, "used": 512 * MIB}]))

    sidebar = open_sidebar(page)
    h100 = gpu_block(sidebar, 1)
    child_row = h100.locator(f'.tfgpu-notebook[data-kernel-id="{child_kernel}"]')
    expect(child_row).to_contain_text("512 MiB", timeout=30_000)
    expect(child_row.locator(".tfgpu-shutdown")).to_have_count(0)  # its child, not the kernel itself
    foreign = h100.locator(".tfgpu-process", has_text=f"pid {FOREIGN_PID}")
    expect(foreign).to_be_visible()
    expect(foreign.locator(".tfgpu-shutdown")).to_have_count(0)
    expect(sidebar.locator(".tfgpu-process .tfgpu-shutdown")).to_have_count(0)
    # The server itself ("self" on MIG slot 0) is a process of the user, but no kernel: no action either.
    expect(sidebar.locator(f'.tfgpu-mig[data-mig="{MIG_UUIDS[0]}"] .tfgpu-shutdown')).to_have_count(0)


def test_mig_devices_are_rows_under_their_gpu(page, gpu_lab, tmp_path):
    from playwright.sync_api import expect

    lab = gpu_lab.lab
    wait_for_app(page)
    open_notebook(page, "mig.ipynb")
    mig_pid = gpu_lab.kernel_pid("mig.ipynb")
    gpu_lab.write(shared_config(mig_processes=[{"pid": mig_pid, "used": 1000 * MIB}]))

    sidebar = open_sidebar(page)
    a100 = gpu_block(sidebar, 0)
    expect(a100.locator(".tfgpu-mig-mode")).to_have_text("MIG mode · 2 MIG devices", timeout=30_000)
    slots = a100.locator(".tfgpu-mig")
    expect(slots).to_have_count(2)
    expect(slots.nth(0).locator(".tfgpu-mig-heading")).to_have_text("MIG 3g.20gb · slot 0")
    expect(slots.nth(1).locator(".tfgpu-mig-heading")).to_have_text("MIG 2g.10gb · slot 1")
    expect(slots.nth(0)).to_contain_text("1,024 / 19,968 MiB (5%)")
    expect(slots.nth(1)).to_contain_text("512 / 9,728 MiB (5%)")
    # NVML reports no utilization per MIG device: said so, never 0%.
    expect(slots.nth(0).locator(".tfgpu-util")).to_have_text(re.compile(r"^(n/a|not reported)$"))
    expect(slots.nth(1).locator(".tfgpu-util")).not_to_have_text("0%")
    # The kernel on slot 0 is listed under that MIG device (with its shut-down), not again under the GPU.
    mig_kernel = kernel_id(lab, "mig.ipynb")
    row = slots.nth(0).locator(f'.tfgpu-notebook[data-kernel-id="{mig_kernel}"]')
    expect(row).to_contain_text("1,000 MiB")
    expect(row.locator(".tfgpu-shutdown")).to_have_count(1)
    expect(a100.locator(f'.tfgpu-notebook[data-kernel-id="{mig_kernel}"]')).to_have_count(1)
    expect(slots.nth(1)).to_contain_text("pid 3999903")
    shoot(page, a100, tmp_path, "sidebar-mig")

    # A shut-down the server refuses: one line says so, and the kernel runs on.
    page.route("**/api/kernels/*", lambda route: route.fulfill(
        status=500, content_type="application/json", body='{"message": "refused for the test"}')
        if route.request.method == "DELETE" else route.continue_())
    row.locator(".tfgpu-shutdown").click()
    page.locator(".jp-Dialog button.tfgpu-shutdown-confirm").click()
    error = sidebar.locator(".tfgpu-shutdown-error")
    expect(error).to_contain_text("Could not shut down the kernel of mig.ipynb", timeout=30_000)
    assert mig_kernel in gpu_lab.kernel_ids()
    expect(row).to_be_visible()


def test_graphics_processes_are_tagged_g_and_c_plus_g(page, gpu_lab, tmp_path):
    """NVML's graphics list in the sidebar: a desktop session ("Xorg", graphics only) is another process tagged "G",
    a notebook whose kernel renders and computes is its row tagged "C+G" with its memory once, a compute process has
    no tag; each tag says what it means in its tooltip."""
    import shutil
    import subprocess

    from playwright.sync_api import expect

    lab = gpu_lab.lab
    write_notebook(lab.root / "render.ipynb")
    xorg = tmp_path / "Xorg"  # a process named as a desktop session's X server is (its /proc comm)
    shutil.copy(shutil.which("sleep"), xorg)
    desktop = subprocess.Popen([str(xorg), "600"])
    try:
        wait_for_app(page)
        open_notebook(page, "render.ipynb")
        pid = gpu_lab.kernel_pid("render.ipynb")
        gpu_lab.write(shared_config([{"pid": pid, "used": 3072 * MIB, "type": "C+G"},
                                     {"pid": desktop.pid, "used": 180 * MIB, "type": "G"}], h100_used_mib=4200))
        sidebar = open_sidebar(page)
        h100 = gpu_block(sidebar, 1)
        row = h100.locator(f'.tfgpu-notebook[data-kernel-id="{kernel_id(lab, "render.ipynb")}"]')
        expect(row).to_contain_text("3,072 MiB", timeout=30_000)  # once, not 6,144
        expect(row.locator(".tfgpu-type-tag")).to_have_text("C+G")
        assert "type C+G" in row.locator(".tfgpu-type-tag").get_attribute("title")
        expect(row.locator(".tfgpu-shutdown")).to_have_count(1)
        x_row = h100.locator(".tfgpu-process", has_text="Xorg")
        expect(x_row).to_contain_text(f"pid {desktop.pid}")
        expect(x_row.locator(".tfgpu-type-tag")).to_have_text("G")
        assert "graphics process list" in x_row.locator(".tfgpu-type-tag").get_attribute("title")
        expect(x_row).to_contain_text("180 MiB")
        foreign = h100.locator(".tfgpu-process", has_text=f"pid {FOREIGN_PID}")
        expect(foreign.locator(".tfgpu-type-tag")).to_have_count(0)
        # The tag sits between the name and the memory, none of them cut short.
        for locator in (row, x_row):
            tag, figure = locator.locator(".tfgpu-type-tag").bounding_box(), \
                locator.locator(".tfgpu-item-figure").first.bounding_box()
            assert tag["x"] + tag["width"] <= figure["x"], (tag, figure)
        shoot(page, h100, tmp_path, "sidebar-graphics")
    finally:
        desktop.kill()
        desktop.wait()


def test_a_403_says_the_session_ended_and_offers_a_reload(page, gpu_lab):
    """JupyterHub stopped and started the user's server: the page's session is gone. The sidebar says so, with a
    Reload button, instead of "retrying" forever; the line goes once a request succeeds again."""
    from playwright.sync_api import expect

    wait_for_app(page)
    page.route("**/tfgpu/api/gpus*", lambda route: route.fulfill(status=403, content_type="application/json",
                                                                  body='{"message": "Forbidden", "reason": null}'))
    sidebar = open_sidebar(page)
    offline = sidebar.locator(".tfgpu-offline")
    expect(offline).to_have_text(
        "This page's session with the server has ended (403). Reload the page to sign in again.", timeout=30_000)
    reload = sidebar.locator("button.tfgpu-reload")
    expect(reload).to_have_text("Reload page")
    page.unroute("**/tfgpu/api/gpus*")
    # The next request (after the poll's backoff) succeeds: the line and its button go, the GPUs come.
    expect(offline).to_have_count(0, timeout=60_000)
    expect(reload).to_have_count(0)
    expect(gpu_block(sidebar, 1)).to_be_visible()
    # The button reloads the page. (Every request refused until then: the status-bar item keeps the poll going
    # while the sidebar is hidden, so a single refusal could come and go unseen.)
    # Refused until the reload's own request leaves: a request that succeeded before the click would take the
    # button away under it, and the page it loads must find the server answering again.
    refusing = {"on": True}

    def refuse(route):
        if refusing["on"]:
            route.fulfill(status=403, body="")
        else:
            route.continue_()

    page.on("request", lambda request: request.is_navigation_request() and refusing.update(on=False))
    page.route("**/tfgpu/api/gpus*", refuse)
    page.locator('.jp-SideBar [data-id="filebrowser"]').click()
    open_sidebar(page)
    expect(reload).to_be_visible(timeout=30_000)
    with page.expect_navigation(timeout=60_000):
        reload.click()
    assert not refusing["on"]
    page.unroute("**/tfgpu/api/gpus*")
    wait_for_app(page)


def test_a_server_that_keeps_no_history_says_so_in_one_line(page, gpu_lab):
    """Sampling off (TfgpuServer.history_interval=0, or NVML unavailable): the server's note in one muted line, and
    no empty charts."""
    from playwright.sync_api import expect

    def no_history(route):
        answer = route.fetch()
        document = answer.json()
        document["history"] = {"interval_s": 0, "kept_s": 3600, "sampling": False, "gpus": {},
                               "note": "sampling is off (TfgpuServer.history_interval is 0)"}
        route.fulfill(response=answer, json=document)

    wait_for_app(page)
    page.route("**/tfgpu/api/gpus*", no_history)
    sidebar = open_sidebar(page)
    expect(gpu_block(sidebar, 1)).to_be_visible(timeout=30_000)
    expect(sidebar.locator(".tfgpu-history-note")).to_have_text("sampling is off (TfgpuServer.history_interval is 0)")
    expect(sidebar.locator(".tfgpu-chart")).to_have_count(0)


def test_the_sidebar_and_metrics_behind_a_path_prefix(fake_nvml_lib, tmp_path):
    """A server at ``/prefix/lab/`` (a reverse proxy's path, no Hub): the sidebar finds its endpoints there, and so
    does a scraper."""
    require_browser()
    import urllib.request

    from playwright.sync_api import expect

    config = write_config(tmp_path / "fake_nvml.cfg", three_gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={}), base_url="/prefix/lab/") as lab:
        request = urllib.request.Request(f"{lab.url}/tfgpu/api/metrics",
                                         headers={"Authorization": f"token {lab.token}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.url.startswith(f"http://127.0.0.1:{lab.port}/prefix/lab/tfgpu/api/metrics")
            assert b"tfgpu_gpu_memory_total_bytes" in answer.read()
        with lab.browser_page(width=1400, height=1000) as page:
            seen: list[str] = []
            page.on("request", lambda r: seen.append(r.url) if "/tfgpu/api/" in r.url else None)
            wait_for_app(page)
            sidebar = open_sidebar(page)
            expect(gpu_block(sidebar, 1)).to_be_visible(timeout=30_000)
            expect(gpu_block(sidebar, 1)).to_contain_text("NVIDIA H100 80GB HBM3")
            expect(gpu_block(sidebar, 1).locator(".tfgpu-chart")).to_have_count(1)
            assert seen and all(u.startswith(f"{lab.url}/tfgpu/api/gpus") for u in seen), seen


def test_the_status_bar_shows_the_front_notebooks_gpu_memory(page, gpu_lab, tmp_path):
    """With the sidebar closed, the status bar says what the front notebook's kernel holds and where ("GPU 1 · 6.0
    GiB", from the page's one feed of the server's answer), opens the sidebar when clicked, hides while the kernel
    holds nothing, and stays away once its setting is off. Both open, they read the same answers: one request a
    refresh interval, not one each."""
    import json
    import urllib.request

    from playwright.sync_api import expect

    lab = gpu_lab.lab

    def settings(raw: str) -> None:
        request = urllib.request.Request(f"{lab.url}/lab/api/settings/tfgpu_magic:sidebar", method="PUT",
                                         data=json.dumps({"raw": raw}).encode(),
                                         headers={"Authorization": f"token {lab.token}"})
        urllib.request.urlopen(request, timeout=30).close()

    wait_for_app(page)
    # Every kernel here is idle (no cell runs), so the page asks every idleRefreshInterval seconds (60 by default):
    # 5 here (its least), for a test of what the item shows, not of how often it asks (test_browser_culler.py).
    settings('{"idleRefreshInterval": 5}')
    try:
        page.reload()  # the page reads its settings when it loads
        wait_for_app(page)
        open_notebook(page, "keep.ipynb")
        pid = gpu_lab.kernel_pid("keep.ipynb")
        item = page.locator(".tfgpu-status-item")
        gpu_lab.write(shared_config())  # the kernel holds nothing yet: no item
        page.wait_for_timeout(6000)
        expect(item).to_be_hidden()
        gpu_lab.write(shared_config([{"pid": pid, "used": 6144 * MIB}]))
        expect(item).to_have_text("GPU 1 · 6.0 GiB", timeout=30_000)
        expect(page.locator(SIDEBAR)).to_be_hidden()  # the sidebar stayed closed: its poll ran for the item
        assert "GPU 1: 6,144 MiB" in item.get_attribute("title")
        bar = page.locator("#jp-main-statusbar")
        shoot(page, bar, tmp_path, "statusbar")
        item.click()
        expect(page.locator(SIDEBAR)).to_be_visible()
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if "/tfgpu/api/gpus" in r.url else None)
        page.wait_for_timeout(6500)  # the default interval is 2 s: about three answers for both views
        assert 2 <= len(asked) <= 5, asked

        # The setting off (Settings > Settings Editor > GPUs sidebar), then a reload: no item, however much it holds.
        settings('{"statusBar": false}')
        page.reload()
        wait_for_app(page)
        page.wait_for_timeout(3000)
        expect(item).to_be_hidden()
    finally:
        settings("{}")
