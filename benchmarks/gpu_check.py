"""GPU check: the GPU paths of %tfgpu, for real, on a machine with an NVIDIA GPU and TensorFlow with
CUDA. CI has no GPU; there the same paths are checked call by call (tests/test_gpu_paths.py).

Each check runs in a fresh process (TensorFlow's runtime starts once per process) and reads the
process's GPU memory from NVML. On a machine without a GPU it prints a clear "no GPU" report and
exits 0. Run: python benchmarks/gpu_check.py   (under five minutes on one GPU)
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

CHILD_PRELUDE = """
import json, os, sys, time
import tfgpu_magic
from tfgpu_magic import nvml

def my_gpu_memory():
    snap = nvml.snapshot()
    used = {}
    for gpu in snap.gpus:
        procs = gpu.processes if isinstance(gpu.processes, tuple) else ()
        for p in procs:
            if p.is_self:
                used[gpu.index] = p.used_mib
    return used

def report(**values):
    print("RESULT " + json.dumps(values))
"""

CHECKS = {
    "growth on: NVML's used memory tracks allocation": """
tfgpu_magic.configure(growth=True)
import tensorflow as tf
x = tf.random.uniform((64 * 1024 * 1024,))  # 256 MiB
_ = x.numpy()
used = my_gpu_memory()
total = nvml.snapshot().gpus[0].memory_total_mib
mine = sum(v or 0 for v in used.values())
report(ok=mine < total * 0.5, detail=f"process holds {mine} MiB of {total} MiB after a 256 MiB tensor")
""",
    "limit 1GB: the process stays under 1 GiB plus the CUDA context": """
tfgpu_magic.configure(limit="1GB")
import tensorflow as tf
try:
    x = tf.random.uniform((400 * 1024 * 1024,))  # 1600 MiB: must not fit
    _ = x.numpy()
    fitted = True
except Exception as err:
    fitted = False
y = tf.random.uniform((128 * 1024 * 1024,)); _ = y.numpy()  # 512 MiB fits
mine = sum(v or 0 for v in my_gpu_memory().values())
report(ok=(not fitted) and mine < 1024 + 1024, detail=f"1600 MiB tensor fitted: {fitted}; process holds {mine} MiB")
""",
    "visible: the process is on the chosen GPU alone": """
n = len(nvml.snapshot().gpus)
target = 1 if n > 1 else 0
tfgpu_magic.configure(visible=str(target), growth=True)
import tensorflow as tf
_ = (tf.ones((1024, 1024)) * 2).numpy()
used = my_gpu_memory()
report(ok=list(used) == [target], detail=f"{n} GPU(s); visible {target}; process found on GPUs {sorted(used)}; "
       f"TF sees {[d.name for d in tf.config.list_logical_devices('GPU')]}")
""",
    "virtual 2x2GB: two logical GPUs": """
tfgpu_magic.configure(virtual="2x2GB", gpu=0)
import tensorflow as tf
names = [d.name for d in tf.config.list_logical_devices("GPU")]
strategy = tf.distribute.MirroredStrategy(names)
report(ok=len(names) >= 2 and strategy.num_replicas_in_sync == len(names), detail=f"logical GPUs: {names}")
""",
    "get_memory_info agrees with NVML": """
tfgpu_magic.configure(growth=True)
import tensorflow as tf
x = tf.random.uniform((128 * 1024 * 1024,)); _ = x.numpy()
info = tf.config.experimental.get_memory_info("GPU:0")
tf_mib = info["current"] / 2**20
nvml_mib = sum(v or 0 for v in my_gpu_memory().values())
# NVML adds the CUDA context and the allocator's slack, so it is at least TensorFlow's figure.
report(ok=nvml_mib >= tf_mib, detail=f"TensorFlow current {tf_mib:.0f} MiB, NVML process {nvml_mib} MiB")
""",
}


def run_check(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"ok": False, "detail": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}


def main() -> int:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from tfgpu_magic import nvml

    snap = nvml.snapshot()
    print(f"# GPU check on {platform.node()} ({platform.machine()}, Python {platform.python_version()})")
    if not snap.available or not snap.gpus:
        why = snap.error.detail if snap.error else "NVML reports no GPU"
        print(f"no GPU: {why}. Nothing to check here; the GPU paths are checked call by call in "
              "tests/test_gpu_paths.py.")
        return 0
    print(f"driver {snap.driver_version}, CUDA {snap.cuda_driver_version}; GPUs: "
          + "; ".join(f"{g.index}: {g.name}, {g.memory_total_mib} MiB" for g in snap.gpus))
    print("\n| check | result | detail |\n|---|---|---|")
    failed = 0
    for name, code in CHECKS.items():
        result = run_check(code)
        failed += not result["ok"]
        print(f"| {name} | {'ok' if result['ok'] else 'FAILED'} | {result['detail']} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
