"""The "Saved settings" section's one verdict, in JupyterLab in Chromium, in the light and the dark theme: Check &
save says only that it saved; "Restart kernel and apply" with values the kernel refuses restarts nothing and says
why (in red, the only verdict), and the next valid save clears it; a kernel that has run cells already is told
neutrally that the settings apply at its next start, with the button that restarts it. And at the sidebar's
default width nothing is clipped without its full text in a tooltip (a long GPU name from the fake NVML, a long
notebook path, process rows).

Skipped where the browser is missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import json
import re

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    CELL,
    NOTEBOOK,
    SIDEBAR,
    Lab,
    add_cell_below,
    apply_status,
    cell_output,
    keep_screenshot,
    kernel_expression,
    kernel_pid,
    open_notebook,
    require_browser,
    run_cell,
    scroll_into_view,
    set_theme,
    sidebar,
    write_notebook,
    write_saved,
)

pytestmark = [pytest.mark.browser]

THEMES = ["JupyterLab Light", "JupyterLab Dark"]
LONG_GPU = "NVIDIA A100-SXM4-80GB PCIe Gen4 Accelerator Board"
LONG_NOTEBOOK = "a-notebook-whose-name-is-far-too-long-for-a-narrow-sidebar.ipynb"
VERDICT = f"{SIDEBAR} .tfgpu-saved .tfgpu-verdict"
UNCHECKED = "unchecked.ipynb"


def gpus(holder_pid: int | None = None) -> dict:
    config = three_gpus()
    config["gpus"][0]["name"] = LONG_GPU
    if holder_pid is not None:
        config["gpus"][1]["processes"] = [{"pid": holder_pid, "used": 4096 * MIB}]
    return config


@pytest.fixture(scope="module")
def lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("verdict_nvml") / "fake_nvml.cfg", gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        lab.nvml_config = config
        for theme in THEMES:
            write_notebook(lab.root / f"verdict-{slug(theme)}.ipynb")
            write_saved(lab, f"ran-{slug(theme)}.ipynb", {"cpus": "2"})
        write_notebook(lab.root / LONG_NOTEBOOK)
        write_notebook(lab.root / UNCHECKED)
        yield lab


def slug(theme: str) -> str:
    return theme.split()[-1].lower()


def verdict(page):
    """The section's one verdict: every line it shows (its buttons aside)."""
    return page.locator(f"{VERDICT} > .tfgpu-line")


def editor_input(page, name: str):
    return page.locator(f"{SIDEBAR} .tfgpu-input[data-setting='{name}']")


def fill(page, **values: str) -> None:
    for name, value in values.items():
        editor_input(page, name).fill(value)


def kernel_state(lab, path: str) -> tuple[str, str]:
    """The kernel's pid and execution count, asked from outside (silently: neither changes)."""
    return (kernel_expression(lab, path, "__import__('os').getpid()"),
            kernel_expression(lab, path, "get_ipython().execution_count"))


def shoot_saved(page, shot) -> None:
    """The page with the sidebar's Saved settings section in view, kept where TFGPU_SCREENSHOTS says."""
    scroll_into_view(page.locator(f"{SIDEBAR} .tfgpu-saved"))
    page.screenshot(path=str(shot))
    keep_screenshot(shot)


def expect_only(page, cls: str, text: str | re.Pattern) -> None:
    """The verdict is one line, of this level, with this text, and nothing red (or anything else) beside it."""
    from playwright.sync_api import expect

    lines = verdict(page)
    expect(lines.first).to_contain_text(text, timeout=60_000)
    expect(lines).to_have_count(1)
    expect(lines.first).to_have_class(re.compile(rf"\btfgpu-{cls}\b"))
    if cls != "error":
        expect(page.locator(f"{SIDEBAR} .tfgpu-saved .tfgpu-verdict .tfgpu-error")).to_have_count(0)


