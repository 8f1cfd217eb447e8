"""A real JupyterLab in a real browser, for tests and benchmarks/screenshot_views.py (no tests in here).

    from labsession import Lab, open_new_notebook, run_cell, cell_output

    with Lab(extra_env={"FAKE_NVML_CONFIG": ...}) as lab, lab.browser_page() as page:
        open_new_notebook(page)
        run_cell(page, 0, "%load_ext tfgpu_magic")
        add_cell_below(page)
        run_cell(page, 1, "%tfgpu status")
        expect(cell_output(page, 1)).to_contain_text("TensorFlow")

Needs jupyterlab and playwright in this Python and Chromium at /usr/bin/chromium (Debian: `apt-get install
chromium`); Playwright's own browser download (`playwright install`) is never used.

The rule for browser tests: call ``require_browser()`` first (or use ``browser_available()`` yourself). Where
something is missing it skips the test, except with CI=true, where it fails it: CI must run these tests, and a
skip there would hide that it no longer does.

The page helpers assume one notebook open in the page (the one ``open_new_notebook`` made) and one
``browser_page`` at a time per thread (Playwright's sync API cannot nest).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
CHROMIUM = "/usr/bin/chromium"
# No sandbox: CI runs as root, where Chromium's sandbox refuses to start. No GPU, no background requests:
# machines without a display or network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
NOTEBOOK = ".jp-NotebookPanel"
CELL = f"{NOTEBOOK} .jp-Cell"
# Removed from the server's (so the kernels') environment: a user's kernel has neither, and
# PYTHONUNBUFFERED hides the C-level buffering bugs users hit. The others would leak the test runner's state.
_NOT_A_USERS_ENV = ("PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL", "PYTEST_CURRENT_TEST", "CUDA_VISIBLE_DEVICES")


def browser_available() -> str | None:
    """Why a browser test cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs playwright: pip install -e '.[test]' (no `playwright install`: Debian's chromium is used)"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "needs jupyterlab: pip install -e '.[lab]'"
    if not Path(CHROMIUM).exists():
        return f"needs Chromium at {CHROMIUM}: apt-get install chromium"
    return None


def require_browser() -> None:
    """Skip the calling test when browser_available() says why not; with CI=true fail it instead."""
    import pytest  # here, not at the top: the screenshot script imports this module without pytest

    reason = browser_available()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so browser tests must run: {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    # Other servers (other engineers' tests) may run on this machine: never a fixed port.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(settings: Path, language: str | None = None) -> None:
    # No "get notified about Jupyter news?" toast over the cells (and no request for it).
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    if language:
        # As a user's Settings > Language menu leaves it (the language pack must be installed: zh_CN's is in the
        # test extra, jupyterlab-language-pack-zh-CN).
        chosen = settings / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
        chosen.parent.mkdir(parents=True, exist_ok=True)
        chosen.write_text(json.dumps({"locale": language}))


class Lab:
    """``jupyter lab`` on 127.0.0.1, a free port and a random token, with its own temporary configuration, data,
    runtime, IPython, settings, workspace and root folders (nothing of ~/.jupyter is read or written).

    ``extra_env`` is merged last into the server's environment, which its kernels inherit; pass only the
    variables to add (e.g. ``fakenvml.fake_env(lib_dir, config, base={})``), not a copy of os.environ.
    Nothing of the checkout is on PYTHONPATH and the root folder is a fresh one: the server and its kernels
    import tfgpu_magic as installed users have it (here: the venv's install of this checkout).
    """

    def __init__(self, extra_env: dict[str, str] | None = None, *, start_timeout: float = 90,
                 extra_args: list[str] | None = None, base_url: str = "/", prefix: list[str] | None = None,
                 language: str | None = None) -> None:
        self.extra_env = dict(extra_env or {})
        self.language = language  # JupyterLab's display language ("zh_CN"), as its settings hold it; None: English
        # A command the server runs under, e.g. `unshare --pid --fork --mount-proc` (a PID namespace of its own, as a
        # container gives). ``server`` is then that command's process, and the server is stopped through its
        # process group: unshare blocks SIGTERM rather than pass it on.
        self.prefix = list(prefix or [])
        self.base_url = "/" + base_url.strip("/") + "/" if base_url.strip("/") else "/"  # behind a path prefix
        self.extra_args = list(extra_args or [])  # more `jupyter lab` options, e.g. --TfgpuServer.snapshot_max_age=0
        self.start_timeout = start_timeout
        self.port = 0
        self.token = secrets.token_hex(16)
        self.tmp: Path | None = None
        self.root: Path | None = None  # the server's root folder: notebooks put here show in the file browser
        self.server: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The server's root, its base URL included (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}{self.base_url.rstrip('/')}"

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="tfgpu-lab-"))
        dirs = {name: self.tmp / name for name in ("config", "data", "runtime", "ipython", "settings", "workspaces",
                                                   "root")}
        for path in dirs.values():
            path.mkdir()
        self.root = dirs["root"]
        write_settings(dirs["settings"], self.language)
        env = {k: v for k, v in os.environ.items() if k not in _NOT_A_USERS_ENV}
        env.update(JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
                   JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), IPYTHONDIR=str(dirs["ipython"]),
                   JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]), JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]))
        env.pop("PYTHONPATH", None)
        env.update(self.extra_env)
        self.port = free_port()
        command = [*self.prefix, sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                   f"--ServerApp.port={self.port}", f"--IdentityProvider.token={self.token}",
                   f"--ServerApp.root_dir={self.root}", f"--ServerApp.base_url={self.base_url}", *self.extra_args]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # CI and containers run as root; Jupyter refuses without it
        with open(self.tmp / "lab.log", "wb") as log:  # the child keeps its own copy of the descriptor
            self.server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=bool(self.prefix))
        try:
            self._wait_until_up()
        except BaseException:
            self.stop()
            raise

    def _wait_until_up(self) -> None:
        status = f"{self.url}/api/status?token={self.token}"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.server.returncode}):\n{self.log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(status, timeout=2) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"jupyter lab did not answer within {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        # SIGTERM: the server shuts down cleanly and shuts down its kernels; kill only if it hangs.
        if self.server is not None and self.server.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.server.wait()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def _signal(self, number: int) -> None:
        if self.prefix:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.server.pid, number)
        else:
            self.server.send_signal(number)

    def api(self, method: str, path: str, body: dict | None = None):
        """One authenticated request to the server's REST API (``/api/sessions``, ``/tfgpu/api/gpus`` ...): its JSON."""
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read() or b"null")

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's log (kernel tracebacks land here too), for failure messages."""
        with contextlib.suppress(OSError, TypeError):
            return (self.tmp / "lab.log").read_text(errors="replace")[-chars:]
        return "(no server log)"

    @contextlib.contextmanager
    def browser_page(self, width: int = 1280, height: int = 900, device_scale_factor: float = 1) -> Iterator:
        """Headless Chromium on ``/lab?reset`` (no restored layout) of this server; yields the Playwright page."""
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": width, "height": height},
                                        device_scale_factor=device_scale_factor)
                page.goto(f"{self.url}/lab?reset&token={self.token}")
                yield page
            finally:
                browser.close()


