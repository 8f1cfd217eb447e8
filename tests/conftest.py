"""Shared fixtures: a real IPython shell with the extension on an isolated controller, the fake NVML library
(support/fakenvml_fixtures.py) and a JupyterLab in Chromium. The helpers that are no fixture (paths, a user's
environment, real TensorFlow in a fresh process) are in support/harness.py.

The folders are the layers and the tiers. core/, render/ and ipython/ are the fast tier (`make test-fast`): no
kernel, no TensorFlow, no server, no browser, no Node.js. Every other folder is a marker of the slow tier, named
after it (tierguard.SLOW_MARKERS: tf, kernel, server, browser, course, gpu, hub, frontend): a test there carries
its folder's marker and `slow`, so `pytest -m "not browser"` and `pytest tests/browser` select the same tests,
and `pytest -m "not slow"` is the fast tier. A test in a fast folder that starts any of those fails, naming the
marker (support/tierguard.py); one that carries a slow marker there is a collection error: move it."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# pytest-jupyter's server fixtures are tests/server's alone (its conftest.py): its autouse fixtures cost every other
# test a ServerApp and an event loop. tierguard: the fast tier's guard (support/tierguard.py).
pytest_plugins = ["fakenvml_fixtures", "tierguard"]


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
    names = set(ip.user_ns)
    yield ip
    # InteractiveShell.instance() is one shell per process: a name a test's cell defined must not reach the next test.
    for name in set(ip.user_ns) - names:
        del ip.user_ns[name]
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


def pytest_ignore_collect(collection_path, config):
    """`-m "not slow"` (the fast tier) does not even collect the slow folders, whose every test is slow: no import
    of what they need (a server, a browser's driver), the same tests."""
    from tierguard import SLOW_MARKERS

    if (config.getoption("markexpr", "") or "").split() == ["not", "slow"] and collection_path.parent == HERE \
            and collection_path.name in SLOW_MARKERS:
        return True
    return None


def pytest_collection_modifyitems(config, items):
    """Each slow marker is a folder of its own: a test there carries it, and `slow`."""
    from tierguard import SLOW_MARKERS  # here, not above: pytest_plugins imports it first (assertion rewriting)

    here = HERE
    misplaced = []
    for item in items:
        folder = Path(str(item.fspath)).resolve().relative_to(here).parts[0]
        names = {m.name for m in item.iter_markers()}
        if folder in SLOW_MARKERS and folder not in names:
            item.add_marker(getattr(pytest.mark, folder))
            names.add(folder)
        slow = sorted(names & set(SLOW_MARKERS))
        if slow and folder not in SLOW_MARKERS:
            misplaced.append(f"{item.nodeid} is marked {', '.join(slow)} in the fast folder tests/{folder}/: "
                             f"move it to tests/{slow[0]}/")
        elif "slow" in names and not slow:
            misplaced.append(f"{item.nodeid} is marked slow without saying why: put it in the folder of one of "
                             f"{', '.join(SLOW_MARKERS)}")
        if slow and "slow" not in names:
            item.add_marker(pytest.mark.slow)
    if misplaced:
        raise pytest.UsageError("tests in the wrong tier's folder:\n" + "\n".join(misplaced))
