"""The out-of-memory card in JupyterLab (issue 36), in Chromium, against a real server and kernel whose NVML is the
fake library.

A GPU's OOM cannot happen on tensorflow-cpu, so the GPU card comes from TensorFlow's own ResourceExhaustedError with
the GPU allocator's text, raised in a cell, while the fake NVML shows one H100 mostly held by the kernel itself
("self"): the kernel's diagnosis is "memory growth is off" and it suggests `growth on`. The tests check that the card
renders (not the bundle's HTML fallback) with the asked bytes, the GPU and the steps; that "Restart with growth on"
asks first, naming the setting and the cells it runs again, with Cancel focused and the default (Enter cancels);
that Cancel changes nothing (same kernel process, same execution counts, nothing saved); and that accepting saves
the setting in the notebook's metadata (read back through the contents API), restarts the kernel (a new process),
applies the setting at that start, and runs the cells above the failing one again, not the failing one.

A real OOM on the CPU (``tf.zeros((2**40,))``: 4 TiB) gets the host-memory card, with no Restart button (nothing to
suggest), and its "Free memory" runs ``%tfgpu free`` in the kernel, its report in the card, without taking an
execution count.

Screenshots of the card (light and dark) and of the question go to the test's tmp folder and, when
TFGPU_SCREENSHOTS names a folder, there too. Skipped where the browser is missing, failed with CI=true.
"""

from __future__ import annotations

import re
import time
import urllib.error

import pytest
from a11y import DIALOG_OF, assert_no_violations
from fakenvml import MIB, fake_env, write_config
from labsession import (
    CELL,
    Lab,
    add_cell_below,
    apply_status,
    cell_output,
    element_screenshot,
    keep_screenshot,
    kernel_expression,
    open_notebook,
    require_browser,
    run_cell,
    scroll_into_view,
    set_theme,
    sidebar,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.tf]

GIB = 1 << 30
# 6 Gi float32 elements: 24 GiB asked on GPU:0, which the kernel's own 60 GiB pool could not hold.
GPU_MESSAGE = ("OOM when allocating tensor with shape[6442450944] and type float on "
               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")
CELLS = (
    "%load_ext tfgpu_magic",
    "x = 1",
    "import os\nprint('pid', os.getpid())",
    f"import tensorflow as tf\nraise tf.errors.ResourceExhaustedError(None, None, {GPU_MESSAGE!r})",
)
FAILING = len(CELLS) - 1
PID = re.compile(r"pid (\d+)")
MIME = "application/vnd.tfgpu.oom+json"


def one_gpu() -> dict:
    """One H100 (80 GiB), 60 GiB of it held by the process that reads NVML: for the kernel, itself."""
    return {
        "driver_version": "550.54.15",
        "cuda_driver_version": 12040,
        "gpus": [{
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-9f3a6b21-84c0-4d5e-b7a2-3e1c0d9f8b11",
            "pci_bus_id": "00000000:3B:00.0",
            "memory_total": 81920 * MIB,
            "memory_used": 61440 * MIB,
            "memory_reserved": 569 * MIB,
            "utilization_gpu": 3,
            "processes": [{"pid": "self", "used": 61440 * MIB}],
        }],
    }


@pytest.fixture(scope="module")
def lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = write_config(tmp_path_factory.mktemp("oom_nvml") / "fake_nvml.cfg", one_gpu())
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        write_notebook(lab.root / "oom.ipynb")
        write_notebook(lab.root / "cpu.ipynb")
        write_received(lab.root / "received.ipynb")
        yield lab


def write_received(path) -> None:
    """A notebook from elsewhere (not signed here) that carries a card in a cell's saved output, suggesting a
    setting."""
    import nbformat

    write_notebook(path)
    nb = nbformat.read(path, as_version=4)
    card = {"schema": 1, "kind": "gpu", "error": "ResourceExhaustedError", "message": GPU_MESSAGE,
            "asked": {"shape": [6442450944], "dtype": "float", "bytes": 24 * GIB, "device": "GPU:0",
                      "allocator": "GPU_0_bfc"},
            "physical_index": 0, "tf_memory": {"current_bytes": None, "peak_bytes": None}, "settings": [],
            "gpu": None, "holders": [], "cause": "received", "steps": [{"magic": "%tfgpu growth on", "why": "x"}],
            "suggested": {"growth": "on"}, "execution_count": 1}
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={MIME: card, "text/plain": "OOM"})]
    nbformat.write(nb, path)


def prompt(page, index: int):
    return page.locator(CELL).nth(index).locator(".jp-InputPrompt")


def card_of(page, index: int):
    return cell_output(page, index).locator(".tfgpu-oomcard")


def printed_pid(page, index: int) -> int:
    found = PID.search(cell_output(page, index).inner_text())
    assert found, cell_output(page, index).inner_text()
    return int(found.group(1))


