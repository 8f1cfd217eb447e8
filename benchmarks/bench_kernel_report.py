"""What a kernel's report costs in a container: the live sampler kept running for it, against the same process without.

In a PID namespace (``unshare --pid --fork --mount-proc``; root) a kernel with tfgpu loaded keeps its report
(core/handshake.py, core/reports.py): once TensorFlow has started, the live model's refresher takes a snapshot every
second, with no view open, and writes the report when a value changed. Two children, both in a namespace of their
own, both with the fake NVML (8 GPUs x 4 processes) and TensorFlow started: one as a Jupyter kernel is started
(``-f kernel-<id>.json``: the handshake and the report on), one without a kernel id (nothing watched, nothing
written). Each sits idle for ``--seconds``; reported: each one's CPU over that time, as a share of one core, and the
report's writes. Run as root: ``python benchmarks/bench_kernel_report.py [--seconds 30]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fakenvml import build_fake_nvml, fake_env, n_gpus, write_config  # noqa: E402

CHILD = r"""
import json, os, sys, time
if sys.argv[1] == "kernel":
    sys.argv[1:] = ["-f", "/run/kernel-bench0000.json"]  # as a Jupyter kernel is started
from tfgpu_magic.core import handshake
installed = handshake.install()
import tensorflow as tf
tf.constant(1)  # the runtime starts: the window is read, the report written, the sampler kept running
time.sleep(3)  # past start-up
seconds = float(os.environ["BENCH_SECONDS"])
before = time.process_time()
time.sleep(seconds)
used = time.process_time() - before
reporter = handshake._state.get("reporter")
print(json.dumps({"installed": installed, "cpu_pct": used / seconds * 100,
                  "writes": reporter.writes if reporter is not None else 0}))
"""


def measure(seconds: float) -> dict:
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        lib = build_fake_nvml(tmp)
        config = write_config(Path(tmp) / "fake_nvml.cfg", n_gpus(8, 4))
        env = fake_env(lib.parent, config, base={k: v for k, v in os.environ.items()
                                                 if k not in ("PYTHONPATH", "PYTHONUNBUFFERED")})
        env.update(JUPYTER_RUNTIME_DIR=str(Path(tmp) / "runtime"), BENCH_SECONDS=str(seconds), TF_CPP_MIN_LOG_LEVEL="2")
        for label in ("plain", "kernel"):
            done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", CHILD, label],
                                  env=env, capture_output=True, text=True, timeout=seconds + 300)
            if done.returncode != 0:
                raise RuntimeError(f"the {label} child failed:\n{done.stderr[-3000:]}")
            out[label] = json.loads(done.stdout.strip().splitlines()[-1])
    out["report_cost_pct"] = out["kernel"]["cpu_pct"] - out["plain"]["cpu_pct"]
    out["seconds"] = seconds
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle time measured (30)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (unshare --pid)", file=sys.stderr)
        return 2
    r = measure(args.seconds)
    print(f"| idle kernel in a PID namespace, TensorFlow started, {r['seconds']:.0f} s | CPU, share of one core | "
          "report writes |")
    print("|---|---:|---:|")
    print(f"| without a kernel id (nothing watched; baseline) | {r['plain']['cpu_pct']:.3f}% | "
          f"{r['plain']['writes']} |")
    print(f"| as a Jupyter kernel (handshake, report, sampler every second) | {r['kernel']['cpu_pct']:.3f}% | "
          f"{r['kernel']['writes']} |")
    print(f"\nThe report's cost: {r['report_cost_pct']:.3f}% of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
