"""Screenshots of the live panel (`%tfgpu panel`) in JupyterLab's light and dark themes, for docs/reference.md:
docs/panel-light.png and docs/panel-dark.png (the Memory tab, with its charts), docs/panel-devices-light.png (the
Devices tab), and docs/panel-settings-light.png and docs/panel-settings-dark.png (the Settings tab after TensorFlow
started and `%tfgpu cpus 3` was refused as too late).

    python benchmarks/screenshot_panel.py [--out docs] [--width 1100] [--scale 1] [--mig]

With ``--mig`` the fake gets a fourth GPU, an A100 in MIG mode with two MIG devices, and the kernel starts with
``CUDA_VISIBLE_DEVICES=1,MIG-5e8b0c1a`` (a scheduler's choice): the Memory tab then shows the MIG devices under their
GPU and marks the GPUs not given; docs/panel-mig-light.png and docs/panel-mig-dark.png.

Needs jupyterlab, ipykernel, ipywidgets, tensorflow-cpu and playwright in this Python (`pip install -e
'.[lab,browser]'`), Chromium at /usr/bin/chromium (Debian: `apt-get install chromium`; Playwright's own browser
download is not used) and gcc, for the fake NVML library that gives the kernel three GPUs (tests/support/fakenvml: an
A100 nearly full, an H100 this kernel holds memory on, an idle T4). The steps are the browser test's
(tests/browser/test_browser_panel.py, through tests/support/labsession.py): a new notebook runs

    %load_ext tfgpu_magic / %tfgpu cpumem on / %tfgpu cpus 2 / import tensorflow as tf; small = tf.constant([1.0])
    %config TfgpuMagics.refresh_interval = 0.25 / %tfgpu panel

then a cell that makes a 64 MiB tensor and sleeps 6 s, so the chart has something to show; once it is done the
panel's output is photographed, then its Devices tab; a cell runs `%tfgpu cpus 3` (refused: the runtime has
started) and the Settings tab is photographed; then the Settings and Memory tabs again in JupyterLab Dark. It prints
the contrast of the panel's text, chart labels and chart lines against the background, as the browser computed
them. Takes about 50 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The JupyterLab + Playwright harness and the fake NVML live with the tests, which use them too.
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakenvml import FakeNvmlUnavailable, build_fake_nvml, fake_env, mig_gpu, three_gpus, write_config  # noqa: E402
from labsession import (  # noqa: E402
    CELL,
    Lab,
    add_cell_below,
    browser_available,
    cell_output,
    panel_tab,
    run_cell,
    set_theme,
    shoot_panel,
    show_panel,
    start_big_tensor,
)

# Colours as rendered, each over the panel's background: body text, the muted note, the chart's axis labels and
# legend, and every chart line (WCAG contrast ratio; 3 is the least for lines and large text, 4.5 for text).
CONTRAST_JS = """(panel) => {
  const parse = (c) => c.match(/[\\d.]+/g).map(Number);
  const over = (c, bg) => c.length > 3 ? c.slice(0, 3).map((v, k) => c[3] * v + (1 - c[3]) * bg[k]) : c;
  const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255;
    return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return Math.round(100 * (x + 0.05) / (y + 0.05)) / 100; };
  let node = panel, bg = [0, 0, 0, 0];
  while (node) { bg = parse(getComputedStyle(node).backgroundColor); if (bg.length < 4 || bg[3] > 0) break;
    node = node.parentElement; }
  const out = {background: bg.slice(0, 3)};
  const measure = (name, el, prop) => {
    if (el) out[name] = ratio(over(parse(getComputedStyle(el)[prop]), bg), bg); };
  measure('text', panel.querySelector('.tfgpu-panel-memory p'), 'color');
  measure('muted note', panel.querySelector('.tfgpu-panel-memory p[style*="font-color2"]'), 'color');
  measure('chart labels', panel.querySelector('.tfgpu-panel-chart svg text'), 'fill');
  measure('legend', panel.querySelector('.tfgpu-panel-chart svg + div'), 'color');
  // Every chart (GPU memory, allocators, utilization), each line and each reserved share's edge by its name.
  panel.querySelectorAll('.tfgpu-panel-chart svg').forEach((svg) => {
    svg.querySelectorAll('path.tfgpu-series-line, path.tfgpu-series-edge').forEach((line) => {
      measure('line: ' + line.getAttribute('aria-label'), line, 'stroke'); }); });
  return out;
}"""


def shoot(page, panel, path: Path) -> None:
    shoot_panel(page, path)
    measured = panel.evaluate(CONTRAST_JS)
    print(f"{path}: {path.stat().st_size // 1024} KiB; contrast as rendered: {json.dumps(measured)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go (default: docs/)")
    parser.add_argument("--width", type=int, default=1100, help="browser window width in CSS pixels")
    parser.add_argument("--scale", type=float, default=1, help="device pixels per CSS pixel (2: a HiDPI picture)")
    parser.add_argument("--mig", action="store_true", help="a MIG GPU and a scheduler's CUDA_VISIBLE_DEVICES")
    args = parser.parse_args()
    missing = browser_available()
    if missing:
        print(missing)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tfgpu-panel-shots-") as tmp:
        try:
            lib = build_fake_nvml(tmp)
        except FakeNvmlUnavailable as exc:
            print(f"needs the fake NVML for its three GPUs: {exc}")
            return 2
        gpus = three_gpus()
        env = {}
        if args.mig:
            gpus["gpus"].append(mig_gpu())
            env["CUDA_VISIBLE_DEVICES"] = "1,MIG-5e8b0c1a"
        config = write_config(Path(tmp) / "fake_nvml.cfg", gpus)
        with Lab(extra_env={**fake_env(lib.parent, config, base={}), **env}) as lab, \
                lab.browser_page(width=args.width, height=2000, device_scale_factor=args.scale) as page:
            panel = show_panel(page)
            big = start_big_tensor(page)
            cell_output(page, big).get_by_text("done").wait_for(timeout=60_000)
            # The first cell active (outside the picture): no selection bar, no cell toolbar.
            page.locator(CELL).first.locator(".jp-InputPrompt").click()
            page.keyboard.press("Escape")
            if args.mig:
                shoot(page, panel, args.out / "panel-mig-light.png")
                set_theme(page, "JupyterLab Dark")
                shoot(page, panel, args.out / "panel-mig-dark.png")
                return 0
            shoot(page, panel, args.out / "panel-light.png")
            panel_tab(panel, "Devices")
            shoot(page, panel, args.out / "panel-devices-light.png")
            # A setting asked too late: the Settings tab shows the value in force, the refusal and the red restart.
            page.locator(CELL).nth(big).locator(".jp-InputPrompt").click()  # the new cell goes below the last
            add_cell_below(page)
            run_cell(page, big + 1, "%tfgpu cpus 3")
            page.locator(CELL).first.locator(".jp-InputPrompt").click()
            page.keyboard.press("Escape")
            panel_tab(panel, "Settings")
            panel.get_by_text("Restart kernel and apply").wait_for(timeout=30_000)
            shoot(page, panel, args.out / "panel-settings-light.png")
            set_theme(page, "JupyterLab Dark")
            shoot(page, panel, args.out / "panel-settings-dark.png")
            panel_tab(panel, "Memory")
            shoot(page, panel, args.out / "panel-dark.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
