"""Screenshots of what a notebook shows for `%tfgpu status` and `%tfgpu memory`, in JupyterLab's light and dark
themes: docs/status-light.png and docs/status-dark.png.

    python benchmarks/screenshot_views.py [--out docs] [--width 1100]

Needs jupyterlab, ipykernel, tensorflow-cpu and playwright in this Python (`pip install -e '.[lab,browser]'`)
and Chromium at /usr/bin/chromium (Debian: `apt-get install chromium`); Playwright's own browser download
(`playwright install`) is not used. It starts `jupyter lab` on 127.0.0.1 with a free port, a token and
temporary configuration, data, runtime, settings, workspace and IPython folders, opens a new notebook, runs

    %load_ext tfgpu_magic / %tfgpu cpus 2 / %tfgpu growth on / import tensorflow as tf; x = tf.ones((2, 2))
    %tfgpu status / %tfgpu memory / a %%tfgpu device /CPU:7 cell (its fallback warning shows the alert colour)

then photographs the last four cells, switches to JupyterLab Dark through the Settings menu and photographs
them again. It prints the contrast of the warning's colour against the notebook's background, as the browser
computed them. The kernel gets the environment a user has: no PYTHONUNBUFFERED, no TF_CPP_MIN_LOG_LEVEL.
Takes about a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CELLS = [
    "%load_ext tfgpu_magic",
    "%tfgpu cpus 2",
    "%tfgpu growth on",
    "import tensorflow as tf; x = tf.ones((2, 2))",
    "%tfgpu status",
    "%tfgpu memory",
    "%%tfgpu device /CPU:7\ny = tf.matmul(x, x)",
]
SHOWN = range(3, len(CELLS))  # photographed: the import (its tfgpu line and log block), status, memory, a fallback
NOTEBOOK = ".jp-NotebookPanel"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(settings: Path) -> None:
    # No "get notified about Jupyter news?" toast over the cells.
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))


def start_lab(tmp: Path, port: int, token: str) -> subprocess.Popen:
    dirs = {name: tmp / name for name in ("config", "data", "runtime", "ipython", "settings", "workspaces", "root")}
    for path in dirs.values():
        path.mkdir()
    write_settings(dirs["settings"])
    # A user's environment: TensorFlow's start-up chatter is not silenced, output is not unbuffered.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL",
                                                             "PYTEST_CURRENT_TEST", "CUDA_VISIBLE_DEVICES")}
    env.update(JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), IPYTHONDIR=str(dirs["ipython"]),
               JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]), JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={dirs['root']}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(tmp / "lab.log", "wb")  # noqa: SIM115 - the server writes it until it stops
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_for_lab(port: int, token: str, server: subprocess.Popen, tmp: Path, timeout: float = 90) -> None:
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"jupyter lab exited ({server.returncode}):\n{(tmp / 'lab.log').read_text()[-3000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.3)
    raise SystemExit(f"jupyter lab did not answer within {timeout:.0f} s:\n{(tmp / 'lab.log').read_text()[-3000:]}")


def run_cell(page, index: int, source: str) -> None:
    """Type ``source`` into cell ``index`` and run it until its prompt shows its execution count."""
    from playwright.sync_api import expect

    cell = page.locator(f"{NOTEBOOK} .jp-Cell").nth(index)
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.insert_text(source)
    prompt = cell.locator(".jp-InputPrompt")
    # JupyterLab sometimes drops the first run request right after the kernel turns idle (LAB_FACTS 10):
    # run again until the prompt shows the count.
    for attempt in range(3):
        editor.click()
        page.keyboard.press("Control+Enter")
        try:
            expect(prompt).not_to_have_text(re.compile(r"^\[ ?\]:$"), timeout=8000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    expect(prompt).to_have_text(f"[{index + 1}]:", timeout=180_000)  # import tensorflow takes a while


def new_cell_below(page) -> None:
    page.keyboard.press("Escape")
    page.keyboard.press("b")


def region(page) -> dict[str, float]:
    """The rectangle around the photographed cells, inputs and outputs."""
    boxes = [page.locator(f"{NOTEBOOK} .jp-Cell").nth(k).bounding_box() for k in SHOWN]
    top = min(b["y"] for b in boxes)
    bottom = max(b["y"] + b["height"] for b in boxes)
    left = min(b["x"] for b in boxes)
    right = max(b["x"] + b["width"] for b in boxes)
    return {"x": left, "y": top - 4, "width": right - left, "height": bottom - top + 12}


CONTRAST_JS = """() => {
  const parse = (c) => c.match(/[\\d.]+/g).map(Number);
  const over = (c, bg) => c.length > 3 ? c.slice(0, 3).map((v, k) => c[3] * v + (1 - c[3]) * bg[k]) : c;
  const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255;
    return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const bg = parse(getComputedStyle(document.querySelector('.jp-Notebook')).backgroundColor);
  const out = {background: bg};
  const alert = document.querySelector('.tfgpu-placement p[style*="error-color1"]');
  if (alert) { out.alert = over(parse(getComputedStyle(alert).color), bg); out.alert_ratio = ratio(out.alert, bg); }
  const text = document.querySelector('.tfgpu-status td');
  if (text) { out.text = over(parse(getComputedStyle(text).color), bg); out.text_ratio = ratio(out.text, bg); }
  return out;
}"""


def shoot(page, path: Path) -> None:
    page.wait_for_timeout(600)  # let the theme's fonts and colours settle
    page.mouse.move(0, 0)  # no hover highlight on a row
    page.screenshot(path=str(path), clip=region(page))
    measured = page.evaluate(CONTRAST_JS)
    print(f"{path}: {path.stat().st_size // 1024} KiB; colours as rendered: {json.dumps(measured)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the two PNGs go (default: docs/)")
    parser.add_argument("--width", type=int, default=1100, help="browser window width in CSS pixels")
    args = parser.parse_args()
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        print("needs playwright: pip install -e '.[browser]' (no `playwright install`: Debian's chromium is used)")
        return 2
    if not Path(CHROMIUM).exists():
        print(f"needs Chromium at {CHROMIUM}: apt-get install chromium")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tfgpu-screenshot-"))
    port, token = free_port(), secrets.token_hex(16)
    server = start_lab(tmp, port, token)
    try:
        wait_for_lab(port, token, server, tmp)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": args.width, "height": 2200}, device_scale_factor=1)
            page.goto(f"http://127.0.0.1:{port}/lab?reset&token={token}")
            page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=60_000)
            page.locator(NOTEBOOK).wait_for(timeout=30_000)
            expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_visible(timeout=60_000)
            page.keyboard.press("Control+b")  # the file browser away: the notebook gets the width
            for index, source in enumerate(CELLS):
                if index:
                    new_cell_below(page)
                run_cell(page, index, source)
            # The first cell active (outside the picture): no selection bar, no cell toolbar on the last one.
            page.locator(f"{NOTEBOOK} .jp-Cell").first.locator(".jp-InputPrompt").click()
            page.keyboard.press("Escape")
            shoot(page, args.out / "status-light.png")

            page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
            page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
            page.locator(".lm-Menu-itemLabel", has_text="JupyterLab Dark").first.click()
            expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false", timeout=30_000)
            shoot(page, args.out / "status-dark.png")
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
