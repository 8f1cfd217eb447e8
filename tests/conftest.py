"""Shared fixtures: a real IPython shell with the extension on an isolated controller, the fake NVML library
(support/fakenvml_fixtures.py) and a JupyterLab in Chromium. The helpers that are no fixture (paths, a user's
environment, real TensorFlow in a fresh process) are in support/harness.py.

The folders are the layers and the markers: core, render, ipython, tf, kernel, server, frontend, browser,
course, gpu, hub. A test in tf/, kernel/, server/, browser/, course/, gpu/ or hub/ carries that marker, so
`pytest -m "not browser"` and `pytest tests/browser` select the same tests."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# pytest-jupyter has no entry point: its jp_fetch and server fixtures are loaded here (tests/server/test_server.py).
pytest_plugins = ["fakenvml_fixtures", "pytest_jupyter.jupyter_server"]


def pytest_configure(config):
    """The suite's kernels and servers keep their runtime files (connection files, tfgpu's GPU claims) in a folder
    of its own: never the user's, and never shared with a test run beside it."""
    os.environ["JUPYTER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="tfgpu-tests-runtime-")


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


MARKED_FOLDERS = ("tf", "kernel", "server", "browser", "course", "gpu", "hub")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        folder = Path(str(item.fspath)).resolve().relative_to(here).parts[0]
        if folder in MARKED_FOLDERS and folder not in {m.name for m in item.iter_markers()}:
            item.add_marker(getattr(pytest.mark, folder))
