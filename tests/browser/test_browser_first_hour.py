"""Issue 37, item 2, in a JupyterLab notebook in Chromium: four fake GPUs in NVML and this venv's tensorflow-cpu.
Before the import `%tfgpu status` predicts no GPU:k but says that this build will list none, why, and the fix that
works; after `%tfgpu growth on`, `import tensorflow` says it is importing, then the import line names the reason
once. Both answers keep their first line within 120 characters. Screenshots in the light and dark themes go to the
test's tmp folder and, when TFGPU_SCREENSHOTS names a folder, there too."""

from __future__ import annotations

import pytest
from fakenvml import fake_env, n_gpus, write_config
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
from messages import problems

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def four_gpu_lab(fake_nvml_lib, tmp_path_factory):
    require_browser()
    path = write_config(tmp_path_factory.mktemp("four_nvml") / "fake_nvml.cfg", n_gpus(4))
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, path, base={})) as lab:
        write_notebook(lab.root / "first.ipynb", source="%load_ext tfgpu_magic")
        yield lab


def test_a_cpu_only_build_beside_four_gpus_is_named_before_and_at_the_import(four_gpu_lab, tmp_path):
    from playwright.sync_api import expect

    with watched_page(four_gpu_lab, height=900) as page:
        open_notebook(page, "first.ipynb")
        run_cell(page, 0, "%load_ext tfgpu_magic")
        add_cell_below(page)
        run_cell(page, 1, "%tfgpu status")
        status = cell_output(page, 1)
        expect(status).to_contain_text("TensorFlow will list none of the 4 GPUs NVML lists")
        said = status.inner_text()
        assert "GPU:0" not in said and "is a CPU-only build" in said, said
        assert "pip uninstall -y tensorflow-cpu, then pip install 'tensorflow[and-cuda]'" in " ".join(said.split())

        def status_shown():
            expect(status).to_contain_text("CPU-only build")

        shoot_in_both_themes(page, tmp_path, "first-hour-status-before-import", status_shown)

        page.locator(CELL).nth(1).locator(".jp-InputPrompt").click()  # the theme menu took the notebook's focus
        add_cell_below(page)
        run_cell(page, 2, "%tfgpu growth on")
        add_cell_below(page)
        run_cell(page, 3, "import tensorflow")
        imported = cell_output(page, 3)
        expect(imported).to_contain_text("tfgpu: at `import tensorflow`: growth on: no GPU to apply to")
        text = imported.inner_text()
        lines = text.splitlines()
        assert lines[0] == "tfgpu: importing TensorFlow (a few seconds) ...", text
        line = next(i for i, t in enumerate(lines) if t.startswith("tfgpu: at `import tensorflow`"))
        answer = "\n".join(lines[line:line + 2])
        assert "is a CPU-only build; for GPUs: pip uninstall -y tensorflow-cpu" in answer and not problems(answer), text
        assert text.count("CPU-only build") == 1, text

        def import_shown():
            expect(imported).to_contain_text("CPU-only build")

        shoot_in_both_themes(page, tmp_path, "first-hour-import-line", import_shown)
