"""Why TensorFlow sees no GPU where NVML lists some: one sentence per detectable cause, with its fix (core/no_gpu.py).
The real CPU-only TensorFlow is checked in tests/tf/test_tensorflow.py; here its build info is a stand-in."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tfgpu_magic.core import no_gpu


def tf_built(**info):
    return SimpleNamespace(sysconfig=SimpleNamespace(get_build_info=lambda: info))


def test_a_cpu_only_build_names_the_package_and_the_fix(monkeypatch):
    monkeypatch.setattr(no_gpu, "distribution", lambda: "tensorflow-cpu 2.21.0")
    monkeypatch.setattr(no_gpu, "_installed", lambda name: name == "tensorflow-cpu")
    why = no_gpu.reason(tf_built(is_cuda_build=False, is_rocm_build=False), {}, 2)
    assert why == ("TensorFlow sees none of the 2 GPUs NVML lists: tensorflow-cpu 2.21.0 is a CPU-only build; for "
                   "GPUs: pip uninstall -y tensorflow-cpu, then pip install 'tensorflow[and-cuda]', then restart the "
                   "kernel")


@pytest.mark.parametrize(("installed", "fix"), [
    # pip installs tensorflow over tensorflow-cpu without removing it: the CPU-only package goes first.
    ({"tensorflow-cpu"}, "pip uninstall -y tensorflow-cpu, then pip install 'tensorflow[and-cuda]'"),
    # Both installed share tensorflow/: both go, or pip would call the broken tensorflow satisfied.
    ({"tensorflow", "tensorflow-cpu"},
     "pip uninstall -y tensorflow-cpu tensorflow, then pip install 'tensorflow[and-cuda]'"),
    ({"tf-nightly-cpu"}, "pip uninstall -y tf-nightly-cpu, then pip install 'tensorflow[and-cuda]'"),
    ({"tensorflow"}, "pip install 'tensorflow[and-cuda]'"),
    (set(), "pip install 'tensorflow[and-cuda]'"),
])
def test_the_fix_removes_a_cpu_only_package_first(monkeypatch, installed, fix):
    monkeypatch.setattr(no_gpu, "_installed", lambda name: name in installed)
    assert no_gpu.fix_build() == fix


def fake_tensorflow(folder, text):
    platform = folder / "tensorflow" / "python" / "platform"
    platform.mkdir(parents=True)
    (folder / "tensorflow" / "__init__.py").write_text("raise SystemExit('imported')\n")
    if text is not None:
        (platform / "build_info.py").write_text(text)


CUDA_INFO = ("import collections\n\nbuild_info = collections.OrderedDict([('cpu_compiler', '/usr/bin/clang-18'), "
             "('cuda_compute_capabilities', ['sm_60', 'compute_90']), ('cuda_version', '12.5.1'), "
             "('cudnn_version', '9'), ('is_cuda_build', True), ('is_rocm_build', False), "
             "('is_tensorrt_build', False)])\n")
CPU_INFO = ("import collections\n\nbuild_info = collections.OrderedDict([('is_cuda_build', False), "
            "('is_rocm_build', False), ('is_tensorrt_build', False)])\n")


@pytest.mark.parametrize(("text", "cpu_only"), [
    (CPU_INFO, True), (CUDA_INFO, False),
    ("build_info = {'is_cuda_build': False, 'is_rocm_build': True}\n", False),
    ("build_info = collections.OrderedDict(dict(is_cuda_build=False))\n", None),  # no literal: not guessed
    ("build_info = [\n", None), ("x = 1\n", None), (None, None),
])
def test_the_installed_build_is_read_from_its_file_without_importing_it(tmp_path, monkeypatch, text, cpu_only):
    fake_tensorflow(tmp_path, text)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert no_gpu.installed_cpu_only() is cpu_only
    assert "tensorflow" not in sys.modules


def test_no_tensorflow_installed_is_not_known(monkeypatch):
    monkeypatch.setattr(no_gpu.importlib.machinery.PathFinder, "find_spec", lambda name: None)
    assert no_gpu.installed_build_info() is None and no_gpu.installed_cpu_only() is None


def test_the_installed_tensorflow_cpu_reads_as_cpu_only():
    """This venv's tensorflow-cpu, as a kernel would find it; reading it imports nothing of TensorFlow."""
    assert no_gpu.installed_cpu_only() is True
    assert not any(name == "tensorflow" or name.startswith("tensorflow.") for name in sys.modules)


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
