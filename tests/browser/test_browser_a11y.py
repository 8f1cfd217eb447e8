"""tfgpu's parts of JupyterLab by keyboard and screen reader, in Chromium: axe-core finds no WCAG 2.0/2.1 A or AA
violation in the sidebar, the status-bar item, the shut-down dialog or the live panel, in the light and dark themes
and with a GPU that fails; the sidebar is one Tab sequence of visible, named controls that Shift+Tab walks back and
Tab leaves (no trap); keyboard focus shows a ring; a chart's figures are a table the keyboard opens.

One Lab for the module: the fake NVML lists three GPUs, and GPU 1 lists the kernels of two notebooks (started through
the REST API, as a reopened browser finds them), so the sidebar has rows with Open and Shut down buttons. Screenshots
(focus rings, the open table) go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a folder, there too.
Skipped where the browser is missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import re

import pytest
from a11y import DIALOG_OF, PANEL, SIDEBAR, STATUS_ITEM, axe_violations, describe, focused, pixels_differing
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    Lab,
    cell_output,
    element_screenshot,
    keep_screenshot,
    kernel_pid,
    open_notebook,
    open_sidebar,
    panel_tab,
    require_browser,
    run_cell,
    set_theme,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser]

TRAIN, OTHER = "train.ipynb", "other.ipynb"
THEMES = ("JupyterLab Light", "JupyterLab Dark")
# What the Tab sequence may visit: the elements a browser puts in it by default, and any with a tabindex.
FOCUSABLE = "button, summary, a[href], input, select, textarea, [tabindex]"


class A11yLab:
    def __init__(self, lab: Lab, config_path):
        self.lab = lab
        self.config_path = config_path
        self.holders: dict[int, int] = {}

    def write(self, **gpu_changes) -> None:
        """The three GPUs, GPU 1 listing the notebooks' kernels; ``gpu_changes``: {index: {key: value}} on top."""
        config = three_gpus()
        config["gpus"][1]["processes"] = [{"pid": pid, "used": mib * MIB} for pid, mib in self.holders.items()]
        for index, changes in gpu_changes.items():
            config["gpus"][int(index)].update(changes)
        write_config(self.config_path, config)


@pytest.fixture(scope="module")
def a11y_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("a11y_nvml") / "fake_nvml.cfg", three_gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        for name in (TRAIN, OTHER):
            write_notebook(lab.root / name)
            lab.api("POST", "/api/sessions", {"path": name, "name": name, "type": "notebook",
                                              "kernel": {"name": "python3"}})
        session = A11yLab(lab, config)
        session.holders = {kernel_pid(lab, TRAIN): 4096, kernel_pid(lab, OTHER): 1536}
        session.write()
        yield session


@pytest.fixture
def page(a11y_lab):
    with watched_page(a11y_lab.lab) as page:
        yield page


def sidebar_with_rows(page):
    """train.ipynb in front, the sidebar open with both notebooks' rows on GPU 1."""
    from playwright.sync_api import expect

    open_notebook(page, TRAIN)
    sidebar = open_sidebar(page)
    for name in (TRAIN, OTHER):
        expect(sidebar.get_by_role("button", name=re.compile(f"^Open {re.escape(name)}"))).to_be_visible(
            timeout=30_000)
    expect(sidebar.locator(".tfgpu-chart").first).to_be_visible(timeout=30_000)
    return sidebar


