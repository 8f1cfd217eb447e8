"""What loading tfgpu_magic costs, against `import tensorflow`, measured in one run.

Each figure is the median over fresh processes (imports are one-shot), timed inside the child so
interpreter start-up is not counted. Run: python benchmarks/bench_import.py [--runs N] [--compare DIR]

``--compare DIR`` measures another checkout of tfgpu_magic in the same run (its folder put first on the children's
PYTHONPATH), so a change is judged by its ratios against the code before it, not against a figure from another day:
``git worktree add /tmp/before <rev> && python benchmarks/bench_import.py --compare /tmp/before``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

PRELUDE = "import time, sys\n"

IMPORT_PACKAGE = PRELUDE + """
t = time.perf_counter(); import tfgpu_magic; dt = time.perf_counter() - t
print(dt)
"""

# A terminal-IPython shell without a history file, as a kernel has it before %load_ext.
SHELL = PRELUDE + """
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
c = Config(); c.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=c)
"""

LOAD_EXT = SHELL + """
t = time.perf_counter(); ip.run_line_magic("load_ext", "tfgpu_magic"); dt = time.perf_counter() - t
assert "tensorflow" not in sys.modules and "ipywidgets" not in sys.modules
print(dt)
"""

FIRST_MAGIC = SHELL + """
import io, contextlib
ip.run_line_magic("load_ext", "tfgpu_magic")
with contextlib.redirect_stdout(io.StringIO()):
    t = time.perf_counter(); ip.run_line_magic("tfgpu", "cpus 3"); dt = time.perf_counter() - t
assert "tensorflow" not in sys.modules
print(dt)
"""

IMPORT_TF = PRELUDE + """
t = time.perf_counter(); import tensorflow; dt = time.perf_counter() - t
print(dt)
"""

MAGIC_LATENCY = SHELL + """
import io, contextlib
ip.run_line_magic("load_ext", "tfgpu_magic")
samples = []
sink = io.StringIO()
for i in range(300):
    line = "cpus 3" if i % 2 else "cpus 2"  # a real change every time
    with contextlib.redirect_stdout(sink):
        t = time.perf_counter(); ip.run_line_magic("tfgpu", line); samples.append(time.perf_counter() - t)
assert "tensorflow" not in sys.modules
samples.sort()
print(samples[len(samples) // 2])
"""


def child(code: str, checkout: str | None = None) -> float:
    # As a user's installation runs: bytecode cached (this machine sets PYTHONDONTWRITEBYTECODE,
    # which would make every run recompile the package and time the compiler instead).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if checkout is not None:
        env["PYTHONPATH"] = checkout
        code += f"\nimport tfgpu_magic\nassert tfgpu_magic.__file__.startswith({checkout!r}), tfgpu_magic.__file__\n"
    # `python -c` puts its working folder first on sys.path: run in the checkout measured.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=checkout)
    return float(out.stdout.strip().splitlines()[-1])


def median_of(code: str, runs: int, checkout: str | None = None) -> float:
    child(code, checkout)  # warm-up: writes the bytecode cache and fills the OS file cache
    return statistics.median(child(code, checkout) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compare", metavar="DIR", help="another checkout of tfgpu_magic, measured in this run too")
    options = parser.parse_args()
    runs, other = options.runs, options.compare
    # Interleave nothing: each line is a median of fresh processes, all taken in this one run.
    tf = median_of(IMPORT_TF, runs)
    package = median_of(IMPORT_PACKAGE, runs)
    load_ext = median_of(LOAD_EXT, runs)
    first = median_of(FIRST_MAGIC, runs)
    magic = median_of(MAGIC_LATENCY, max(3, runs // 2))
    print(f"Medians of {runs} fresh processes (Python {sys.version.split()[0]}, {os.cpu_count()} cores)\n")
    print("| what | time | ratio to `import tensorflow` |")
    print("|---|---:|---:|")
    print(f"| `import tensorflow` (baseline) | {tf * 1e3:.0f} ms | 1 |")
    print(f"| `import tfgpu_magic` | {package * 1e3:.2f} ms | {package / tf:.2%} |")
    print(f"| `%load_ext tfgpu_magic` (IPython already running) | {load_ext * 1e3:.2f} ms | {load_ext / tf:.2%} |")
    print(f"| first `%tfgpu cpus 3` after `%load_ext` (loads the core) | {first * 1e3:.2f} ms | {first / tf:.2%} |")
    print(f"| `%tfgpu cpus 3` before TensorFlow is imported, warm | {magic * 1e6:.0f} µs | {magic / tf:.4%} |")
    if other:
        for name, code, count in (("`%load_ext tfgpu_magic`", LOAD_EXT, runs),
                                  ("first `%tfgpu cpus 3`", FIRST_MAGIC, runs),
                                  ("`%tfgpu cpus 3`, warm", MAGIC_LATENCY, max(3, runs // 2))):
            theirs = median_of(code, count, other)
            unit, scale = ("µs", 1e6) if "warm" in name else ("ms", 1e3)
            print(f"| {name}, the code at `{other}` | {theirs * scale:.2f} {unit} | {theirs / tf:.4%} |")


if __name__ == "__main__":
    main()
