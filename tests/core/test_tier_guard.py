"""The fast tier's guard (tests/support/tierguard.py) fires: a pytest run of its own, on tests written here, fails
each fast test that imports TensorFlow in a child, starts a kernel (jupyter_client, as nbclient does), a server
(pytest-jupyter's fixture, by its name; ServerApp.initialize), a browser or Node.js, and says the marker to add;
the same tests marked slow pass, and so do a child that only looks TensorFlow up and a plain `python -c`. Nothing
is started: the guard refuses first."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
from harness import SUPPORT
from tierguard import SLOW_MARKERS, launch_marker

TESTS = '''
import os, subprocess, sys, threading
import pytest

FAKE_TF = os.environ["FAKE_TF"]  # a folder with an empty tensorflow package: importing it costs nothing


def child(code, **env):
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": FAKE_TF, **env},
                          capture_output=True, text=True, check=True)


def test_child_imports_tensorflow():
    assert child("import tensorflow; print(tensorflow.__name__)").stdout == "tensorflow\\n"


@pytest.mark.tf
def test_child_imports_tensorflow_marked():
    child("import tensorflow")


def test_grandchild_through_a_shell_imports_tensorflow():
    subprocess.run(["sh", "-c", f'PYTHONPATH="{FAKE_TF}:$PYTHONPATH" "{sys.executable}" -c "import tensorflow"'],
                   check=True)


def test_child_only_looks_tensorflow_up():
    child("import importlib.util; assert importlib.util.find_spec('tensorflow')")


def test_plain_python_child():
    child("print(1)")


def test_kernel_manager():
    from jupyter_client.manager import KernelManager
    KernelManager(kernel_name="python3").start_kernel()


def test_kernel_started_in_a_thread():
    def start():
        try:
            subprocess.Popen([sys.executable, "-m", "ipykernel_launcher", "-f", "kernel.json"])
        except BaseException:
            pass  # swallowed: the guard still fails the test
    thread = threading.Thread(target=start)
    thread.start()
    thread.join()


@pytest.mark.kernel
def test_kernel_command_marked():
    assert subprocess.run([sys.executable, "-c", "print(1)", "-m", "ipykernel_launcher"]).returncode == 0


def test_jupyter_lab():
    subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser"])


def test_server_fixture(jp_fetch):
    pass


def test_server_in_this_process():
    from jupyter_server.serverapp import ServerApp
    ServerApp().initialize(argv=[])


@pytest.mark.server
def test_server_in_this_process_marked():
    from jupyter_server.serverapp import ServerApp
    ServerApp().initialize(argv=[])


def test_browser():
    subprocess.Popen(["chromium", "--headless=new", "about:blank"])


def test_node():
    subprocess.run(["node", "-e", "1"])
'''

EXPECTED = {  # test -> what its failure says; None: passes
    "test_child_imports_tensorflow": "a process it started imported TensorFlow",
    "test_child_imports_tensorflow_marked": None,
    "test_grandchild_through_a_shell_imports_tensorflow": "a process it started imported TensorFlow",
    "test_child_only_looks_tensorflow_up": None,
    "test_plain_python_child": None,
    "test_kernel_manager": "starts a Jupyter kernel",
    "test_kernel_started_in_a_thread": "starts a Jupyter kernel",
    "test_kernel_command_marked": None,
    "test_jupyter_lab": "starts a Jupyter server (jupyter lab)",
    "test_server_fixture": "uses the fixture 'jp_configurable_serverapp', which starts a Jupyter server",
    "test_server_in_this_process": "starts a Jupyter server in this process",
    "test_server_in_this_process_marked": None,
    "test_browser": "starts a browser",
    "test_node": "starts Node.js",
}
ADVICE = {"TensorFlow": "move it to tests/tf/", "kernel": "move it to tests/kernel/", "server": "tests/server/",
          "browser": "tests/browser/", "Node.js": "tests/frontend/"}


def test_the_guard_fails_each_fast_test_that_starts_a_slow_thing_and_names_its_marker(tmp_path):
    fake_tf = tmp_path / "fake_tf" / "tensorflow"
    fake_tf.mkdir(parents=True)
    (fake_tf / "__init__.py").write_text("")
    run = tmp_path / "run"
    run.mkdir()
    markers = "".join(f"    {m}: a slow marker\n" for m in SLOW_MARKERS)
    (run / "pytest.ini").write_text("[pytest]\nmarkers =\n" + markers)
    (run / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(SUPPORT)!r})
        import types

        import pytest

        pytest_plugins = ["tierguard"]

        # Stand-ins (nothing starts, and pytest-jupyter's import costs seconds): its server fixture, by its name,
        # and a ServerApp as loaded by it, whose initialize the guard refuses in this process.
        @pytest.fixture
        def jp_configurable_serverapp():
            raise AssertionError("the guard lets this fixture run")

        @pytest.fixture
        def jp_fetch(jp_configurable_serverapp):
            pass

        class ServerApp:
            def initialize(self, argv=None):
                pass

        serverapp = types.ModuleType("jupyter_server.serverapp")
        serverapp.ServerApp = ServerApp
        sys.modules["jupyter_server.serverapp"] = serverapp
    """))
    (run / "test_cases.py").write_text(TESTS)
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TFGPU_TEST_"))}
    env.update(FAKE_TF=str(fake_tf.parent), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           f"--junitxml={report}", "test_cases.py"], cwd=run, env=env, capture_output=True,
                          text=True, timeout=120)
    assert report.exists(), proc.stdout + proc.stderr
    said = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problems = case.findall("failure") + case.findall("error")
        said[case.get("name")] = " ".join((p.get("message") or "") + (p.text or "") for p in problems) or None
    assert set(said) == set(EXPECTED), proc.stdout
    for name, expected in EXPECTED.items():
        if expected is None:
            assert said[name] is None, (name, said[name])
            continue
        assert said[name] and expected in said[name], (name, said[name])
        assert f"test_cases.py::{name} is in the fast tier (no slow marker)" in said[name], said[name]
        what = next(key for key in ADVICE if key in expected)
        assert ADVICE[what] in said[name], (name, said[name])
    assert "Traceback" not in said["test_kernel_manager"]  # one line that says what to do, not the guard's insides