def test_axe_finds_no_violation_in_tfgpus_parts_in_either_theme(page, a11y_lab):
    """The GPU list (a chart's table open), the shut-down dialog, a GPU that fails and the live panel, light and dark:
    every violation of every state is listed before the test fails, so one run shows them all."""
    from playwright.sync_api import expect

    sidebar = sidebar_with_rows(page)
    found: dict[str, list[dict]] = {}

    def check(state: str, selectors: list[str]) -> None:
        violations = axe_violations(page, selectors)
        if violations:
            found[state] = violations

    for theme in THEMES:
        name = theme.split()[-1].lower()
        set_theme(page, theme)  # each time: the Lab's settings keep the theme an earlier test chose
        sidebar = open_sidebar(page)
        # The GPU list, with a chart's figures open as a table, and the status-bar item.
        details = sidebar.locator(".tfgpu-chart-details").first
        if not details.evaluate("d => d.open"):
            details.locator("summary").click()
        expect(details.locator("table")).to_be_visible()
        expect(page.locator(STATUS_ITEM)).to_be_visible(timeout=30_000)
        check(f"GPU list ({name})", [SIDEBAR, STATUS_ITEM])

        # The shut-down dialog of a notebook's row.
        sidebar.get_by_role("button", name=f"Shut down the kernel of {OTHER}").click()
        dialog = page.locator(DIALOG_OF.format(".tfgpu-shutdown-dialog"))
        expect(dialog).to_be_visible()
        check(f"shut-down dialog ({name})", [DIALOG_OF.format(".tfgpu-shutdown-dialog")])
        page.keyboard.press("Escape")  # Cancel: nothing is shut down
        expect(dialog).to_have_count(0)

        # A GPU that fails (lost) and one whose process list is refused: error lines in place of figures.
        a11y_lab.write(**{"2": {"lost": True}})
        expect(sidebar.locator(".tfgpu-gpu-failed")).to_be_visible(timeout=30_000)
        check(f"a failed GPU ({name})", [SIDEBAR])
        a11y_lab.write()
        expect(sidebar.locator(".tfgpu-gpu-failed")).to_have_count(0, timeout=30_000)

        # The live panel in the notebook's output.
        if page.locator(PANEL).count() == 0:
            run_cell(page, 0, "%load_ext tfgpu_magic\n%tfgpu panel")
        panel = cell_output(page, 0).locator(PANEL)
        expect(panel).to_be_visible(timeout=60_000)
        # Each of its tabs, chosen by keyboard (the arrow keys move along the tab bar, Enter selects): axe checks only
        # what shows.
        tabs = panel.locator(".lm-TabBar-tab")
        panel_tab(panel, "Memory")
        tabs.first.focus()
        for k in range(tabs.count()):
            if k:
                page.keyboard.press("ArrowRight")
                page.keyboard.press("Enter")
            expect(tabs.nth(k)).to_have_class(re.compile(r"\blm-mod-current\b"))
            check(f"live panel, {tabs.nth(k).inner_text()} tab ({name})", [PANEL])
        panel_tab(panel, "Memory")

    report = "\n".join(f"== {state}\n{describe(v)}" for state, v in found.items())
    print(report or "axe: no violation in any state")
    assert not found, f"axe found WCAG A/AA violations in tfgpu's parts:\n{report}"


# The sidebar's Tab stops, each identified across re-renders (a row re-rendered is a new node with the same name) by
# its tag, aria-label or text, and its position among the stops with that tag and label; and which of them has focus
# (null: focus is outside the sidebar; "unlisted:...": inside, on an element that is not a stop).
STOPS_JS = """(selector) => {
  const root = document.querySelector('#tfgpu-sidebar');
  const key = e => e.tagName.toLowerCase() + '|' + (e.getAttribute('aria-label') || e.textContent || '').trim();
  const stops = [...root.querySelectorAll(selector)].filter(e => {
    const box = e.getBoundingClientRect();
    return !e.disabled && e.tabIndex >= 0 && box.width > 0 && box.height > 0;
  });
  const seen = {};
  const keys = stops.map(e => { const k = key(e); seen[k] = (seen[k] || 0) + 1; return k + '#' + seen[k]; });
  const active = document.activeElement;
  const at = stops.indexOf(active);
  return {stops: keys, focused: at >= 0 ? keys[at] : root.contains(active) ? 'unlisted:' + key(active) : null};
}"""


def sidebar_stops(page) -> dict:
    return page.evaluate(STOPS_JS, FOCUSABLE)


