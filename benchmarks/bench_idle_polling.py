"""How much a JupyterLab page with tfgpu asks of its server, against what JupyterLab itself asks in the same run: the
requests a JupyterHub's proxy would count as the user's activity.

    python benchmarks/bench_idle_polling.py [--window 60]

A real `jupyter lab` (tests/support/labsession.py) whose NVML is the fake library, one notebook whose kernel holds
4 GiB on GPU 1 at 0 % SM utilization, the GPUs sidebar open in headless Chromium, the culler off. Three states,
``--window`` seconds each, every request of the page counted as tfgpu's (``/tfgpu/api/``) or JupyterLab's own:

- busy: a cell runs (``time.sleep``): the sidebar asks every ``refreshInterval`` (2 s);
- idle: every kernel idle, nothing warned: every ``idleRefreshInterval`` (60 s), measured after the minute a cell
  run or a click keeps the usual interval;
- hidden: the page hidden (document.hidden and visibilityState read "hidden", a visibilitychange dispatched, as a
  background tab reports them; headless Chromium never hides a page itself): nothing.

Prints a table of requests per minute and tfgpu's as a ratio of JupyterLab's own. Needs what the browser tests need
(`make setup`; Chromium at /usr/bin/chromium). Takes about 3 windows plus 2 minutes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakenvml import MIB, build_fake_nvml, fake_env, three_gpus, write_config  # noqa: E402
from labsession import (  # noqa: E402
    SIDEBAR,
    SIDEBAR_TAB,
    Lab,
    browser_available,
    kernel_pid,
    open_notebook,
    run_cell,
    set_page_visible,
    start_cell,
    write_notebook,
)


def count(page, seconds: float) -> tuple[int, int]:
    """(tfgpu's requests, JupyterLab's own) the page makes in ``seconds``."""
    seen: list[str] = []

    def record(request) -> None:
        if "/api/" in request.url:
            seen.append(request.url)

    page.on("request", record)
    page.wait_for_timeout(seconds * 1000)
    page.remove_listener("request", record)
    tfgpu = sum("/tfgpu/api/" in url for url in seen)
    return tfgpu, len(seen) - tfgpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured per state (default 60)")
    args = parser.parse_args()
    why = browser_available()
    if why:
        print(f"bench_idle_polling: {why}", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="tfgpu-bench-idle-"))
    lib = build_fake_nvml(folder)
    config_path = write_config(folder / "fake_nvml.cfg", three_gpus())
    rows = []
    with Lab(fake_env(lib.parent, config_path, base={})) as lab:
        write_notebook(lab.root / "idle.ipynb")
        with lab.browser_page() as page:
            page.wait_for_selector(SIDEBAR_TAB, timeout=120_000)
            open_notebook(page, "idle.ipynb")
            config = three_gpus()
            config["gpus"][1]["processes"] = [{"pid": kernel_pid(lab, "idle.ipynb"), "used": 4096 * MIB, "sm": 0}]
            write_config(config_path, config)
            page.click(SIDEBAR_TAB)
            page.wait_for_selector(f"{SIDEBAR} .tfgpu-gpu", timeout=60_000)
            start_cell(page, 0, f"import time; time.sleep({args.window + 10:.0f})")
            page.wait_for_timeout(3000)
            rows.append(("busy (a cell runs)", *count(page, args.window)))
            page.wait_for_timeout(10_000)  # the cell has ended
            run_cell(page, 0, "1")  # a quick cell: then only idle kernels, once its minute has passed
            page.wait_for_timeout(65_000)
            rows.append(("idle (every kernel idle)", *count(page, args.window)))
            set_page_visible(page, False)
            page.wait_for_timeout(3000)  # a request in flight lands
            rows.append(("hidden (the tab in the background)", *count(page, args.window)))
    per_minute = 60.0 / args.window
    print(f"Requests per minute of one JupyterLab page with the GPUs sidebar open ({args.window:.0f} s per state)")
    print()
    print("| state | tfgpu (/tfgpu/api/) | JupyterLab's own (/api/) | tfgpu / JupyterLab |")
    print("|---|---|---|---|")
    for name, tfgpu, own in rows:
        ratio = f"{tfgpu / own:.2f}" if own else ("0" if tfgpu == 0 else "n/a")
        print(f"| {name} | {tfgpu * per_minute:.1f} | {own * per_minute:.1f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