def saved_notebook(lab: Lab, page, name: str) -> dict:
    """Save the notebook in the page (Ctrl+S) and read it back through the contents API once the server has the new
    copy (its last_modified changed)."""
    before = lab.api("GET", f"/api/contents/{name}?content=0")["last_modified"]
    prompt(page, 0).click()  # the notebook has the focus, in command mode
    page.keyboard.press("Control+s")
    failed = None
    for _ in range(100):
        try:
            model = lab.api("GET", f"/api/contents/{name}?content=1")
        except urllib.error.HTTPError as error:
            # jupyter_server writes a save in place, after a backup copy: read mid-write (another save, the
            # restart's), the file is empty and the answer is 400 "Unreadable Notebook", or 500 when the reader's
            # restore from the backup finds it already removed. Asked again once that write is done.
            if error.code not in (400, 500):
                raise
            failed = error
        else:
            if model["last_modified"] != before:
                return model["content"]
        page.wait_for_timeout(200)
    if failed is not None:
        raise failed
    raise AssertionError(f"{name} was not saved (last modified {before})")


def shoot_card(page, locator, tmp_path, name: str) -> None:
    """``locator`` in the dark and the light theme; axe-core finds no WCAG A/AA violation in the card in either."""
    from playwright.sync_api import expect

    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        expect(locator).to_be_visible()
        assert_no_violations(page, [".tfgpu-oomcard"], f"{name} ({theme})")
        scroll_into_view(locator)
        page.mouse.move(0, 0)
        page.wait_for_timeout(400)  # the theme's colours settle
        shot = tmp_path / f"{name}-{theme.split()[-1].lower()}.png"
        element_screenshot(locator, shot)
        keep_screenshot(shot)
        assert shot.stat().st_size > 3_000, shot


def test_the_gpu_card_and_restart_with_its_setting(page, lab, tmp_path):
    from playwright.sync_api import expect

    open_notebook(page, "oom.ipynb")
    for index, source in enumerate(CELLS):
        if index:
            add_cell_below(page)
        run_cell(page, index, source, count=index + 1)
    pid_before = printed_pid(page, 2)

    # The card, not the bundle's HTML fallback (render/oom.py's box) or its text.
    card = card_of(page, FAILING)
    expect(card).to_be_visible(timeout=60_000)
    expect(cell_output(page, FAILING).locator(".tfgpu-view.tfgpu-oom")).to_have_count(0)
    expect(cell_output(page, FAILING).locator("[data-mime-type='text/plain']")).to_have_count(0)
    expect(card.locator(".tfgpu-oomcard-title")).to_have_text("Out of GPU memory on GPU:0 (GPU 0)")
    asked = card.locator(".tfgpu-oomcard-asked td")
    expect(asked).to_have_text("24 GiB (float, shape [6442450944])")
    expect(asked).to_have_attribute("title", f"{24 * GIB:,} bytes")
    expect(card.locator(".tfgpu-oomcard-device td")).to_have_text("GPU:0 (GPU 0), allocator GPU_0_bfc")
    expect(card.locator(".tfgpu-oomcard-gpu td")).to_have_text("NVIDIA H100 80GB HBM3: 19.4 GiB free of 80 GiB")
    expect(card.locator(".tfgpu-oomcard-holders")).to_contain_text("60 GiB")
    expect(card.locator(".tfgpu-oomcard-cause")).to_contain_text("memory growth is off")
    magics = card.locator(".tfgpu-oomcard-steps code.tfgpu-oomcard-magic")
    expect(magics.first).to_have_text("%tfgpu growth on")
    expect(card.locator(".tfgpu-oomcard-steps")).to_contain_text("%tfgpu limit 60%")
    restart = card.get_by_role("button", name="Restart with growth on")
    expect(restart).to_be_enabled()
    expect(card.get_by_role("button", name="Free memory")).to_be_enabled()
    shoot_card(page, card, tmp_path, "oom-card-gpu")

    # The question names the setting and the cells it runs again; Cancel has the focus and is the default.
    restart.click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Restart the kernel with growth on?")
    expect(dialog).to_contain_text("growth on is saved in this notebook")
    expect(dialog).to_contain_text(
        "cells 1–3 above the failing one run again (3 code cells); they may have side effects")
    expect(dialog).to_contain_text("The failing cell (cell 4) does not run.")
    cancel = dialog.get_by_role("button", name="Cancel")
    expect(cancel).to_be_focused()
    expect(dialog.get_by_role("button", name="Restart and run cells 1–3")).to_be_visible()
    page.keyboard.press("Enter")  # the default button: Cancel
    expect(dialog).to_have_count(0)
    # Readable and named in both themes, ending in the light one (the menu that sets a theme waits behind a dialog:
    # the question is asked again in each).
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        restart.click()
        expect(dialog.locator(".tfgpu-oomcard-question")).to_be_visible()
        assert_no_violations(page, [DIALOG_OF.format(".tfgpu-oomcard-question")], f"the restart question ({theme})")
        shot = tmp_path / f"oom-restart-question-{theme.split()[-1].lower()}.png"
        element_screenshot(dialog.locator(".jp-Dialog-content"), shot)
        keep_screenshot(shot)
        page.keyboard.press("Enter")
        expect(dialog).to_have_count(0)

    # Cancel changed nothing: the same kernel process, the same counts, nothing saved.
    assert int(kernel_expression(lab, "oom.ipynb", "__import__('os').getpid()")) == pid_before
    for index in range(len(CELLS)):
        expect(prompt(page, index)).to_have_text(f"[{index + 1}]:")
    expect(card.locator(".tfgpu-oomcard-status")).to_have_text("")
    assert "tfgpu" not in saved_notebook(lab, page, "oom.ipynb")["metadata"]

    # Accepted: saved, restarted (the start applies it), the cells above run again, the failing one does not.
    restart.click()
    dialog.get_by_role("button", name="Restart and run cells 1–3").click()
    expect(card.locator(".tfgpu-oomcard-status")).to_have_text(
        "Kernel restarted with growth on; cells 1–3 ran again.", timeout=120_000)
    for index in range(FAILING):
        expect(prompt(page, index)).to_have_text(f"[{index + 1}]:")  # counted from 1 again: a new kernel
    expect(prompt(page, FAILING)).to_have_text(f"[{FAILING + 1}]:")  # not run again: its count and its card stay
    expect(card).to_be_visible()
    pid_after = printed_pid(page, 2)
    assert pid_after != pid_before
    assert int(kernel_expression(lab, "oom.ipynb", "__import__('os').getpid()")) == pid_after
    metadata = saved_notebook(lab, page, "oom.ipynb")["metadata"]
    assert metadata["tfgpu"] == {"version": 1, "apply_on_start": True, "settings": {"growth": "on"}}, metadata
    # Through the saved settings' own path: applied at that start, before the cells, as the sidebar says.
    sidebar(page)
    expect(apply_status(page)).to_contain_text("Applied at kernel start: growth on", timeout=60_000)