def test_the_sidebar_is_one_tab_sequence_of_visible_named_controls_and_no_trap(page, tmp_path):
    from playwright.sync_api import expect

    sidebar = sidebar_with_rows(page)
    # The status-bar item is a button, named with its figure: focused and Enter, it opens the sidebar again.
    item = page.locator(STATUS_ITEM)
    expect(item).to_be_visible(timeout=30_000)
    assert item.evaluate("n => n.tagName") == "BUTTON"
    page.locator('.jp-SideBar [data-id="tfgpu-sidebar"]').click()  # the sidebar's tab toggles: closed
    expect(sidebar).to_be_hidden()
    item.focus()
    info = focused(page)
    assert "MiB" in info["name"], info
    page.keyboard.press("Enter")
    expect(sidebar).to_be_visible()

    assert sidebar.locator("[tabindex]").evaluate_all("els => els.filter(e => e.tabIndex > 0).length") == 0
    stops = sidebar_stops(page)["stops"]
    assert len(stops) >= 6, stops  # three charts' tables, two notebooks' Open and Shut down, Load ...

    # Tab from the sidebar's heading (clicked: where sequential focus starts) through every stop, in the DOM's order.
    sidebar.locator(".tfgpu-header").click()
    walked: list[str] = []
    for _ in range(len(stops) + 1):
        page.keyboard.press("Tab")
        stop = sidebar_stops(page)["focused"]
        if stop is None:
            break  # Tab left the sidebar: no trap
        info = focused(page)
        assert info["visible"], info
        assert info["name"].strip(), f"a focused control without a name: {info}"
        assert info["focusVisible"] and info["outline"], f"keyboard focus without a visible ring: {info}"
        walked.append(stop)
    else:
        raise AssertionError(f"Tab never left the sidebar after {walked}")
    assert walked == stops, f"the Tab order {walked} is not the sidebar's order {stops}"
    outside = focused(page)
    assert outside is None or not outside["inSidebar"], outside

    # Shift+Tab comes back in, and walks the same stops back to the first.
    back: list[str] = []
    for _ in range(len(stops)):
        page.keyboard.press("Shift+Tab")
        back.append(sidebar_stops(page)["focused"])
    assert back == stops[::-1], f"Shift+Tab walked {back}"


def test_focus_stays_on_its_control_when_the_figures_change(page, a11y_lab):
    """New figures re-render the GPU list: the keyboard's place (a chart's table toggle, a notebook's Open button) is
    kept, not dropped to the page's start."""
    from playwright.sync_api import expect

    sidebar = sidebar_with_rows(page)
    other_pid = next(pid for pid, mib in a11y_lab.holders.items() if mib == 1536)

    def change_memory(mib: int) -> None:
        a11y_lab.holders[other_pid] = mib
        a11y_lab.write()
        expect(sidebar.get_by_role("button", name=f"Open {OTHER}, {mib:,} MiB")).to_be_visible(timeout=30_000)

    try:
        sidebar.locator(".tfgpu-header").click()
        page.keyboard.press("Tab")
        toggle = sidebar.locator(".tfgpu-chart-details-toggle").first
        assert toggle.evaluate("n => n === document.activeElement"), focused(page)
        change_memory(2048)
        assert toggle.evaluate("n => n === document.activeElement"), f"the table toggle lost the focus: {focused(page)}"

        for _ in range(40):
            page.keyboard.press("Tab")
            if (focused(page) or {}).get("name", "").startswith(f"Open {OTHER}"):
                break
        else:
            raise AssertionError(f"Tab never reached Open {OTHER}")
        change_memory(1024)
        info = focused(page)
        assert info and info["name"] == f"Open {OTHER}, 1,024 MiB" and info["focusVisible"], info
    finally:
        a11y_lab.holders[other_pid] = 1536
        a11y_lab.write()


