"""Shared fixtures: a real IPython shell with the extension on an isolated controller, and helpers
to run real TensorFlow in fresh processes (its runtime starts once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# pytest-jupyter has no entry point: its jp_fetch and server fixtures are loaded here (tests/test_server.py).
pytest_plugins = ["fakenvml_fixtures", "pytest_jupyter.jupyter_server"]


@pytest.fixture(autouse=True)
def _no_tensorflow_here():
    """TensorFlow must never be imported into the test process: its init is one-shot and would
    change what every later test sees. Tests that need it use run_tf()."""
    yield
    assert "tensorflow" not in sys.modules, "a test imported TensorFlow in-process; use run_tf()"


@pytest.fixture
def shell():
    """A real InteractiveShell with ``%tfgpu`` on a fresh controller, a private environment and an
    in-memory NVML that shows three GPUs (see gpu_fakes)."""
    import gpu_fakes
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from tfgpu_magic.core.control import Controller
    from tfgpu_magic.ipython.magics import TfgpuMagics

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    environ: dict[str, str] = {}
    controller = Controller(environ=environ, nvml_snapshot=gpu_fakes.three_gpus)
    magics = TfgpuMagics(shell=ip, controller=controller)
    ip.register_magics(magics)
    ip.tfgpu = magics  # for assertions
    yield ip
    controller.unhook()
    for kind in ("line", "cell"):
        ip.magics_manager.magics[kind].pop("tfgpu", None)


@pytest.fixture(scope="module")
def lab(fake_nvml_lib, tmp_path_factory):
    """A JupyterLab on loopback whose kernels see three fake GPUs, shared by one module's browser tests (starting it
    costs seconds). Skipped where the browser is missing, failed instead with CI=true."""
    from fakenvml import fake_env, three_gpus, write_config
    from labsession import Lab, require_browser

    require_browser()
    config = write_config(tmp_path_factory.mktemp("lab_nvml") / "fake_nvml.cfg", three_gpus())
    # base={}: only the fake's variables; Lab builds the rest of a user's environment itself.
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, config, base={})) as lab:
        yield lab


def tf_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def run_tf(code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python with real TensorFlow available; fails the test on a non-zero exit."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env or tf_env(), timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


SHELL_PRELUDE = """
import sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
_c = Config(); _c.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=_c)
def cell(src):
    r = ip.run_cell(src)
    return r
def magic(line):
    return ip.run_line_magic("tfgpu", line)
ip.run_line_magic("load_ext", "tfgpu_magic")
"""
