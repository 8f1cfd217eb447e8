"""The fast tier's guard (a pytest plugin, loaded by conftest.py). A test with none of SLOW_MARKERS is in the fast
tier (`make test-fast`: no kernel, no TensorFlow, no server, no browser, no Node.js); one that nonetheless starts
such a thing fails, and its message names the marker to add, or the folder to move it to.

What it watches, from just before the test's fixtures are set up to the end of its teardown:
- every subprocess.Popen (so subprocess.run, asyncio, jupyter_client and Playwright too): a Jupyter kernel, a
  Jupyter server or Hub, a browser or Playwright's driver, Node.js is refused before it starts;
- every Python child it starts imports tierguard_site/sitecustomize.py (on PYTHONPATH, after the test's own
  entries), which notes a real ``import tensorflow`` (not a mere lookup) in a file the test then reads;
- pytest-jupyter's server fixtures, the ``lab`` fixture, and ServerApp.initialize in this process.
TensorFlow in this process is refused for every test, slow or fast (conftest.py's _no_tensorflow_here)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The markers of the slow tier, each the name of its folder under tests/ (conftest.py marks the tests there).
SLOW_MARKERS = ("tf", "kernel", "server", "browser", "course", "gpu", "hub", "frontend")
FOLDERS = {
    "tf": "tests/tf", "kernel": "tests/kernel", "server": "tests/server", "browser": "tests/browser",
    "frontend": "tests/frontend",
}
LOG_ENV = "TFGPU_TEST_TIER_LOG"  # the file a child notes its TensorFlow import in (tierguard_site/sitecustomize.py)
SITE = str(Path(__file__).resolve().parent / "tierguard_site")
# Fixtures that start a server or a browser: refused before they run (a module's `lab` starts before any test).
FIXTURES = {"jp_configurable_serverapp": "server", "jp_serverapp": "server", "lab": "browser"}
SERVER_PROGRAMS = {"jupyter-lab", "jupyter-server", "jupyter-notebook", "jupyterhub", "jupyterhub-singleuser",
                   "configurable-http-proxy"}
SERVER_MODULES = {"jupyterlab", "jupyter_server", "notebook", "jupyterhub"}
JUPYTER_SERVER_COMMANDS = {"lab", "server", "notebook"}
KERNEL_MODULES = {"ipykernel_launcher", "ipykernel"}
JUPYTER_KERNEL_COMMANDS = {"kernel", "console", "execute"}  # and nbconvert, with --execute


def is_slow(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in SLOW_MARKERS)


def advice(marker: str) -> str:
    where = FOLDERS.get(marker)
    return (f"move it to {where}/ (the folder marks it) or mark it @pytest.mark.{marker}" if where
            else f"mark it @pytest.mark.{marker}")


def launch_marker(args) -> tuple[str, str] | None:
    """The marker a command needs, and what it starts; None for a command the fast tier may run."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    argv = [os.fsdecode(a) for a in argv]
    if len(argv) == 1 and " " in argv[0]:  # a shell line
        argv = argv[0].split()
    names = [os.path.basename(a) for a in argv]
    if any("playwright" in a for a in argv) or any(n.startswith(("chromium", "chrome", "google-chrome", "firefox"))
                                                   for n in names):
        return "browser", "a browser"
    modules = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-m"}
    if modules & KERNEL_MODULES or any(n in ("ipykernel_launcher.py", "ipykernel") for n in names):
        return "kernel", "a Jupyter kernel"
    for i, name in enumerate(names):
        following = names[i + 1] if i + 1 < len(names) else ""
        if name == "jupyter":  # the program, or `python -m jupyter`
            if following in JUPYTER_SERVER_COMMANDS:
                return "server", f"a Jupyter server (jupyter {following})"
            if following in JUPYTER_KERNEL_COMMANDS or (following == "nbconvert" and "--execute" in argv):
                return "kernel", f"a Jupyter kernel (jupyter {following})"
    if modules & SERVER_MODULES or any(n in SERVER_PROGRAMS for n in names):
        return "server", "a Jupyter server"
    if any(n in ("node", "nodejs", "npm", "npx", "jlpm") for n in names[:1]):
        return "frontend", "Node.js (the sidebar's compiled code needs its build)"
    return None