def ring_shots(page, target, folder, name: str) -> tuple[bytes, bytes]:
    """``target`` unfocused, then focused by Tab (from the sidebar's heading): both pictures, kept as files."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.mouse.move(0, 0)
    page.wait_for_timeout(200)
    plain = element_screenshot(target, folder / f"{name}-unfocused.png")
    page.locator(f"{SIDEBAR} .tfgpu-header").click()
    for _ in range(40):
        page.keyboard.press("Tab")
        if target.evaluate("n => n === document.activeElement"):
            break
    else:
        raise AssertionError(f"Tab never reached {name}")
    page.mouse.move(0, 0)
    page.wait_for_timeout(200)
    assert target.evaluate("n => n === document.activeElement"), f"{name} lost the focus: {focused(page)}"
    ringed = element_screenshot(target, folder / f"{name}-focused.png")
    for suffix in ("unfocused", "focused"):
        keep_screenshot(folder / f"{name}-{suffix}.png")
    return plain, ringed


def test_keyboard_focus_draws_a_ring_in_both_themes(page, tmp_path):
    sidebar = sidebar_with_rows(page)
    for theme in THEMES:
        name = theme.split()[-1].lower()
        set_theme(page, theme)  # each time: the Lab's settings keep the theme an earlier test chose
        sidebar = open_sidebar(page)
        targets = {
            "open-row": sidebar.get_by_role("button", name=re.compile(f"^Open {re.escape(OTHER)}")),
            "shutdown": sidebar.get_by_role("button", name=f"Shut down the kernel of {OTHER}"),
            "table-toggle": sidebar.locator(".tfgpu-chart-details-toggle").first,
        }
        for what, target in targets.items():
            plain, ringed = ring_shots(page, target, tmp_path, f"a11y-focus-{what}-{name}")
            changed = pixels_differing(page, plain, ringed)
            assert changed > 20, f"{what} ({name}): {changed} pixels differ between unfocused and focused"
        # The status-bar item, focused after those key presses (the keyboard is the last input: a ring shows).
        item = page.locator(STATUS_ITEM)
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        plain = element_screenshot(item, tmp_path / f"a11y-focus-status-item-{name}-unfocused.png")
        item.focus()
        assert focused(page)["focusVisible"], focused(page)
        ringed = element_screenshot(item, tmp_path / f"a11y-focus-status-item-{name}-focused.png")
        for suffix in ("unfocused", "focused"):
            keep_screenshot(tmp_path / f"a11y-focus-status-item-{name}-{suffix}.png")
        changed = pixels_differing(page, plain, ringed)
        assert changed > 20, f"status-bar item ({name}): {changed} pixels differ between unfocused and focused"
        shot = tmp_path / f"a11y-sidebar-focus-{name}.png"
        element_screenshot(sidebar, shot)
        keep_screenshot(shot)


def test_a_charts_figures_are_a_table_the_keyboard_opens(page, tmp_path):
    from playwright.sync_api import expect

    sidebar = sidebar_with_rows(page)
    chart = sidebar.locator(".tfgpu-gpu[data-gpu='gpu-0'] .tfgpu-chart")
    svg = chart.locator("svg[role='img']")
    # The chart's name is its summary: what it shows now and its peak (the fake's A100: 30,000 of 40,960 MiB, 97%).
    expect(svg).to_have_attribute("aria-label", re.compile(
        r"^GPU 0: memory used 30,000 MiB \(73%\) now, peak 30,000 MiB \(73%\) in the last 10 min; "
        r"utilization 97% now, peak 97%$"), timeout=30_000)

    # Tab reaches its toggle (the first control of the sidebar), Enter opens the table.
    sidebar.locator(".tfgpu-header").click()
    page.keyboard.press("Tab")
    toggle = chart.locator("summary")
    assert toggle.evaluate("n => n === document.activeElement"), focused(page)
    page.keyboard.press("Enter")
    table = chart.locator("table")
    expect(table).to_be_visible()
    expect(table.locator("caption")).to_have_text(svg.get_attribute("aria-label"))
    assert table.locator("thead th[scope='col']").all_inner_texts() == ["Time", "Memory used", "Utilization"]
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(11)
    assert rows.locator("th[scope='row']").all_inner_texts()[-1] == "now"
    last = rows.last.locator("td").all_inner_texts()
    assert last == ["30,000 MiB (73%)", "97%"], last

    # The same figures the chart draws: its hover label at the right edge says them too.
    plot = chart.locator(".tfgpu-chart-plot")
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2)
    hover = chart.locator(".tfgpu-chart-hover-values")
    expect(hover).to_be_visible()
    assert hover.inner_text() == "mem 73% · util 97%", hover.inner_text()

    page.keyboard.press("Enter")  # the toggle still has focus: Enter folds the table again
    expect(table).to_be_hidden()
    page.keyboard.press("Enter")
    expect(table).to_be_visible()
    for theme in THEMES:
        set_theme(page, theme)  # each time: the Lab's settings keep the theme an earlier test chose
        open_sidebar(page)
        page.mouse.move(0, 0)
        shot = tmp_path / f"a11y-chart-table-{theme.split()[-1].lower()}.png"
        element_screenshot(chart, shot)
        keep_screenshot(shot)
