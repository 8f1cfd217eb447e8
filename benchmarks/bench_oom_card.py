"""What the out-of-memory card costs: the time from the error to the card, and what its watch adds to every other cell.

    python benchmarks/bench_oom_card.py [--cells N] [--rounds R]

Builds the fake libnvidia-ml.so.1 (tests/support/fakenvml) and runs two children, each a fresh Python with a real
IPython shell and real TensorFlow (the CPU build): one with the fake first on LD_LIBRARY_PATH (glibc reads it only at
process start) showing an 80 GiB GPU mostly held by another notebook's kernel (its report in the runtime folder), one
with no NVML library at all. In each:

- error to card: the watch's post_run_cell for a cell that ran out of memory: find TensorFlow's error, gather the
  figures (this kernel's TensorFlow, NVML, the kernels' reports, the registry), choose cause and steps, render text and
  HTML, display the bundle. Twice: a real CPU OOM (``tf.zeros((2**40,))``, host memory, no NVML read) and TensorFlow's
  ResourceExhaustedError with a GPU allocator's text (this build has no GPU to run out of), which reads NVML. Target:
  within 50 ms.
- per cell: a cell that fails otherwise (``raise ValueError``) and one that succeeds (``x = 1``), each in three states
  that take turns within every round, each first in turn (drift falls on all alike): no extension (the baseline), only
  the OOM watch registered, and the whole extension loaded; ratios against the baseline of the same run. And the
  hook alone, called with each cell's result as IPython calls it (with TensorFlow loaded: the name walk runs).

Prints markdown tables. The exit status reflects errors only, never timing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

CHILD_FLAG = "_TFGPU_BENCH_OOM_CHILD"
GIB = 1 << 30
GPU_TEXT = ("OOM when allocating tensor with shape[8,1024,1024,64] and type float on "
            "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc [Op:Conv2D]")


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm: first imports, NVML's init
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _per_cell_us(ip, source: str, cells: int) -> float:
    start = time.perf_counter()
    for _ in range(cells):
        ip.run_cell(source, store_history=False)
    return (time.perf_counter() - start) / cells * 1e6


def child(args: argparse.Namespace) -> dict:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        import tensorflow as tf

        from tfgpu_magic.ipython import oom as face
        from tfgpu_magic.ipython.magics import extension_magics

        try:
            tf.zeros((2**40,))
        except tf.errors.ResourceExhaustedError as err:
            cpu_error = err
        gpu_error = tf.errors.ResourceExhaustedError(None, None, GPU_TEXT)
        ip.run_line_magic("load_ext", "tfgpu_magic")
        magics = extension_magics(ip)  # the one %load_ext made
        watch = magics.oom_watch
        shown = []

        def card_for(error):
            def run():
                watch.post_run_cell(SimpleNamespace(error_in_exec=error, execution_count=1))
                shown.append(watch.last)
            return run

        card = {"cpu": _median_ms(card_for(cpu_error), args.cards),
                "gpu": _median_ms(card_for(gpu_error), args.cards)}
        last_gpu = watch.last
        ip.run_line_magic("unload_ext", "tfgpu_magic")
        # The per-cell states; the fully loaded one through %load_ext, the watch alone registered by hand.
        lone = face.OomWatch(magics)
        sources = {"fails": "raise ValueError('x')", "succeeds": "x = 1"}
        times: dict[tuple[str, str], list[float]] = {(s, k): [] for s in sources for k in ("baseline", "watch", "all")}
        for source in sources.values():
            _per_cell_us(ip, source, 20)  # warm
        def state(kind: str, name: str, source: str) -> None:
            if kind == "watch":
                ip.events.register("post_run_cell", lone.post_run_cell)
            elif kind == "all":
                ip.run_line_magic("load_ext", "tfgpu_magic")
                _per_cell_us(ip, "x = 1", 5)  # the first cells after loading start the extension's readers
            times[(name, kind)].append(_per_cell_us(ip, source, args.cells))
            if kind == "watch":
                ip.events.unregister("post_run_cell", lone.post_run_cell)
            elif kind == "all":
                ip.run_line_magic("unload_ext", "tfgpu_magic")

        kinds = ["baseline", "watch", "all"]
        for round_ in range(args.rounds):
            for name, source in sources.items():
                for kind in kinds[round_ % 3:] + kinds[:round_ % 3]:  # each state first in turn
                    state(kind, name, source)
        # The hook alone, called as IPython calls it, for the same two results (µs per call).
        try:
            raise ValueError("x")
        except ValueError as err:
            failed = SimpleNamespace(error_in_exec=err, execution_count=1)
        hook = {"fails": _median_ms(lambda: [lone.post_run_cell(failed) for _ in range(1000)], 21),
                "succeeds": _median_ms(lambda: [lone.post_run_cell(SimpleNamespace(error_in_exec=None))
                                                for _ in range(1000)], 21)}
    cells = {f"{s}/{k}": statistics.median(v) for (s, k), v in times.items()}
    return {"card_ms": card, "cells_us": cells, "hook_us": hook, "gpu_case": last_gpu.get("case") if last_gpu else None,
            "holders": len(last_gpu.get("holders") or []) if last_gpu else 0,
            "nvml": bool(last_gpu and last_gpu.get("gpu"))}


def run_child(env: dict[str, str], argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, *argv], env={**env, CHILD_FLAG: "1"}, capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200, help="cells per state and round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cards", type=int, default=30, help="cards per case")
    args = parser.parse_args(argv)
    if os.environ.get(CHILD_FLAG):
        print(json.dumps(child(args)))
        return 0

    from fakenvml import build_fake_nvml, fake_env, write_config

    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES")}
    base["TF_CPP_MIN_LOG_LEVEL"] = "2"  # TensorFlow's banner in the child's stderr; timing is unaffected
    child_argv = ["--cells", str(args.cells), "--rounds", str(args.rounds), "--cards", str(args.cards)]
    with tempfile.TemporaryDirectory(prefix="tfgpu-bench-oom-") as folder:
        where = Path(folder)
        lib = build_fake_nvml(where / "lib")
        runtime = where / "runtime"
        (runtime / "tfgpu-kernels").mkdir(mode=0o700, parents=True)
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        try:
            report = {"schema": 1, "kernel_id": "other-kernel", "pid": other.pid, "notebook": "other.ipynb",
                      "host_pid": None, "how": None, "note": "", "gpus": [], "tf_memory": {}, "written_at": 0.0}
            (runtime / "tfgpu-kernels" / "other-kernel.json").write_text(json.dumps(report))
            gpus = [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-0c0ffee0-0000-4000-8000-00000000000{k}",
                     "pci_bus_id": f"00000000:{k + 1:02X}:00.0", "memory_total": 80 * GIB,
                     "memory_used": 78 * GIB if k == 0 else 0, "memory_reserved": 0, "utilization_gpu": 90,
                     "utilization_memory": 40, "temperature": 50,
                     "processes": [{"pid": other.pid, "used": 70 * GIB}, {"pid": 1, "used": 7 * GIB},
                                   {"pid": "self", "used": GIB}] if k == 0 else []} for k in range(2)]
            config = write_config(where / "fake_nvml.cfg", {"gpus": gpus})
            env = {**base, "JUPYTER_RUNTIME_DIR": str(runtime)}
            with_nvml = run_child(fake_env(lib.parent, config, base=env), child_argv)
            without = run_child({**env, "LD_LIBRARY_PATH": str(where / "empty")}, child_argv)
        finally:
            other.kill()
            other.wait()

    print("| error to card (the watch's post_run_cell) | median | within 50 ms |")
    print("|---|---:|:---:|")
    for label, result, case in (("CPU OOM, real (`tf.zeros((2**40,))`), host memory", with_nvml, "cpu"),
                                ("GPU OOM text, NVML (fake: 2 GPUs, 3 holders, a kernel's report)", with_nvml, "gpu"),
                                ("GPU OOM text, no NVML library", without, "gpu")):
        value = result["card_ms"][case]
        print(f"| {label} | {value:.1f} ms | {'yes' if value <= 50 else 'NO'} |")
    print()
    print(f"(GPU card with NVML: case {with_nvml['gpu_case']}, {with_nvml['holders']} holders; "
          f"without: case {without['gpu_case']})")
    print()
    print("| per cell (with NVML's child) | no extension | OOM watch only | ratio | whole extension | ratio | "
          "the hook alone |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    cells = with_nvml["cells_us"]
    for name, label in (("fails", "`raise ValueError('x')` (traceback printed)"), ("succeeds", "`x = 1`")):
        baseline, watch, whole = (cells[f"{name}/{k}"] for k in ("baseline", "watch", "all"))
        print(f"| {label} | {baseline:.0f} µs | {watch:.0f} µs | {watch / baseline:.3f} | {whole:.0f} µs | "
              f"{whole / baseline:.3f} | {with_nvml['hook_us'][name]:.2f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