class _Guard:
    """One fast test's watch: installed before its setup, removed after its teardown."""

    def __init__(self, item: pytest.Item):
        self.item = item
        fd, self.log = tempfile.mkstemp(prefix="tfgpu-tier-", suffix=".log")
        os.close(fd)
        self.refused: list[str] = []
        self.read = 0
        self.original = subprocess.Popen.__init__
        self.original_initialize = None

    def install(self) -> None:
        guard, original = self, self.original

        def popen_init(popen, args, *rest, **kwargs):
            found = launch_marker(args)
            if found:
                marker, what = found
                message = (f"{guard.item.nodeid} is in the fast tier (no slow marker) but starts {what}: "
                           f"{args!r}; {advice(marker)}")
                guard.refused.append(message)
                pytest.fail(message, pytrace=False)
            env = kwargs.get("env")
            env = dict(os.environ if env is None else env)
            env[LOG_ENV] = guard.log
            env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), SITE) if p)
            kwargs["env"] = env
            return original(popen, args, *rest, **kwargs)

        subprocess.Popen.__init__ = popen_init
        serverapp = sys.modules.get("jupyter_server.serverapp")
        if serverapp is not None:  # loaded by pytest-jupyter's plugin; imported here never
            self.original_initialize = serverapp.ServerApp.initialize

            def initialize(app, *args, **kwargs):
                message = (f"{guard.item.nodeid} is in the fast tier (no slow marker) but starts a Jupyter server "
                           f"in this process (ServerApp.initialize); {advice('server')}")
                guard.refused.append(message)
                pytest.fail(message, pytrace=False)

            serverapp.ServerApp.initialize = initialize

    def remove(self) -> None:
        subprocess.Popen.__init__ = self.original
        if self.original_initialize is not None:
            sys.modules["jupyter_server.serverapp"].ServerApp.initialize = self.original_initialize
        os.unlink(self.log)

    def check(self) -> None:
        """Fail for what a child or a thread did since the last check (a refusal raised in this thread has
        failed the test already)."""
        refused, self.refused = self.refused, []
        with open(self.log, encoding="utf-8", errors="replace") as log:
            log.seek(self.read)
            imports = log.read()
            self.read = log.tell()
        if imports.strip():
            first = imports.strip().splitlines()[0]
            pytest.fail(f"{self.item.nodeid} is in the fast tier (no slow marker) but a process it started imported "
                        f"TensorFlow ({first}); {advice('tf')}", pytrace=False)
        if refused:
            pytest.fail(refused[0], pytrace=False)


_KEY = pytest.StashKey[_Guard]()


def _phase(item: pytest.Item):
    """One phase of a test (a hook wrapper's body): then what a child or a thread did in it fails the test."""
    guard = item.stash.get(_KEY, None)
    try:
        result = yield
    except BaseException:
        if guard is not None:
            guard.refused.clear()  # the phase failed already: a refusal in its thread is why
        raise
    if guard is not None:
        guard.check()
    return result


# trylast: the innermost wrapper, so pytest's own (capture, logging) are set up before a refusal.
@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item):
    if not is_slow(item):
        for fixture, marker in FIXTURES.items():
            if fixture in item.fixturenames:
                pytest.fail(f"{item.nodeid} is in the fast tier (no slow marker) but uses the fixture {fixture!r}, "
                            f"which starts {'a Jupyter server' if marker == 'server' else 'JupyterLab and a browser'}; "
                            f"{advice(marker)}", pytrace=False)
        item.stash[_KEY] = _Guard(item)
        item.stash[_KEY].install()
    return (yield from _phase(item))


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _phase(item))


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item):
    try:
        return (yield from _phase(item))
    finally:
        guard = item.stash.get(_KEY, None)
        if guard is not None:
            guard.remove()
            del item.stash[_KEY]
