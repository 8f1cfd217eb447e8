"""tfgpu in Chinese: JupyterLab with its language set to 中文 (zh_CN), as Settings > Language leaves it, in Chromium.

One Lab for the module, against the fake NVML's three GPUs; GPU 1 lists the kernel of other.ipynb (started through
the REST API), so the sidebar has a row with its Open and Shut down buttons. The sidebar's words, its shut-down
dialog and its settings' schema come from tfgpu_magic/locale/zh_CN (the frontend's catalogue, served by JupyterLab's
translation server through the `jupyterlab.locale` entry point); JupyterLab's own menus from its language pack;
a magic's refusal from the same catalogue in the kernel, which learns JupyterLab's language over the comm.
Screenshots in the light and dark themes go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a folder,
there too: look at them for boxes in place of characters, and for text cut off.
Skipped where the browser is missing, failed instead with CI=true (labsession.require_browser).
"""

from __future__ import annotations

import re

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import (
    Lab,
    add_cell_below,
    cell_output,
    keep_screenshot,
    kernel_pid,
    open_notebook,
    open_sidebar,
    require_browser,
    run_cell,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

ZH, OTHER = "zh.ipynb", "other.ipynb"
CJK = re.compile(r"[\u4e00-\u9fff]")
SHUTDOWN_DIALOG = ".jp-Dialog:has(.tfgpu-shutdown-dialog)"
# JupyterLab's theme names (the body's data-jp-theme-name) and their names in its zh_CN menus
THEMES = {"JupyterLab Light": "JupyterLab 亮色", "JupyterLab Dark": "JupyterLab 暗色"}


@pytest.fixture(scope="module")
def zh_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config_path = tmp_path_factory.mktemp("zh_nvml") / "fake_nvml.cfg"
    write_config(config_path, three_gpus())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config_path, base={}), language="zh_CN") as lab:
        for name in (ZH, OTHER):
            write_notebook(lab.root / name)
        lab.api("POST", "/api/sessions", {"path": OTHER, "name": OTHER, "type": "notebook",
                                          "kernel": {"name": "python3"}})
        config = three_gpus()
        config["gpus"][1]["processes"] = [{"pid": kernel_pid(lab, OTHER), "used": 1536 * MIB}]
        write_config(config_path, config)
        yield lab


@pytest.fixture
def page(zh_lab):
    with watched_page(zh_lab) as page:
        yield page


def set_theme(page, name: str) -> None:
    """labsession.set_theme through JupyterLab's menus in Chinese: 设置 > 主题 > the theme's Chinese name."""
    from playwright.sync_api import expect

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^设置$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^主题$")).first.hover()
    page.locator(".lm-Menu-itemLabel", has_text=THEMES[name]).first.click()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", name, timeout=30_000)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=30_000)


def shoot(page, folder, name: str):
    page.mouse.move(0, 0)  # no hover in the picture
    shot = folder / f"{name}.png"
    page.screenshot(path=str(shot))
    keep_screenshot(shot)
    assert shot.stat().st_size > 10_000
    return shot


