"""`%tfgpu panel` in JupyterLab in Chromium: the live panel renders as a widget (not its text fallback), names the
devices, shows a memory figure and follows it while a cell runs, in the light and the dark theme; its Settings tab
is one aligned form at any width (no label cut), shows the values in force, says once why they are fixed, and after a
refusal keeps the value in force and offers the restart in the destructive red.

One Lab and one notebook for the whole check (about a minute on two cores). Its kernels see three fake GPUs
(tests/support/fakenvml) and run real TensorFlow on the CPU; `%tfgpu cpumem on` gives TensorFlow's CPU allocator
figures, so the panel has memory to show without a GPU. Screenshots go to the test's tmp folder and, when
TFGPU_SCREENSHOTS names a folder, there too (benchmarks/screenshot_panel.py makes docs/reference.md's panel-*.png
the same way).
Skipped where the browser is missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import time

import pytest
from fakenvml import three_gpus
from labsession import (
    BIG_TENSOR_MIB,
    CELL,
    PANEL_CELL,
    add_cell_below,
    cell_output,
    in_use_mib,
    keep_screenshot,
    panel_tab,
    require_browser,
    restart_kernel,
    run_cell,
    set_theme,
    shoot_panel,
    show_panel,
    start_big_tensor,
)

from tfgpu_magic.ipython.panel import DEAD_NOTE

pytestmark = [pytest.mark.browser, pytest.mark.tf]

GPU_NAMES = [gpu["name"] for gpu in three_gpus()["gpus"]]
# What the output shows when the widget does not render: the manager's placeholder, or the text/plain fallback
# (the widget's repr: "Panel(children=(HTML(value=..." for the panel, "VBox(..." for a plain box).
NOT_RENDERED = ("Loading widget", "VBox(", "Panel(children")

# The Settings form as the browser laid it out: each label's box and text width, each input's box and value, and the
# restart button's colour beside the theme's error colour.
FORM_JS = """(panel) => {
  const grid = panel.querySelector('.widget-gridbox');
  const box = (el) => { const r = el.getBoundingClientRect(); return {left: r.left, width: r.width}; };
  const labels = [...grid.querySelectorAll(':scope > .widget-label')].map((el) => ({
    text: el.textContent, clipped: el.scrollWidth > el.clientWidth + 1, ...box(el)}));
  const inputs = [...grid.querySelectorAll(':scope > .widget-text input, :scope > .widget-dropdown select')].map(
    (el) => ({value: el.value, disabled: el.disabled, ...box(el)}));
  const button = [...panel.querySelectorAll('button')].find((b) => b.textContent === 'Restart kernel and apply');
  const probe = document.createElement('div');
  probe.style.background = 'var(--jp-error-color1)';
  document.body.appendChild(probe);
  const red = getComputedStyle(probe).backgroundColor;
  probe.remove();
  return {labels, inputs, red, restart: button && button.offsetParent !== null ? getComputedStyle(button)
    .backgroundColor : null};
}"""


def check_form(panel) -> dict:
    form = panel.evaluate(FORM_JS)
    assert [label["text"] for label in form["labels"]] == ["visible GPUs", "logical CPUs", "CPU figures",
                                                          "GPU allocator", "memory growth", "memory limit",
                                                          "placement log"], form
    assert not [label for label in form["labels"] if label["clipped"]], form["labels"]
    assert len({round(i["left"]) for i in form["inputs"]}) == 1, form["inputs"]  # one column
    assert len({round(i["width"]) for i in form["inputs"]}) == 1, form["inputs"]  # one width
    return form


@pytest.fixture
def page(lab):
    # Tall: the whole panel (header, Memory tab with three GPUs and the chart) fits without scrolling.
    with lab.browser_page(width=1100, height=2000) as page:
        yield page
    print(f"--- jupyter lab log (tail) ---\n{lab.log_tail()}")


def test_panel_renders_names_devices_and_follows_memory(page, tmp_path):
    from playwright.sync_api import expect

    require_browser()
    panel = show_panel(page)
    output = cell_output(page, PANEL_CELL)

    # A widget, not a placeholder or its text/plain repr.
    expect(panel.locator(".lm-TabBar-tab", has_text="Memory")).to_be_visible()
    text = output.inner_text()
    for fallback in NOT_RENDERED:
        assert fallback not in text, f"the panel did not render as a widget: {fallback!r} in {text[:500]!r}"

    # Device names: the fake GPUs in the Memory tab, TensorFlow's two logical CPUs in the Devices tab. Shown ones:
    # inner text, which leaves out the hidden tabs (textContent, Playwright's default, would include them).
    for name in GPU_NAMES:
        expect(panel).to_contain_text(name, use_inner_text=True)
    panel_tab(panel, "Devices")
    expect(panel).to_contain_text("CPU:0", use_inner_text=True)
    expect(panel).to_contain_text("CPU:1", use_inner_text=True)
    panel_tab(panel, "Memory")

    # A memory figure from TensorFlow's CPU allocator.
    expect(panel).to_contain_text("TensorFlow CPU allocator", use_inner_text=True)
    before = in_use_mib(panel.inner_text())
    assert before is not None, f"no 'in use X MiB' in the panel: {panel.inner_text()[:1000]!r}"
    assert before < BIG_TENSOR_MIB, f"in use {before} MiB before the big tensor exists"

    # The figure follows a running cell: it reaches the big tensor's 64 MiB while the cell still sleeps.
    big = start_big_tensor(page)
    prompt = page.locator(CELL).nth(big).locator(".jp-InputPrompt")
    big_output = cell_output(page, big)
    seen: list[tuple[float, float | None, str]] = []
    started = time.monotonic()
    while time.monotonic() - started < 30:
        running = prompt.inner_text().strip()
        done = "done" in big_output.inner_text()
        figure = in_use_mib(panel.inner_text())
        seen.append((round(time.monotonic() - started, 2), figure, running + (" done" if done else "")))
        if figure is not None and figure >= BIG_TENSOR_MIB:
            assert running == "[*]:" and not done, f"the figure changed only after the cell ended: {seen}"
            print(f"in use reached {figure} MiB after {seen[-1][0]} s, cell {running}")
            break
        assert not done, f"the cell ended before the panel showed {BIG_TENSOR_MIB} MiB in use: {seen}"
        page.wait_for_timeout(100)
    else:
        pytest.fail(f"the panel never showed {BIG_TENSOR_MIB} MiB in use within 30 s: {seen}")
    expect(big_output).to_contain_text("done", timeout=30_000)
    assert (in_use_mib(panel.inner_text()) or 0) >= BIG_TENSOR_MIB, "`big` still exists"

    # Pictures, the Memory tab (bars, the big tensor in the chart) in both themes, the Devices tab in light.
    page.locator(CELL).first.locator(".jp-InputPrompt").click()  # the selection away from the photographed cell
    page.keyboard.press("Escape")
    keep_screenshot(shoot_panel(page, tmp_path / "panel-light.png"))
    panel_tab(panel, "Devices")
    keep_screenshot(shoot_panel(page, tmp_path / "panel-devices-light.png"))
    panel_tab(panel, "Memory")
    set_theme(page, "JupyterLab Dark")
    expect(panel).to_contain_text("TensorFlow CPU allocator", use_inner_text=True)
    keep_screenshot(shoot_panel(page, tmp_path / "panel-dark.png"))

    # The Settings tab after TensorFlow started: the values in force, the reason once, aligned at any width.
    panel_tab(panel, "Settings")
    expect(panel).to_contain_text("TensorFlow's runtime has started", use_inner_text=True)
    assert panel.inner_text().count("TensorFlow's runtime has started") == 1, panel.inner_text()
    form = check_form(panel)
    values = [i["value"] for i in form["inputs"]]
    # The registry's order: visible, cpus, cpumem, allocator, growth, limit.
    assert values[:6] == ["all", "2", "on", "bfc", "off", "off"], form
    assert all(i["disabled"] for i in form["inputs"][:6]), form
    assert form["restart"] is None  # nothing refused yet
    for width in (620, 1600):  # narrow and wide: still one column of inputs, no label cut
        page.set_viewport_size({"width": width, "height": 2000})
        page.wait_for_timeout(300)
        check_form(panel)
    page.set_viewport_size({"width": 1100, "height": 2000})
    # A setting asked too late: refused in its cell; the form keeps the value in force and offers the red restart.
    page.locator(CELL).nth(big).locator(".jp-InputPrompt").click()
    add_cell_below(page)
    run_cell(page, big + 1, "%tfgpu cpus 3")
    expect(cell_output(page, big + 1)).to_contain_text("is too late")
    expect(panel.get_by_text("Restart kernel and apply")).to_be_visible(timeout=30_000)
    expect(panel).to_contain_text("3 refused: too late", use_inner_text=True)
    form = check_form(panel)
    assert form["inputs"][1]["value"] == "2", form["inputs"]  # cpus: the value in force, not the refused 3
    assert form["restart"] == form["red"], form  # the destructive red, as the sidebar's
    page.locator(CELL).first.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    keep_screenshot(shoot_panel(page, tmp_path / "panel-settings-dark.png"))

    # The kernel restarts: the panel's views stay on screen with their old figures, and now say so.
    note = panel.locator(".tfgpu-dead-note")
    expect(note).to_be_hidden()
    restart_kernel(page)  # as a user does: JupyterLab's widget manager then marks the views disconnected
    expect(note).to_be_visible(timeout=30_000)
    expect(note).to_have_text(DEAD_NOTE.replace("`", ""))
    keep_screenshot(shoot_panel(page, tmp_path / "panel-restarted-dark.png"))
    set_theme(page, "JupyterLab Light")
    expect(note).to_be_visible()
    keep_screenshot(shoot_panel(page, tmp_path / "panel-restarted-light.png"))
    for name in ("panel-light.png", "panel-devices-light.png", "panel-dark.png", "panel-settings-dark.png",
                 "panel-restarted-dark.png", "panel-restarted-light.png"):
        assert (tmp_path / name).stat().st_size > 10_000, f"{name}: suspiciously small"
