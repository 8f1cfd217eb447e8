"""How long `tfgpu devices --json` takes from a shell, beside `gpustat --json` and nvitop's one-shot report, all
against the same fake NVML library (tests/support/fakenvml) in the same run.

    python benchmarks/bench_cli.py [--runs N] [--tensorflow-runs M]

Builds the fake libnvidia-ml.so.1 in a temporary folder and describes four GPUs to it (an A100 with two processes,
an H100, a T4, an A100 in MIG mode with two MIG devices). Each command is a fresh process, as a user starts it; the
commands take turns within each round, so a load spike on this shared machine falls on all alike, and each figure
is the median wall time of its runs. Ratios are against `gpustat --json` of the same run. No Jupyter server is
found (an empty runtime folder): the look-up for notebook names is a glob of that folder.

`tfgpu devices --tensorflow --json` (TensorFlow's own view: it imports TensorFlow) is timed with fewer runs.
A command that fails against the fake is reported with its exit status and last line, not timed. Prints a markdown
table; the exit status reflects errors of this script only, never timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fakenvml import build_fake_nvml, fake_env, mig_config, three_gpus, write_config  # noqa: E402

BIN = Path(sys.executable).parent
COMMANDS = {
    "tfgpu devices --json": [str(BIN / "tfgpu"), "devices", "--json"],
    "tfgpu status --json": [str(BIN / "tfgpu"), "status", "--json"],
    "tfgpu devices (text)": [str(BIN / "tfgpu"), "devices"],
    "gpustat --json": [str(BIN / "gpustat"), "--json"],
    "nvitop --once": [str(BIN / "nvitop"), "--once"],
}
BASELINE = "gpustat --json"
WITH_TENSORFLOW = ("tfgpu devices --tensorflow --json", [str(BIN / "tfgpu"), "devices", "--tensorflow", "--json"])


def machine() -> dict:
    config = three_gpus()
    config["gpus"].append(mig_config()["gpus"][0])
    return config


def run_once(command: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    return time.perf_counter() - start, proc


def why_failed(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
    return f"fails against the fake (exit {proc.returncode}: {lines[-1][:90] if lines else 'no output'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each command (default 30)")
    parser.add_argument("--tensorflow-runs", type=int, default=3, help="runs of devices --tensorflow (0: skip)")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="tfgpu-bench-cli-"))
    try:
        lib = build_fake_nvml(folder / "lib")
        config = write_config(folder / "gpus.json", machine())
        (folder / "runtime").mkdir()
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL")}
        env = fake_env(lib.parent, config, base={**base, "JUPYTER_RUNTIME_DIR": str(folder / "runtime")})
        failed: dict[str, str] = {}
        for name, command in COMMANDS.items():  # a first run of each: warm caches, and who fails
            _, proc = run_once(command, env)
            if proc.returncode != 0:
                failed[name] = why_failed(proc)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS if name not in failed}
        for _ in range(args.runs):
            for name in times:
                times[name].append(run_once(COMMANDS[name], env)[0])
        if args.tensorflow_runs:
            name, command = WITH_TENSORFLOW
            times[name] = [run_once(command, env)[0] for _ in range(args.tensorflow_runs)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    medians = {name: statistics.median(values) for name, values in times.items()}
    baseline = medians.get(BASELINE)
    print(f"Fake NVML: 4 GPUs (one in MIG mode, 2 MIG devices), 4 processes; {args.runs} runs each, taking turns "
          f"(devices --tensorflow: {args.tensorflow_runs}); median wall time of a fresh process. Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs.")
    print()
    print(f"| command | median | vs `{BASELINE}` |")
    print("|---|---:|---:|")
    for name in [*COMMANDS, WITH_TENSORFLOW[0]]:
        if name in failed:
            print(f"| `{name}` | - | {failed[name]} |")
        elif name in medians:
            ratio = f"{medians[name] / baseline:.2f}x" if baseline else "-"
            print(f"| `{name}` | {medians[name] * 1000:.0f} ms | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
