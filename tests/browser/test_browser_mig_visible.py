"""`%tfgpu visible 2` where GPU 2 is in MIG mode, in a JupyterLab notebook in Chromium: the refusal names the MIG
devices to choose, one line each as the magic that chooses it, and Tab after `%tfgpu visible ` offers those MIG
devices in place of GPU 2. The kernel sees the fake NVML library: GPU 0 an A100, GPU 1 an H100, GPU 2 an A100 in MIG
mode with two MIG devices. Screenshots in the light and dark themes go to the test's tmp folder and, when
TFGPU_SCREENSHOTS names a folder, there too."""

from __future__ import annotations

import pytest
from fakenvml import fake_env, mig_gpu, three_gpus, write_config
from labsession import (
    CELL,
    Lab,
    add_cell_below,
    cell_output,
    open_notebook,
    require_browser,
    run_cell,
    shoot_in_both_themes,
    watched_page,
    write_notebook,
)

pytestmark = pytest.mark.browser

MIG_UUIDS = ("MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d", "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f")


@pytest.fixture(scope="module")
def mig_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    config = three_gpus()
    config["gpus"][2] = mig_gpu()
    path = write_config(tmp_path_factory.mktemp("mig_nvml") / "fake_nvml.cfg", config)
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, path, base={})) as lab:
        write_notebook(lab.root / "mig.ipynb", source="%load_ext tfgpu_magic")
        yield lab


def test_visible_on_a_mig_gpu_offers_its_mig_devices(mig_lab, tmp_path):
    from playwright.sync_api import expect

    with watched_page(mig_lab, height=700) as page:
        open_notebook(page, "mig.ipynb")
        run_cell(page, 0, "%load_ext tfgpu_magic")
        add_cell_below(page)
        run_cell(page, 1, "%tfgpu visible 2")
        output = cell_output(page, 1)
        expect(output).to_contain_text("GPU 2 is in MIG mode, where a process gets one MIG device, not the GPU; "
                                       "choose one:")
        said = output.inner_text()
        for uuid in MIG_UUIDS:
            assert f"%tfgpu visible {uuid}" in said, said
        assert "Traceback" not in said

        def refusal_shown():
            expect(output).to_contain_text(MIG_UUIDS[1])

        shoot_in_both_themes(page, tmp_path, "mig-visible-refusal", refusal_shown)

        # Tab after `%tfgpu visible `: the MIG devices where GPU 2's index would be.
        page.locator(CELL).nth(1).locator(".jp-InputPrompt").click()  # the theme menu took the notebook's focus
        add_cell_below(page)
        editor = page.locator(CELL).nth(2).locator(".cm-content")
        editor.click()
        page.keyboard.insert_text("%tfgpu visible ")
        page.keyboard.press("Tab")
        completer = page.locator(".jp-Completer")
        expect(completer).to_be_visible(timeout=30_000)
        items = completer.locator(".jp-Completer-item")
        expect(items.filter(has_text=MIG_UUIDS[0])).to_have_count(1)
        offered = [text.strip() for text in items.all_inner_texts()]
        assert not any(text.split()[0] == "2" for text in offered if text.split()), offered

        def completer_shown():
            if not completer.is_visible():  # the theme menu closes it: ask again
                editor.click()
                page.keyboard.press("End")
                page.keyboard.press("Tab")
            expect(completer).to_be_visible(timeout=30_000)

        shoot_in_both_themes(page, tmp_path, "mig-visible-tab", completer_shown)