def test_the_sidebar_its_dialog_and_its_settings_are_in_chinese(page, zh_lab, tmp_path):
    from playwright.sync_api import expect

    open_notebook(page, ZH)
    # JupyterLab's own words: its language pack is on
    expect(page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^文件$"))).to_be_visible()

    sidebar = open_sidebar(page)
    for words in ("所有 GPU", "此笔记本", "驱动 "):
        expect(sidebar).to_contain_text(words, timeout=30_000)
    expect(sidebar.get_by_role("button", name="加载 tfgpu_magic")).to_be_visible(timeout=30_000)
    row = sidebar.get_by_role("button", name=re.compile(f"^打开 {re.escape(OTHER)}"))
    expect(row).to_be_visible(timeout=30_000)
    expect(row).to_contain_text("1,536 MiB")  # figures and units stay as typed
    # The server's sentences too: the row's activity, the note on a process no kernel here can be matched to.
    expect(sidebar).to_contain_text(re.compile(r"空闲 \d+ (?:s|min) · 占用 1\.5 GiB"), timeout=30_000)
    expect(sidebar).to_contain_text("1 个进程在此服务器上不可见")
    assert not re.search(r"\b(?:All GPUs|This notebook|Load tfgpu_magic|Driver|idle|holds|not visible)\b",
                         sidebar.inner_text())

    for theme in THEMES:
        set_theme(page, theme)
        sidebar = open_sidebar(page)
        expect(sidebar).to_contain_text("所有 GPU")
        mode = theme.split()[-1].lower()
        shoot(page, tmp_path, f"zh-sidebar-{mode}")

        # The shut-down question of a notebook's row, in Chinese; Escape cancels it (nothing is shut down).
        sidebar.get_by_role("button", name=f"关闭 {OTHER} 的内核").click()
        dialog = page.locator(SHUTDOWN_DIALOG)
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text("关闭内核？")
        expect(dialog).to_contain_text(f"关闭 {OTHER} 的内核？")
        expect(dialog.get_by_role("button", name="取消")).to_be_visible()
        expect(dialog.get_by_role("button", name="关闭", exact=True)).to_be_visible()
        shoot(page, tmp_path, f"zh-shutdown-dialog-{mode}")
        page.keyboard.press("Escape")
        expect(dialog).to_have_count(0)
    set_theme(page, "JupyterLab Light")


def test_the_settings_editor_shows_the_sidebars_settings_in_chinese(zh_lab):
    """JupyterLab's server translates each schema it serves (the Settings editor shows them as served) in the
    domain its `jupyter.lab.internationalization` names, with the selectors' contexts ("schema", "settings")."""
    schema = zh_lab.api("GET", "/lab/api/settings/tfgpu_magic:sidebar")["schema"]
    assert schema["title"] == "GPU 侧边栏"
    assert schema["jupyter.lab.setting-icon-label"] == "GPU 侧边栏"
    assert schema["properties"]["refreshInterval"]["title"] == "刷新间隔（秒）"
    assert CJK.search(schema["properties"]["statusBar"]["description"])


def test_a_magics_refusal_is_in_chinese(page, zh_lab, tmp_path):
    """%tfgpu cpus 2 after TensorFlow started is refused as too late, in JupyterLab's language: the kernel heard it
    over the comm the sidebar opens once tfgpu_magic is loaded."""
    from playwright.sync_api import expect

    open_notebook(page, ZH)
    sidebar = open_sidebar(page)
    run_cell(page, 0, "%load_ext tfgpu_magic")
    expect(sidebar.get_by_role("button", name="加载 tfgpu_magic")).to_have_count(0, timeout=30_000)
    add_cell_below(page)
    run_cell(page, 1, "import tensorflow as tf\ntf.constant(1)")
    add_cell_below(page)
    run_cell(page, 2, "%tfgpu cpus 2")
    output = cell_output(page, 2)
    expect(output).to_contain_text("tfgpu:", timeout=30_000)
    text = output.inner_text().strip()
    first = text.splitlines()[0].removeprefix("UsageError: ")  # IPython's prefix for a UsageError
    assert first.startswith("tfgpu:"), text
    assert CJK.search(first), f"the refusal is not in Chinese: {text!r}"
    assert "%tfgpu cpus 2" in first, f"the magic is not left as typed: {text!r}"

    # The front notebook's section (TensorFlow's devices, the settings table, the refusal) in both themes.
    expect(sidebar.locator(".tfgpu-tf")).to_contain_text("TensorFlow", timeout=30_000)
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        open_sidebar(page)
        page.mouse.move(140, 500)  # over the sidebar: scrolled to its end, the front notebook's section
        page.mouse.wheel(0, 5000)
        page.wait_for_timeout(300)
        shoot(page, tmp_path, f"zh-notebook-{theme.split()[-1].lower()}")