@pytest.mark.parametrize("theme", THEMES)
def test_one_verdict_a_refused_restart_restarts_nothing_and_a_valid_save_clears_it(page, lab, theme, tmp_path):
    from playwright.sync_api import expect

    name = f"verdict-{slug(theme)}.ipynb"
    set_theme(page, theme)
    open_notebook(page, name)
    run_cell(page, 0, "%load_ext tfgpu_magic\nx = 41")
    bar = sidebar(page)
    expect(bar.locator(".tfgpu-tf")).to_contain_text("TensorFlow", timeout=30_000)  # the comm answers: checks work

    # Check & save valid settings: the green "saved" verdict, and nothing else.
    fill(page, cpus="2")
    bar.locator(".tfgpu-check-save").click()
    expect_only(page, "ok", "Saved in the notebook")
    before = kernel_state(lab, name)

    # Restart kernel and apply with a value the kernel refuses: no dialog, no restart, the reason in red alone.
    fill(page, limit="2XB")
    bar.locator(".tfgpu-restart-apply").click()
    expect_only(page, "error", re.compile(r"Not restarted|refused"))
    expect(page.locator(f"{SIDEBAR} .tfgpu-field[data-setting='limit'] .tfgpu-field-error")).to_contain_text("2XB")
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    assert kernel_state(lab, name) == before, "the kernel restarted (or ran something) although its check failed"
    shoot_saved(page, tmp_path / f"sidebar-verdict-refused-{slug(theme)}.png")
    page.locator(CELL).first.click()
    add_cell_below(page)
    run_cell(page, 1, "print(x + 1)")
    expect(cell_output(page, 1)).to_contain_text("42")  # the kernel's variables are still there

    # A valid save clears the red: the newest verdict is the only one.
    fill(page, limit="")
    bar.locator(".tfgpu-check-save").click()
    expect_only(page, "ok", "Saved in the notebook")
    expect(page.locator(f"{SIDEBAR} .tfgpu-field-error:visible")).to_have_count(0)