@contextlib.contextmanager
def watched_page(lab: Lab, width: int = 1400, height: int = 1000) -> Iterator:
    """``lab.browser_page``, failing the test if the page raised an error that names tfgpu, and printing the server
    log's tail when done (pytest shows it with a failure)."""
    with lab.browser_page(width=width, height=height) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page
        assert not [e for e in errors if "tfgpu" in e.lower()], errors
    print(f"--- jupyter lab log (tail) ---\n{lab.log_tail()}")


def open_new_notebook(page, timeout: float = 60_000) -> None:
    """A new Python notebook from the launcher, once its kernel is idle."""
    from playwright.sync_api import expect

    page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=timeout)
    page.locator(NOTEBOOK).wait_for(timeout=timeout)
    # initializing → connecting → idle, about 2 s
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible(timeout=timeout)


PYTHON3 = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def write_notebook(path: Path, *, metadata: dict | None = None, kernelspec: dict | None = None,
                   source: str = "") -> Path:
    """A notebook with one code cell (empty, or ``source``) and a kernelspec, as a saved notebook has: opening it
    starts its kernel without asking which. ``metadata`` is added to the notebook's metadata. Not signed: JupyterLab
    does not trust it (see ``sign_notebook``)."""
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": kernelspec or PYTHON3, **(metadata or {})})
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, path)
    return path


