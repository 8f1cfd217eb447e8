"""What the extension adds to every cell: with it loaded, fd 2 is read by one reader for the kernel's life
that tames TensorFlow's log, and each cell's start and end is marked on it; measured against the same shell
without the extension.

One process, three states measured in turn within every round (so drift in the machine's load falls on
all three alike): the extension not loaded (the baseline), loaded with the default `log quiet`, and with
`%tfgpu log raw`. N cells of `x = 1` per state and round; medians of the rounds.
Run: python benchmarks/bench_cell_overhead.py [--cells N] [--rounds R]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from contextlib import redirect_stdout


def _per_cell_us(ip, cells: int) -> float:
    start = time.perf_counter()
    for _ in range(cells):
        ip.run_cell("x = 1", store_history=False)
    return (time.perf_counter() - start) / cells * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    times: dict[str, list[float]] = {"baseline": [], "quiet": [], "raw": []}
    with redirect_stdout(io.StringIO()):
        _per_cell_us(ip, args.cells)  # warm-up
        for _ in range(args.rounds):
            times["baseline"].append(_per_cell_us(ip, args.cells))
            ip.run_line_magic("load_ext", "tfgpu_magic")
            _per_cell_us(ip, 5)  # the first cell after loading starts the fd-2 reader
            times["quiet"].append(_per_cell_us(ip, args.cells))
            ip.run_line_magic("tfgpu", "log raw")
            _per_cell_us(ip, 5)  # the first cell after `log raw` stops it
            times["raw"].append(_per_cell_us(ip, args.cells))
            ip.run_line_magic("unload_ext", "tfgpu_magic")
    baseline, quiet, raw = (statistics.median(times[k]) for k in ("baseline", "quiet", "raw"))

    rows = [("not loaded (baseline)", baseline),
            ("loaded, `log quiet` (default): cell boundaries marked on the fd-2 reader", quiet),
            ("loaded, `log raw`: no capture", raw)]
    print("| cell `x = 1` | per cell | added to the baseline |")
    print("|---|---:|---:|")
    for name, value in rows:
        added = "-" if value is baseline else f"+{value - baseline:.0f} µs ({value / baseline - 1:+.0%})"
        print(f"| {name} | {value:.0f} µs | {added} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