@pytest.mark.parametrize("theme", THEMES)
def test_a_kernel_that_ran_cells_is_told_neutrally_with_restart_and_apply(page, lab, theme, tmp_path):
    from playwright.sync_api import expect

    name = f"ran-{slug(theme)}.ipynb"
    set_theme(page, theme)
    open_notebook(page, name)
    sidebar(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start", timeout=60_000)
    run_cell(page, 0, "print('a cell ran')")

    # Other saved settings, saved to disk; the page reloads onto the same running kernel, which has run a cell.
    fill(page, cpus="3")
    page.locator(f"{SIDEBAR} .tfgpu-check-save").click()
    expect_only(page, "ok", "Saved in the notebook")
    page.locator(f"{NOTEBOOK} .jp-Notebook").click()
    page.keyboard.press("Control+s")
    for _ in range(50):
        if '"3"' in json.dumps(json.loads((lab.root / name).read_text())["metadata"].get("tfgpu", {})):
            break
        page.wait_for_timeout(200)
    pid = kernel_pid(lab, name)
    page.reload()
    open_notebook(page, name)
    sidebar(page)

    status = apply_status(page)
    expect(status).to_contain_text("has run cells already", timeout=60_000)
    expect_only(page, "info", "has run cells already")  # neutral: nothing was wrong with the settings
    restart = page.locator(f"{SIDEBAR} .tfgpu-restart-now")
    expect(restart).to_be_visible()
    expect(restart).to_have_text("Restart kernel and apply")
    assert kernel_pid(lab, name) == pid
    shoot_saved(page, tmp_path / f"sidebar-ran-cells-{slug(theme)}.png")

    restart.click()
    page.locator(".jp-Dialog").get_by_role("button", name="Restart and apply").click()
    expect(status).to_contain_text("Kernel restarted; saved settings applied", timeout=60_000)
    expect(status).to_contain_text("cpus 3")
    expect_only(page, "ok", "Kernel restarted")


def test_without_the_extension_loaded_the_restart_says_its_values_were_not_checked(page, lab):
    """A kernel that never ran `%load_ext tfgpu_magic` cannot check: the restart goes ahead, its dialog and the
    verdict say the values were not checked, and the kernel checks them as it applies them at its start."""
    from playwright.sync_api import expect

    open_notebook(page, UNCHECKED)
    bar = sidebar(page)
    expect(bar).to_contain_text("Load tfgpu_magic", timeout=30_000)  # no comm: the sidebar offers the load
    # A cell first, as a user has run something before wanting settings (and the kernel's connection is then
    # settled: a restart right after it opened once lost the first message after the restart, in the server).
    run_cell(page, 0, "x = 1")
    pid = kernel_pid(lab, UNCHECKED)
    fill(page, cpus="2")
    bar.locator(".tfgpu-restart-apply").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("These values were not checked")
    expect_only(page, "warn", "not checked")
    dialog.get_by_role("button", name="Restart and apply").click()
    expect(apply_status(page)).to_contain_text("Kernel restarted; saved settings applied", timeout=60_000)
    expect(apply_status(page)).to_contain_text("cpus 2")
    assert kernel_pid(lab, UNCHECKED) != pid  # restarted: a new process
    page.locator(CELL).first.click()
    add_cell_below(page)
    run_cell(page, 1, "import tensorflow as tf\nprint('logical CPUs:', len(tf.config.list_logical_devices('CPU')))")
    expect(cell_output(page, 1)).to_contain_text("logical CPUs: 2")


def test_destructive_buttons_share_the_error_colour(page, lab):
    """Restart kernel and apply (the editor's, the refusal box's, the ran-cells one), Try again and the Shut down
    dialog's button are all painted with --jp-error-color1."""
    open_notebook(page, LONG_NOTEBOOK)
    sidebar(page)
    colours = page.evaluate("""() => {
        const probe = document.createElement('div');
        probe.style.background = 'var(--jp-error-color1)';
        document.body.appendChild(probe);
        const want = getComputedStyle(probe).backgroundColor;
        probe.remove();
        const button = document.querySelector('#tfgpu-sidebar .tfgpu-restart-apply');
        return [want, getComputedStyle(button).backgroundColor];
    }""")
    assert colours[0] == colours[1], colours


def test_nothing_is_clipped_without_its_full_text_on_hover(page, lab):
    """At the sidebar's default width: a long GPU name, a long notebook path, process rows."""
    from playwright.sync_api import expect

    open_notebook(page, LONG_NOTEBOOK)
    write_config(lab.nvml_config, gpus(holder_pid=kernel_pid(lab, LONG_NOTEBOOK)))
    bar = sidebar(page)
    expect(bar).to_contain_text("NVIDIA A100-SXM4-80GB", timeout=30_000)
    expect(bar.locator(".tfgpu-notebook", has_text="a-notebook-whose-name")).to_be_visible(timeout=30_000)
    page.wait_for_timeout(500)  # one frame after the render: the tooltips of what is clipped are set then
    clipped = page.evaluate("""() => {
        const out = [];
        for (const node of document.querySelectorAll('#tfgpu-sidebar *')) {
            if (node instanceof HTMLInputElement || node.scrollWidth <= node.clientWidth) continue;
            const text = (node.textContent || '').replace(/\\s+/g, ' ').trim();
            if (!text) continue;
            const title = (node.getAttribute('title') || '').replace(/\\s+/g, ' ');
            out.push({text, title, cls: node.className, ok: title.includes(text)});
        }
        return out;
    }""")
    assert any(LONG_NOTEBOOK in c["text"] for c in clipped), f"the long path is not clipped at this width: {clipped}"
    # The GPU's name wraps: all of it on screen, and in its tooltip.
    heading = bar.locator(".tfgpu-gpu-heading", has_text="NVIDIA A100-SXM4-80GB")
    expect(heading).to_have_text(f"GPU 0 · {LONG_GPU}")
    expect(heading).to_have_attribute("title", re.compile(re.escape(LONG_GPU)))
    assert heading.evaluate("n => n.scrollWidth <= n.clientWidth"), "the GPU's name is clipped"
    missing = [c for c in clipped if not c["ok"]]
    assert not missing, missing
    width = page.evaluate("() => document.querySelector('#tfgpu-sidebar').getBoundingClientRect().width")
    assert width < 400, f"not the default width: {width}"
