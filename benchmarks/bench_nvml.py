"""How much a warm ``tfgpu_magic.core.nvml.snapshot()`` costs, next to what cannot be avoided and to a subprocess.

    python benchmarks/bench_nvml.py

Builds the fake libnvidia-ml.so.1 (tests/support/fakenvml) in a temporary folder and re-runs itself with it first
on LD_LIBRARY_PATH (glibc reads that only at process start). In that child it measures, for 1 GPU and for
8 GPUs with 4 processes each:

- floor: the raw pynvml calls for the same data (count; per GPU handle, memory, utilization, processes;
  fields read) in a tight loop: what any Python snapshot through pynvml pays; and the same plus the
  other calls snapshot() makes each time (uuid, temperature, power);
- snapshot(): the adapter, warm (NVML initialised, caches filled);
- snapshot().to_dict(): what a JSON view pays;
- ``gpustat --json`` as a subprocess against the same fake, the usual alternative.

Prints medians in µs and the ratios as a markdown table. The exit status reflects errors only, never timing.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

from fakenvml import build_fake_nvml, fake_env, n_gpus, write_config  # noqa: E402

CHILD_FLAG = "_TFGPU_BENCH_NVML_CHILD"
CASES = {"1 GPU": (1, 0), "8 GPUs x 4 procs": (8, 4)}


def median_us(fns: dict[str, Callable[[], object]], budget_s: float = 4.0, repeat: int = 21) -> dict[str, float]:
    """Median over ``repeat`` rounds of the mean time per call of each function, in µs. The functions
    take turns within each round, so a load spike on a shared machine hits all of them alike and the
    ratios stay meaningful."""
    numbers = {}
    for name, fn in fns.items():
        fn()  # warm
        per_call = max(timeit.timeit(fn, number=5) / 5, 1e-7)
        numbers[name] = max(1, int(budget_s / len(fns) / repeat / per_call))
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            runs[name].append(timeit.timeit(fn, number=numbers[name]) / numbers[name])
    return {name: statistics.median(times) * 1e6 for name, times in runs.items()}


def floor_calls(pynvml, everything: bool = False):
    """The raw pynvml calls for the data, fields read (pynvml structs read each field through Python),
    in a tight loop: count; per GPU handle, memory, utilization, processes (compute and graphics) and their
    utilization samples. With
    ``everything``, also the other per-GPU calls snapshot() makes every time (uuid, temperature, power), so that
    snapshot() minus this is the adapter's own cost."""
    version = pynvml.nvmlMemory_v2

    def read():
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            mem.total, mem.used, mem.free, mem.reserved  # noqa: B018
            util = pynvml.nvmlDeviceGetUtilizationRates(handle)
            util.gpu, util.memory  # noqa: B018
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses_v3(handle):
                proc.pid, proc.usedGpuMemory  # noqa: B018
            for proc in pynvml.nvmlDeviceGetGraphicsRunningProcesses_v3(handle):  # nvidia-smi's and gpustat's too
                proc.pid, proc.usedGpuMemory  # noqa: B018
            try:  # per-process utilization, the idle test's input (nvidia-smi pmon reads it too)
                for sample in pynvml.nvmlDeviceGetProcessUtilization(handle, int((time.time() - 10) * 1e6)):
                    sample.pid, sample.smUtil  # noqa: B018
            except pynvml.NVMLError:  # NOT_FOUND: no process computed in the window
                pass
            if everything:
                pynvml.nvmlDeviceGetUUID(handle)
                pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
                pynvml.nvmlDeviceGetPowerUsage(handle)

    return read


def child() -> None:
    """Runs with the fake loaded; prints one JSON object of medians."""
    import pynvml

    from tfgpu_magic.core import nvml

    config_path = Path(os.environ["FAKE_NVML_CONFIG"])
    results: dict[str, dict[str, float]] = {}
    for case, (gpus, procs) in CASES.items():
        write_config(config_path, n_gpus(gpus, procs))
        snap = nvml.snapshot()  # also picks up the new config (and initialises NVML the first time)
        assert snap.available and len(snap.gpus) == gpus, snap
        assert all(g.error is None and len(g.processes) == procs for g in snap.gpus), snap
        results[case] = median_us(
            {
                "floor": floor_calls(pynvml),
                "all_calls": floor_calls(pynvml, everything=True),
                "snapshot": nvml.snapshot,
                "to_dict": lambda: nvml.snapshot().to_dict(),
            }
        )
    print(json.dumps(results))


def gpustat_us(env: dict[str, str], runs: int = 5) -> float | str:
    if shutil.which("gpustat", path=str(Path(sys.executable).parent)) is None:
        try:
            import gpustat  # noqa: F401
        except ImportError:
            return "skipped: gpustat not installed"
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "gpustat", "--json"], env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            return f"skipped: gpustat failed: {proc.stderr.strip().splitlines()[-1:]}"
    return statistics.median(times) * 1e6


def main() -> int:
    if os.environ.get(CHILD_FLAG):
        child()
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-nvml-") as tmp:
        lib = build_fake_nvml(tmp)
        config = Path(tmp) / "fake_nvml.cfg"
        env = fake_env(lib.parent, config)
        env[CHILD_FLAG] = "1"
        proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr, sep="\n", file=sys.stderr)
            return 1
        results = json.loads(proc.stdout.strip().splitlines()[-1])
        env.pop(CHILD_FLAG)
        write_config(config, n_gpus(*CASES["8 GPUs x 4 procs"]))
        subprocess_us = gpustat_us(env)

    print("| case | floor: raw pynvml (µs) | + uuid, temp, power (µs) | snapshot() (µs) "
          "| snapshot().to_dict() (µs) | snapshot / floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, r in results.items():
        print(f"| {case} | {r['floor']:.1f} | {r['all_calls']:.1f} | {r['snapshot']:.1f} | {r['to_dict']:.1f} "
              f"| {r['snapshot'] / r['floor']:.2f}x |")
    big = results["8 GPUs x 4 procs"]["snapshot"]
    if isinstance(subprocess_us, str):
        print(f"\n`gpustat --json` subprocess (8 GPUs x 4 procs): {subprocess_us}")
    else:
        print(f"\n`gpustat --json` subprocess (8 GPUs x 4 procs): {subprocess_us:.0f} µs, "
              f"{subprocess_us / big:.0f}x snapshot()")
    return 0


if __name__ == "__main__":
    sys.exit(main())