def saved_metadata(settings: dict) -> dict:
    """A notebook's metadata with these saved settings, applied at each kernel start."""
    return {"tfgpu": {"version": 1, "apply_on_start": True, "settings": settings}}


def agree_to(lab: Lab, name: str, settings: dict) -> None:
    """Record on ``lab``'s server that the user agrees to these saved settings of the notebook ``name`` (relative to
    its root), as the sidebar's "Apply saved settings" and Check & save do: they then apply without asking."""
    answer = lab.api("POST", "/tfgpu/api/consent", {"path": name, "settings": settings, "agree": True})
    assert answer == {"agreed": True}, answer


def write_saved(lab: Lab, name: str, settings: dict, **kwargs) -> Path:
    """A notebook the user saved here with these settings through the sidebar (and a code cell): signed, as a save
    leaves it, and agreed to on the server, so they apply without asking."""
    path = sign_notebook(lab, write_notebook(lab.root / name, metadata=saved_metadata(settings),
                                             source="print('hello')", **kwargs))
    agree_to(lab, name, settings)
    return path


def open_notebook(page, name: str, timeout: float = 60_000, *, wait_idle: bool = True) -> None:
    """Open ``name`` from the File Browser, as a user does, and (``wait_idle``) wait until its kernel is idle."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    tab = page.locator('.jp-SideBar [data-id="filebrowser"]')
    expect(tab).to_be_visible(timeout=timeout)  # the app has laid itself out
    item = page.locator(".jp-DirListing-item", has_text=name).first
    try:
        item.wait_for(state="visible", timeout=3000)  # the File Browser is open (as it is at first)
    except PlaywrightTimeout:
        tab.click()  # its tab toggles: clicked while open, it would close it
    item.dblclick()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name)).to_be_visible(
        timeout=timeout)
    if wait_idle:
        expect(page.locator(f"{NOTEBOOK} .jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible(
            timeout=timeout)


def close_notebook(page, name: str) -> None:
    """Close the tab of ``name`` without saving (JupyterLab may have marked it changed); its kernel keeps running,
    as it does in JupyterLab by default."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name)
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    with contextlib.suppress(PlaywrightTimeout):  # no dialog: nothing to save, closed at once
        page.locator(".jp-Dialog button", has_text="Discard").click(timeout=3000)
    expect(tab).to_have_count(0)


def start_cell(page, index: int, source: str) -> None:
    """Replace the text of cell ``index`` with ``source`` and run it, without waiting for it to finish: returns
    once the kernel took it (the prompt changed, to ``[*]:`` while it runs). For checks made while a cell runs."""
    from playwright.sync_api import expect

    cell = page.locator(CELL).nth(index)
    editor = cell.locator(".cm-content")
    prompt = cell.locator(".jp-InputPrompt")
    _click_unless_a_dialog(page, editor)
    page.keyboard.press("Control+a")  # a cell run before keeps its text: replace it
    page.keyboard.insert_text(source)
    before = prompt.inner_text().strip()
    # JupyterLab sometimes silently drops the first run request right after the kernel turns idle (LAB_FACTS 10):
    # the prompt then stays as it was. Run again until it changes ([*]: when sent, [n]: when done).
    for attempt in range(3):
        editor.click()
        page.keyboard.press("Control+Enter")
        try:
            expect(prompt).not_to_have_text(before, timeout=8000)
            return
        except AssertionError:
            if attempt == 2:
                raise


