"""Why TensorFlow sees no GPU where NVML lists some: one sentence per detectable cause, with its fix (core/no_gpu.py).
The real CPU-only TensorFlow is checked in tests/tf/test_tensorflow.py; here its build info is a stand-in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tfgpu_magic.core import no_gpu


def tf_built(**info):
    return SimpleNamespace(sysconfig=SimpleNamespace(get_build_info=lambda: info))


def test_a_cpu_only_build_names_the_package_and_the_fix(monkeypatch):
    monkeypatch.setattr(no_gpu, "distribution", lambda: "tensorflow-cpu 2.21.0")
    why = no_gpu.reason(tf_built(is_cuda_build=False, is_rocm_build=False), {}, 2)
    assert why == ("TensorFlow sees none of the 2 GPUs NVML lists: this TensorFlow (tensorflow-cpu 2.21.0) is a "
                   "CPU-only build; install one with GPU support, pip install 'tensorflow[and-cuda]', and restart the "
                   "kernel")


@pytest.mark.parametrize("value", ["", "-1", "-1,0", " ", "²", "１,0", "x,1", "٣"])
def test_cuda_visible_devices_that_hide_every_gpu(value):
    why = no_gpu.reason(tf_built(is_cuda_build=True, cuda_version="12.5"), {"CUDA_VISIBLE_DEVICES": value}, 1)
    assert why.startswith("TensorFlow sees none of the 1 GPU NVML lists: CUDA_VISIBLE_DEVICES=")
    assert "hides them from CUDA; `%tfgpu visible all` before TensorFlow is imported" in why


@pytest.mark.parametrize("environ", [{}, {"CUDA_VISIBLE_DEVICES": "0,1"}])
def test_a_cuda_build_that_found_nothing_points_at_its_log(environ):
    why = no_gpu.reason(tf_built(is_cuda_build=True, cuda_version="12.5"), environ, 3)
    assert "CUDA did not start in TensorFlow; its log at `import tensorflow` says why (`%tfgpu log` shows it)" in why
    assert "built for CUDA 12.5" in why and "pip install 'tensorflow[and-cuda]'" in why


def test_no_build_info_is_no_guess_at_the_build():
    broken = SimpleNamespace(sysconfig=SimpleNamespace(get_build_info=lambda: 1 / 0))
    why = no_gpu.reason(broken, {}, 2)
    assert "CPU-only" not in why and "CUDA did not start" in why and "built for CUDA" not in why


def test_escapes_in_the_variable_are_written_as_text():
    why = no_gpu.reason(tf_built(is_cuda_build=True), {"CUDA_VISIBLE_DEVICES": "-1\x1b[2J"}, 2)
    assert "\x1b" not in why and "\\x1b" in why
