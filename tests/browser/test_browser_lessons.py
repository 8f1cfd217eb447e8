"""The lessons as a learner reads them in JupyterLab: the text next to the table it describes, in Chromium.

Issue 37 found lesson text that named columns the screen does not show (`gpu`/`tf` where the GPU table reads `GPU`
and `TensorFlow`). tests/course checks every column a lesson names against its outputs' HTML; here the same places
are run in JupyterLab itself (a real server whose kernels see two fake GPUs, with the CPU-only TensorFlow of the
course) and shot, light and dark, so a person can look at text and table together: lesson 1's paragraph on the GPU
table with `%tfgpu devices` under it, and lesson 4's paragraph on `%tfgpu placement show` with its table.

Each lesson is the repository's notebook cut after the cell shown (Run All Cells then runs it top to bottom without
reaching a cell that fails on purpose). Screenshots go to the test's tmp folder and, when TFGPU_SCREENSHOTS names a
folder, there too. Skipped where the browser is missing, failed with CI=true.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from fakenvml import fake_env, n_gpus, write_config
from harness import ROOT
from labsession import CELL, Lab, keep_screenshot, open_notebook, require_browser, scroll_into_view, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.tf, pytest.mark.course]

NOTEBOOKS = ROOT / "notebooks"
DONE = re.compile(r"^\[\d+\]:$")
# The theme's stylesheet has reached the notebook: its background is dark in a dark theme, light in a light one (the
# body's theme attribute changes first; under load a picture taken then showed the old colours).
THEME_PAINTED = """dark => {
  const panel = document.querySelector('.jp-NotebookPanel-notebook');
  const rgb = panel && getComputedStyle(panel).backgroundColor.match(/\\d+/g);
  if (!rgb) return false;
  const light = (Number(rgb[0]) + Number(rgb[1]) + Number(rgb[2])) / 3 > 128;
  return dark ? !light : light;
}"""


def lesson_cut(name: str, last_source: str, dest: Path) -> int:
    """The lesson ``name`` up to and including its first code cell starting with ``last_source``, written to
    ``dest``; returns that cell's index."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    last = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith(last_source))
    nb.cells = nb.cells[:last + 1]
    nbformat.write(nb, dest / name)
    return last


@pytest.fixture(scope="module")
def lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("lessons_nvml") / "fake_nvml.cfg", n_gpus(2))
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        yield lab


def run_all(page, last: int) -> None:
    """Run > Run All Cells, as a learner does, once the notebook has its kernel, and wait for cell ``last``."""
    from playwright.sync_api import expect

    expect(page.locator(".jp-Toolbar-kernelName")).not_to_have_text("No Kernel", timeout=60_000)
    first_code = page.locator(f"{CELL}.jp-CodeCell").first.locator(".jp-InputPrompt")
    # JupyterLab may drop a run request sent as the kernel turns idle (LAB_FACTS 10): ask again until it runs.
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            expect(first_code).not_to_have_text("[ ]:", timeout=10_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    expect(page.locator(CELL).nth(last).locator(".jp-InputPrompt")).to_have_text(DONE, timeout=240_000)


def shoot_text_and_output(page, first: int, last: int, tmp_path: Path, name: str, shown: str = "table") -> None:
    """Cells ``first``..``last`` (a paragraph and the output it describes, ``shown`` in it) in one picture, dark then
    light."""
    from playwright.sync_api import expect

    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        page.wait_for_function(THEME_PAINTED, arg=theme.endswith("Dark"), timeout=30_000)
        top, bottom = page.locator(CELL).nth(first), page.locator(CELL).nth(last)
        scroll_into_view(top)
        top.evaluate("cell => cell.scrollIntoView({block: 'start'})")
        expect(bottom.locator(".jp-OutputArea").locator(shown).first).to_be_visible()
        page.mouse.move(0, 0)
        page.wait_for_timeout(400)  # the theme's colours settle
        a, b = top.bounding_box(), bottom.bounding_box()
        viewport = page.viewport_size
        height = min(b["y"] + b["height"], viewport["height"]) - a["y"]
        shot = tmp_path / f"{name}-{theme.split()[-1].lower()}.png"
        page.screenshot(path=str(shot), clip={"x": a["x"], "y": a["y"], "width": a["width"], "height": height})
        keep_screenshot(shot)
        assert shot.stat().st_size > 3_000, shot


@pytest.fixture
def page(lab):
    with lab.browser_page(width=1400, height=1300) as page:
        yield page
    print(f"--- jupyter lab log (tail) ---\n{lab.log_tail()}")


def test_lesson_1_names_the_gpu_tables_columns(page, lab, tmp_path):
    from playwright.sync_api import expect

    devices = lesson_cut("01_devices.ipynb", "%tfgpu devices", lab.root)
    open_notebook(page, "01_devices.ipynb")
    run_all(page, devices)
    text = page.locator(CELL).nth(devices - 1)
    expect(text).to_contain_text("their column TensorFlow reads not seen")
    expect(text).to_contain_text("%pip uninstall -y tensorflow-cpu")
    table = page.locator(CELL).nth(devices).locator(".jp-OutputArea table").filter(has_text="NVIDIA H100")
    heads = table.locator("th")
    expect(heads.nth(0)).to_have_text("GPU")
    expect(heads.nth(1)).to_have_text("TensorFlow")
    expect(table.locator("tbody tr").first.locator("td").nth(1)).to_have_text("not seen")
    expect(page.locator(CELL).nth(devices).locator(".jp-OutputArea")).to_contain_text(
        "pip uninstall -y tensorflow-cpu")
    shoot_text_and_output(page, devices - 1, devices, tmp_path, "lesson01-gpu-columns")

    # The slow cell announced: the paragraph before `import tensorflow` says how long it takes, and the cell shows
    # the line tfgpu prints as the import begins.
    load = next(i for i in range(devices) if page.locator(CELL).nth(i).locator(".cm-content").count()
                and page.locator(CELL).nth(i).locator(".cm-content").inner_text().startswith("import tensorflow"))
    expect(page.locator(CELL).nth(load - 1)).to_contain_text("The next cell takes 5 to 15 seconds")
    expect(page.locator(CELL).nth(load).locator(".jp-OutputArea")).to_contain_text("tfgpu: importing TensorFlow")
    shoot_text_and_output(page, load - 1, load, tmp_path, "lesson01-slow-import", shown="pre")


def test_lesson_4_names_placement_shows_columns(page, lab, tmp_path):
    from playwright.sync_api import expect

    show = lesson_cut("04_placement.ipynb", "%tfgpu placement show --all", lab.root)
    open_notebook(page, "04_placement.ipynb")
    run_all(page, show)
    folded = show - 2  # `%tfgpu placement show`, under the paragraph that names its columns
    expect(page.locator(CELL).nth(folded - 1)).to_contain_text("Column channels says where the records")
    heads = page.locator(CELL).nth(folded).locator(".jp-OutputArea table th")
    expect(heads).to_have_text(["cell", "device", "op type", "op", "channels", "lines", "asked"])
    every = page.locator(CELL).nth(show).locator(".jp-OutputArea table th")
    expect(every).to_have_text(["cell", "device", "op type", "op", "channel", "asked"])
    shoot_text_and_output(page, folded - 1, folded, tmp_path, "lesson04-placement-show-columns")