def _click_unless_a_dialog(page, editor) -> None:
    """Click a cell's editor; where a dialog covers it, fail naming that dialog (Playwright's timeout says only that
    one intercepts the click): CI once met an unknown dialog over a notebook just opened."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        editor.click()
    except PlaywrightTimeout:
        dialogs = page.locator(".jp-Dialog")
        if dialogs.count():
            raise AssertionError(f"a dialog covers the cell: {dialogs.first.inner_text(timeout=2000)!r}") from None
        raise


def run_cell(page, index: int, source: str, *, count: int | None = None, timeout: float = 180) -> int:
    """Replace the text of cell ``index`` with ``source``, run it and wait until it finished; returns its execution
    count. With ``count`` the prompt must show exactly ``[count]:``. ``timeout`` in seconds (import tensorflow
    takes a while on a loaded machine)."""
    from playwright.sync_api import expect

    start_cell(page, index, source)
    prompt = page.locator(CELL).nth(index).locator(".jp-InputPrompt")
    done = re.compile(rf"^\[{count}\]:$" if count is not None else r"^\[\d+\]:$")
    expect(prompt).to_have_text(done, timeout=timeout * 1000)
    return int(prompt.inner_text().strip()[1:-2])


def add_cell_below(page) -> None:
    """A new empty code cell below the active one (command mode, then ``b``)."""
    from playwright.sync_api import expect

    cells = page.locator(CELL)
    before = cells.count()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    expect(cells).to_have_count(before + 1)


def cell_output(page, index: int):
    """The output area of cell ``index`` (a Locator)."""
    return page.locator(CELL).nth(index).locator(".jp-OutputArea")


def keep_screenshot(shot: Path) -> Path:
    """Copy a screenshot to $TFGPU_SCREENSHOTS when that names a folder (never into the repository otherwise)."""
    folder = os.environ.get("TFGPU_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(folder) / shot.name)
    return shot


def again_if_replaced(action):
    """``action()``, done again (up to three times in all) where its element was replaced while Playwright acted on
    it. The sidebar renders each answer as new nodes (focus and hover moved onto them), and a screenshot or a scroll,
    unlike a click, does not wait for the new node: the locator finds it when asked again."""
    from playwright.sync_api import Error

    for attempts_left in (2, 1, 0):
        try:
            return action()
        except Error as error:
            if "not attached to the DOM" not in str(error) or not attempts_left:
                raise


def element_screenshot(locator, path) -> bytes:
    """``locator``'s picture, saved at ``path`` (taken again from a replaced node: again_if_replaced)."""
    return again_if_replaced(lambda: locator.screenshot(path=str(path)))


def scroll_into_view(locator) -> None:
    """``locator`` scrolled into view (again on a replaced node: again_if_replaced)."""
    again_if_replaced(locator.scroll_into_view_if_needed)


def set_theme(page, name: str) -> None:
    """Switch to ``name`` ("JupyterLab Light", "JupyterLab Dark") through the Settings menu, as a user does."""
    from playwright.sync_api import expect

    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text=name).first.click()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", name, timeout=30_000)
    # JupyterLab covers the page with its splash while the theme loads: a screenshot must wait for it to go.
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=30_000)


def shoot_in_both_themes(page, folder: Path, name: str, check) -> None:
    """``name``-dark.png and ``name``-light.png of the page, each after ``check()`` held in that theme (kept with
    keep_screenshot); the mouse is moved off the page so no hover shows."""
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        check()
        page.mouse.move(0, 0)
        shot = folder / f"{name}-{theme.split()[-1].lower()}.png"
        page.screenshot(path=str(shot))
        keep_screenshot(shot)


# -- a notebook's kernel seen from outside, and code shipped beside a notebook: tests/browser/test_browser_trust.py ---
SHADOW_CODE = "open({marker!r}, 'a').write(__name__ + '\\n')\n"


def plant_shadow(folder: Path) -> Path:
    """A ``tfgpu_magic/`` package in ``folder`` (beside a notebook: its kernel's working directory, first on its
    sys.path) whose every module, imported, appends its name to a marker file; returns the marker's path, which
    must never exist. Its ``apply`` answers as the real one does, so a test that imports it fails on the marker."""
    marker = folder / "SHADOW-RAN"
    for module in ("__init__.py", "ipython/__init__.py", "ipython/apply.py"):
        path = folder / "tfgpu_magic" / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SHADOW_CODE.format(marker=str(marker)) + (
            "def apply_json(text):\n    return {}\n"
            "def last_result():\n    return {'ok': True, 'message': None, 'outcomes': [], 'placement': None}\n"
            if module.endswith("apply.py") else ""))
    return marker


def _notary(lab: Lab):
    from nbformat.sign import NotebookNotary

    return NotebookNotary(data_dir=str(lab.tmp / "data"))  # the server's JUPYTER_DATA_DIR: its notary database


