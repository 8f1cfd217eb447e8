"""A kernel without TensorFlow (a PyTorch or JAX notebook on the same server) still loads the extension, lists GPUs
and their processes, opens the panel and sets `visible`; every view says once that TensorFlow is not installed,
and nothing prints a traceback. TensorFlow is hidden from the kernel's interpreter (a sitecustomize in a folder
of the test's own that marks it absent), the fake NVML shows three GPUs."""

from __future__ import annotations

import pytest
from fakenvml import three_gpus
from test_panel_kernel import plain, run_with_widgets

pytestmark = pytest.mark.kernel


def test_load_devices_panel_and_visible_work_and_say_tensorflow_is_not_installed(fake_nvml, tmp_path):
    hide = tmp_path / "hide_tensorflow"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['tensorflow'] = None  # as if not installed\n")
    fake_nvml.write(three_gpus())
    texts, widgets = run_with_widgets([
        "import importlib.util\nprint('spec', importlib.util.find_spec('tensorflow'))",
        "%load_ext tfgpu_magic",
        "%tfgpu devices",
        "%tfgpu visible 1",
        "%tfgpu",
        "%tfgpu panel",
        "import os\nprint(os.environ['CUDA_VISIBLE_DEVICES'])",
    ], **{**fake_nvml.env, "PYTHONPATH": str(hide)})
    assert texts[0].strip() == "spec None"
    for text in texts:
        assert "Traceback" not in text and "Error" not in text, text
    devices, page = texts[2].split("<div", 1)  # the text view, then the HTML one: each says it once
    assert devices.count("TensorFlow: not installed") == 1 and plain(page).count("not installed") == 1, texts[2]
    assert "NVIDIA H100 80GB HBM3" in devices and "GPU:" not in devices  # no TensorFlow names without TensorFlow
    assert "TensorFlow devices" not in devices  # said once, by the TensorFlow line
    # Its detail past 120 characters in one line: on the next, indented (issue 37).
    assert "visible 1: applied\n  CUDA_VISIBLE_DEVICES=1; read when a framework (PyTorch, JAX, CuPy) first starts " \
           "CUDA in this kernel" in texts[3], texts[3]
    status, page = texts[4].split("<div", 1)
    assert status.count("not installed") == 1 and plain(page).count("not installed") == 1, texts[4]
    shown = " ".join(plain(value) for value in widgets)
    assert "TensorFlow not installed" in shown or "TensorFlow: not installed" in shown, shown[:2000]
    assert "NVIDIA H100 80GB HBM3" in shown
    assert texts[6].strip() == "1"