def test_a_real_cpu_oom_and_free_memory(page, lab, tmp_path):
    from playwright.sync_api import expect

    open_notebook(page, "cpu.ipynb")
    run_cell(page, 0, "%load_ext tfgpu_magic", count=1)
    add_cell_below(page)
    run_cell(page, 1, "import tensorflow as tf\ntf.zeros((2**40,))", count=2, timeout=300)

    card = card_of(page, 1)
    expect(card).to_be_visible(timeout=60_000)
    expect(card.locator(".tfgpu-oomcard-title")).to_have_text("Out of host memory on CPU:0")
    expect(card.locator(".tfgpu-oomcard-asked td")).to_have_text("4 TiB (float, shape [1099511627776])")
    expect(card.locator(".tfgpu-oomcard-asked td")).to_have_attribute("title", f"{1 << 42:,} bytes")
    expect(card.locator(".tfgpu-oomcard-gpu")).to_have_count(0)  # host memory: no GPU figures, no holders
    expect(card.locator(".tfgpu-oomcard-holders")).to_have_count(0)
    expect(card.locator(".tfgpu-oomcard-steps li").first).to_be_visible()
    expect(card.locator(".tfgpu-oomcard-restart")).to_have_count(0)  # nothing suggested: no Restart button

    started = time.monotonic()
    card.get_by_role("button", name="Free memory").click()
    status = card.locator(".tfgpu-oomcard-status")
    expect(status).to_have_text("%tfgpu free ran in this notebook's kernel:", timeout=60_000)
    report = card.locator(".tfgpu-oomcard-report")
    expect(report).to_contain_text("tfgpu: free: dropped the last error (ResourceExhaustedError)")
    print(f"Free memory answered in {time.monotonic() - started:.1f} s")
    shoot_card(page, card, tmp_path, "oom-card-cpu-freed")

    # It took no execution count: the next cell is [3].
    prompt(page, 1).click()  # the notebook has the focus again (the theme menu had it)
    add_cell_below(page)
    run_cell(page, 2, "print('after')", count=3)


def test_a_card_in_a_notebook_from_elsewhere_has_no_buttons(page):
    from playwright.sync_api import expect

    open_notebook(page, "received.ipynb")
    card = card_of(page, 0)
    expect(card).to_be_visible(timeout=60_000)
    expect(card.locator(".tfgpu-oomcard-title")).to_have_text("Out of GPU memory on GPU:0 (GPU 0)")
    expect(card.locator(".tfgpu-oomcard-untrusted")).to_contain_text("No buttons")
    expect(card.locator("button")).to_have_count(0)