def sign_notebook(lab: Lab, path: Path) -> Path:
    """Sign the notebook at ``path`` as `jupyter trust` does, in ``lab``'s notary database: JupyterLab then trusts
    its code cells, as it does a notebook the user saved there. Trust is not consent: the sidebar still asks before
    it applies saved settings the user has not agreed to (``agree_to``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    _notary(lab).sign(nb)
    return path


def notebook_signed(lab: Lab, path: Path) -> bool:
    """Whether ``lab``'s notary database has the notebook at ``path``, as it is on disk, signed."""
    import nbformat

    return _notary(lab).check_signature(nbformat.read(path, as_version=4))


def restart_kernel(page) -> None:
    """Kernel > Restart Kernel…, confirmed."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…$|^Restart Kernel\.\.\.$")).first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()


def kernel_pid(lab: Lab, notebook: str, timeout: float = 60) -> int:
    """The PID of the kernel behind ``notebook``, as the GPU endpoint knows it (a starting kernel has none yet)."""
    deadline = time.monotonic() + timeout
    kernels = []
    while time.monotonic() < deadline:
        kernels = lab.api("GET", "/tfgpu/api/gpus")["kernels"]
        for kernel in kernels:
            if kernel["pid"] and any(s["path"] == notebook for s in kernel["sessions"]):
                return kernel["pid"]
        time.sleep(0.3)
    raise AssertionError(f"no kernel with a PID for {notebook}: {kernels}")


def kernel_id(lab: Lab, path: str) -> str:
    """The id of the kernel of the notebook at ``path`` (relative to the server's root)."""
    sessions = [s for s in lab.api("GET", "/api/sessions") if s["path"] == path]
    assert sessions, f"no session for {path}: {lab.api('GET', '/api/sessions')}"
    return sessions[0]["kernel"]["id"]


def kernel_expression(lab: Lab, path: str, expression: str, timeout: float = 60) -> str:
    """Evaluate ``expression`` in the kernel of the notebook at ``path`` through a second client, silently: no
    execution count, no history, nothing the notebook shows, so the kernel is left as a user's first cell finds
    it. Returns the value's text/plain."""
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=str(lab.tmp / "runtime" / f"kernel-{kernel_id(lab, path)}.json"))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=timeout)
        msg_id = client.execute("", silent=True, store_history=False, user_expressions={"value": expression})
        deadline = time.monotonic() + timeout
        while True:
            reply = client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        value = reply["content"]["user_expressions"]["value"]
        assert value["status"] == "ok", value
        return value["data"]["text/plain"]
    finally:
        client.stop_channels()


def shut_down_kernel(lab: Lab, path: str) -> None:
    """Shut down the session of the notebook at ``path`` (as the Running panel does): its next opening starts a
    new kernel."""
    sessions = [s for s in lab.api("GET", "/api/sessions") if s["path"] == path]
    for session in sessions:
        lab.api("DELETE", f"/api/sessions/{session['id']}")


# -- the live panel (%tfgpu panel): tests/browser/test_browser_panel.py and benchmarks/screenshot_panel.py -------
PANEL_CELLS = (
    "%load_ext tfgpu_magic",
    "%tfgpu cpumem on",  # TensorFlow's CPU allocator keeps figures: a memory figure without a GPU
    "%tfgpu cpus 2",
    "import tensorflow as tf\nsmall = tf.constant([1.0])",
    "%config TfgpuMagics.refresh_interval = 0.25",
    "%tfgpu panel",
)
PANEL_CELL = len(PANEL_CELLS) - 1  # the index of the panel's cell
# 4096 x 4096 float32: 64 MiB held by `big` while the cell sleeps (and for as long as the kernel keeps it).
BIG_TENSOR_CELL = 'import time\nbig = tf.ones((4096, 4096)) + 1.0\ntime.sleep(6)\nprint("done")'
BIG_TENSOR_MIB = 64
IN_USE = re.compile(r"in use ([\d,.]+) (MiB|GiB)")


def show_panel(page, timeout: float = 60_000):
    """Run PANEL_CELLS in a new notebook (one cell each) and return the panel (a Locator on ``.tfgpu-panel`` in
    the last cell's output) once it is visible."""
    from playwright.sync_api import expect

    open_new_notebook(page)
    for index, source in enumerate(PANEL_CELLS):
        if index:
            add_cell_below(page)
        run_cell(page, index, source, count=index + 1)
    panel = cell_output(page, PANEL_CELL).locator(".tfgpu-panel")
    expect(panel).to_be_visible(timeout=timeout)
    return panel


