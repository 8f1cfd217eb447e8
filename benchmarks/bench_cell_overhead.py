"""What the extension adds to every cell: with it loaded, each cell is bracketed by the capture that tames
TensorFlow's log (an fd-2 pipe and its reader thread), measured against the same shell without it.

One process, three phases of N cells each (a cell that does `x = 1`): the extension not loaded (the
baseline), loaded with the default `log quiet`, and with `%tfgpu log raw` (no capture). Medians of
rounds. Run: python benchmarks/bench_cell_overhead.py [--cells N] [--rounds R]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from contextlib import redirect_stdout


def _per_cell_us(ip, cells: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(cells):
            ip.run_cell("x = 1", store_history=False)
        times.append((time.perf_counter() - start) / cells * 1e6)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    _per_cell_us(ip, args.cells, 1)  # warm-up
    baseline = _per_cell_us(ip, args.cells, args.rounds)
    with redirect_stdout(io.StringIO()):
        ip.run_line_magic("load_ext", "tfgpu_magic")
    quiet = _per_cell_us(ip, args.cells, args.rounds)
    with redirect_stdout(io.StringIO()):
        ip.run_line_magic("tfgpu", "log raw")
    raw = _per_cell_us(ip, args.cells, args.rounds)

    rows = [("not loaded (baseline)", baseline), ("loaded, `log quiet` (default): fd-2 capture per cell", quiet),
            ("loaded, `log raw`: no capture", raw)]
    print("| cell `x = 1` | per cell | added to the baseline |")
    print("|---|---:|---:|")
    for name, value in rows:
        added = "-" if value is baseline else f"+{value - baseline:.0f} µs ({value / baseline - 1:+.0%})"
        print(f"| {name} | {value:.0f} µs | {added} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
