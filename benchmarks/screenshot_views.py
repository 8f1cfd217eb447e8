"""Screenshots of what a notebook shows for `%tfgpu status` and `%tfgpu memory`, in JupyterLab's light and dark
themes: docs/status-light.png and docs/status-dark.png; with ``--case shared``, `%tfgpu devices` on a shared server
(docs/shared-light.png, docs/shared-dark.png): the fake NVML library's four GPUs, one of them in MIG mode with two
MIG devices, and a kernel started with ``CUDA_VISIBLE_DEVICES=1,MIG-5e8b0c1a`` as a scheduler would start it.

    python benchmarks/screenshot_views.py [--case status|shared] [--out docs] [--width 1100]

Needs jupyterlab, ipykernel, tensorflow-cpu and playwright in this Python (`pip install -e '.[lab,browser]'`)
and Chromium at /usr/bin/chromium (Debian: `apt-get install chromium`); Playwright's own browser download
(`playwright install`) is not used. Through tests/support/labsession.py it starts `jupyter lab` on 127.0.0.1 with a
free port, a token and temporary configuration, data, runtime, settings, workspace and IPython folders, opens a
new notebook, runs

    %load_ext tfgpu_magic / %tfgpu cpus 2 / %tfgpu growth on / import tensorflow as tf; x = tf.ones((2, 2))
    %tfgpu status / %tfgpu memory / a %%tfgpu device /CPU:7 cell (its fallback warning shows the alert colour)

then photographs the last four cells, switches to JupyterLab Dark through the Settings menu and photographs
them again. It prints the contrast of the warning's colour against the notebook's background, as the browser
computed them. The kernel gets the environment a user has: no PYTHONUNBUFFERED, no TF_CPP_MIN_LOG_LEVEL.
Takes about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The JupyterLab + Playwright harness lives with the tests, which use it too (tests/support/labsession.py).
sys.path.insert(0, str(ROOT / "tests" / "support"))
from labsession import (  # noqa: E402
    CELL,
    Lab,
    add_cell_below,
    browser_available,
    open_new_notebook,
    run_cell,
    set_theme,
)

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
SHARED_CELLS = ["%load_ext tfgpu_magic", "%tfgpu devices", "%tfgpu visible 0"]
SHARED_GIVEN = "1,MIG-5e8b0c1a"  # a GPU and a MIG device, by index and by a unique UUID prefix


def region(page, shown) -> dict[str, float]:
    """The rectangle around the photographed cells, inputs and outputs."""
    boxes = [page.locator(CELL).nth(k).bounding_box() for k in shown]
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


def shoot(page, path: Path, shown=SHOWN) -> None:
    page.wait_for_timeout(600)  # let the theme's fonts and colours settle
    page.mouse.move(0, 0)  # no hover highlight on a row
    page.screenshot(path=str(path), clip=region(page, shown))
    measured = page.evaluate(CONTRAST_JS)
    print(f"{path}: {path.stat().st_size // 1024} KiB; colours as rendered: {json.dumps(measured)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the two PNGs go (default: docs/)")
    parser.add_argument("--width", type=int, default=1100, help="browser window width in CSS pixels")
    parser.add_argument("--case", choices=("status", "shared"), default="status", help="which cells (default: status)")
    args = parser.parse_args()
    missing = browser_available()
    if missing:
        print(missing)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.case == "shared":
        return shared(args)
    with Lab() as lab, lab.browser_page(width=args.width, height=2200) as page:
        run_cells(page, CELLS)
        shoot(page, args.out / "status-light.png")

        set_theme(page, "JupyterLab Dark")
        shoot(page, args.out / "status-dark.png")
    return 0


def run_cells(page, cells) -> None:
    open_new_notebook(page)
    page.keyboard.press("Control+b")  # the file browser away: the notebook gets the width
    for index, source in enumerate(cells):
        if index:
            add_cell_below(page)
        # The refused `visible 0` raises: a UsageError is one red line, and the cell still counts as run.
        run_cell(page, index, source, count=index + 1)
    # The first cell active (outside the picture): no selection bar, no cell toolbar on the last one.
    page.locator(CELL).first.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")


def shared(args) -> int:
    import tempfile

    from fakenvml import build_fake_nvml, fake_env, mig_gpu, three_gpus, write_config

    with tempfile.TemporaryDirectory(prefix="tfgpu-shot-") as tmp:
        lib = build_fake_nvml(tmp)
        config = three_gpus()
        config["gpus"].append(mig_gpu())
        path = write_config(Path(tmp) / "fake_nvml.cfg", config)
        env = {**fake_env(lib.parent, path, base={}), "CUDA_VISIBLE_DEVICES": SHARED_GIVEN}
        with Lab(extra_env=env) as lab, lab.browser_page(width=args.width, height=1600) as page:
            run_cells(page, SHARED_CELLS)
            shown = range(1, len(SHARED_CELLS))
            shoot(page, args.out / "shared-light.png", shown)
            set_theme(page, "JupyterLab Dark")
            shoot(page, args.out / "shared-dark.png", shown)
    return 0

if __name__ == "__main__":
    sys.exit(main())