def panel_tab(panel, name: str) -> None:
    """Click the panel's tab ``name`` ("Memory", "Devices", ...) and wait until it is the current one."""
    from playwright.sync_api import expect

    tab = panel.locator(".lm-TabBar-tab", has_text=name)
    tab.click()
    expect(tab).to_have_class(re.compile(r"\blm-mod-current\b"))


def in_use_mib(text: str) -> float | None:
    """The first "in use X MiB" (or GiB) figure of the panel's text, in MiB; None when there is none."""
    match = IN_USE.search(text)
    if match is None:
        return None
    value = float(match.group(1).replace(",", ""))
    return value * 1024 if match.group(2) == "GiB" else value


def start_big_tensor(page) -> int:
    """A new cell below the last one, started with BIG_TENSOR_CELL (not waited for); returns its index."""
    add_cell_below(page)
    index = page.locator(CELL).count() - 1
    start_cell(page, index, BIG_TENSOR_CELL)
    return index


def shoot_panel(page, path: Path) -> Path:
    """A picture of the panel cell's output area at ``path`` (folders made as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)  # no hover highlight
    page.wait_for_timeout(600)  # let a theme's fonts and colours settle
    element_screenshot(cell_output(page, PANEL_CELL), path)
    return path


# -- the sidebar ---------------------------------------------------------------------------------------------------
SIDEBAR = "#tfgpu-sidebar"
SIDEBAR_TAB = '.jp-SideBar [data-id="tfgpu-sidebar"]'


def sidebar(page):
    """The GPUs sidebar, opened by its tab when it is not shown."""
    from playwright.sync_api import expect

    if not page.locator(SIDEBAR).is_visible():
        page.locator(SIDEBAR_TAB).click()
    bar = page.locator(SIDEBAR)
    expect(bar).to_be_visible()
    return bar


def apply_status(page):
    """The sidebar's line on the last apply of the front notebook's saved settings."""
    return page.locator(f"{SIDEBAR} .tfgpu-apply-status")


def consent_box(page):
    """The sidebar's question about saved settings the user has not agreed to (with its Apply saved settings)."""
    return page.locator(f"{SIDEBAR} .tfgpu-consent")


def open_workspace(lab: Lab, page, workspace: str | None) -> None:
    """Load JupyterLab afresh in ``page``: the workspace ``workspace`` (None: the default one), reset (no layout,
    nothing the sidebar kept in the workspace)."""
    where = f"/lab/workspaces/{workspace}" if workspace else "/lab"
    page.goto(f"{lab.url}{where}?reset")


def set_page_visible(page, visible: bool) -> None:
    """The browser tab hidden or shown, as the page sees it: ``document.hidden`` and ``visibilityState`` read so and a
    ``visibilitychange`` is dispatched, as a background tab reports it. Headless Chromium has no tab to hide
    (minimising its window or a tab in front leaves every page "visible"), so every poller (JupyterLab's, tfgpu's)
    reads this as it reads a real hidden tab."""
    page.evaluate(
        """visible => {
            const state = visible ? 'visible' : 'hidden';
            Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
            Object.defineProperty(document, 'hidden', {configurable: true, get: () => !visible});
            document.dispatchEvent(new Event('visibilitychange'));
        }""",
        visible,
    )


def open_sidebar(page):
    """The GPUs sidebar, opened by its tab once the app has laid itself out (right after a page load a click can
    land before the shell restores its layout, which then closes the sidebar again)."""
    from playwright.sync_api import expect

    # Its title is set once the app is up: "GPUs", "GPU" in Chinese.
    expect(page.locator(SIDEBAR_TAB)).to_have_attribute("title", re.compile("GPU"), timeout=60_000)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=60_000)
    sidebar = page.locator(SIDEBAR)
    for attempt in range(3):
        if not sidebar.is_visible():
            page.locator(SIDEBAR_TAB).click()
        try:
            expect(sidebar).to_be_visible(timeout=5_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    return sidebar