@pytest.mark.parametrize(("argv", "marker"), [
    ([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"], "kernel"),
    (["/venv/bin/python3", "/venv/lib/python3.11/site-packages/ipykernel_launcher.py", "-f", "k.json"], "kernel"),
    (["jupyter", "execute", "a.ipynb"], "kernel"),
    (["jupyter", "nbconvert", "--to", "html", "--execute", "a.ipynb"], "kernel"),
    (["jupyter", "nbconvert", "--to", "html", "a.ipynb"], None),
    (["jupyter", "trust", "a.ipynb"], None),
    (["/venv/bin/jupyter-lab", "--no-browser"], "server"),
    ([sys.executable, "-m", "jupyterhub", "-f", "config.py"], "server"),
    (["configurable-http-proxy", "--port", "0"], "server"),
    ("jupyter server --port 0", "server"),
    (["/usr/bin/chromium", "--headless=new"], "browser"),
    (["/venv/lib/python3.11/site-packages/playwright/driver/node", "cli.js", "run-driver"], "browser"),
    (["node", "--test", "labextension/test/a.test.mjs"], "frontend"),
    ([sys.executable, "-m", "tfgpu_magic", "status"], None),
    (["sh", "-c", 'exec "$0" "$@" >&-', "tfgpu", "status"], None),
    ([sys.executable, "-c", "import json"], None),
])
def test_which_commands_are_slow(argv, marker):
    found = launch_marker(argv)
    assert (found and found[0]) == marker


def test_a_fast_tests_python_children_get_the_watcher_last_on_their_path():
    """This test is fast: its children get the watcher's folder last on PYTHONPATH and a log of their own."""
    out = subprocess.run([sys.executable, "-c", "import os, sys; print(os.environ['TFGPU_TEST_TIER_LOG']); "
                          "print(sys.path[1:3])"], env={**os.environ, "PYTHONPATH": "/first"}, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert os.path.exists(out[0])
    assert out[1] == repr(["/first", str(SUPPORT / "tierguard_site")])
