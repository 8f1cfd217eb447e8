"""The child processes of benchmarks/gpu_check.py: the run's time budget every wait draws on, the code
strings run in child Python processes (CUDA through PyTorch or CuPy, the field signature, the TensorFlow
checks), running them (run_child, child_env, memory_holder) and nvidia-smi."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .compare import BLOCK_MIB

REPO = Path(__file__).resolve().parent.parent.parent
NO_TORCH_OR_CUPY = "neither PyTorch nor CuPy is installed"


class Budget:
    """The run's time limit, shared out: every wait takes at most what is left."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline


# ---- children ---------------------------------------------------------------------------------------

def child_env(**extra: str) -> dict[str, str]:
    """The environment of every child: this repository importable wherever the script was started from."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra)
    return env


def run_child(code: str, budget: Budget, *args: str, cap: float = 60, env: dict[str, str] | None = None) -> dict:
    """Run ``python -c code args``; its ``RESULT {json}`` line, or {"error": what went wrong}."""
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=env or child_env(), timeout=budget.left(cap))
    except subprocess.TimeoutExpired as exc:
        return {"error": f"timed out after {exc.timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": f"exit {proc.returncode}: {_last_line(proc.stderr)}"}


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"


# Shared by the children that start CUDA: pick PyTorch, else CuPy, and say why neither when so.
CUDA_PRELUDE = '''
import json, os, sys

def report(**values):
    print("RESULT " + json.dumps(values), flush=True)

def cuda_backend():
    """("torch" | "cupy", module), or (None, why neither can start CUDA here)."""
    reasons = []
    try:
        import torch
    except ImportError:
        reasons.append("PyTorch is not installed")
    else:
        if torch.cuda.is_available():
            return "torch", torch
        reasons.append(f"PyTorch {torch.__version__} has no CUDA here")
    try:
        import cupy
    except ImportError:
        reasons.append("CuPy is not installed")
    else:
        return "cupy", cupy
    if reasons == ["PyTorch is not installed", "CuPy is not installed"]:
        return None, "NO_TORCH_OR_CUPY"
    return None, "; ".join(reasons)
'''.replace("NO_TORCH_OR_CUPY", NO_TORCH_OR_CUPY)

HOLDER_CHILD = CUDA_PRELUDE + '''
backend, module = cuda_backend()
if backend is None:
    report(not_run=module)
    sys.exit(0)
elements = int(sys.argv[1]) * 2**20 // 4  # float32
if backend == "torch":
    block = module.ones(elements, dtype=module.float32, device="cuda")
    module.cuda.synchronize()
else:
    block = module.ones(elements, dtype=module.float32)
    module.cuda.Device().synchronize()
from tfgpu_magic.core import nvml
report(backend=backend, pid=os.getpid(), snapshot=nvml.snapshot().to_dict())
sys.stdin.readline()  # hold the block until the parent has looked
'''

NUMBERING_CHILD = CUDA_PRELUDE + '''
import tfgpu_magic
index = sys.argv[1]
outcomes = tfgpu_magic.configure(visible=index)  # before CUDA starts, as in a notebook's first cell
env = {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
status = [o.status.name.lower() for o in outcomes]
backend, module = cuda_backend()
if backend is None:
    report(not_run=module, env=env, status=status)
    sys.exit(0)

def torch_bus_id(torch):
    props = torch.cuda.get_device_properties(0)
    if hasattr(props, "pci_bus_id"):
        return f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    # Older PyTorch does not expose the PCI location: ask the CUDA driver PyTorch has started.
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    device, text = ctypes.c_int(), ctypes.create_string_buffer(64)
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), 0) or cuda.cuDeviceGetPCIBusId(text, 64, device):
        raise RuntimeError("the CUDA driver would not give device 0's PCI bus id")
    return text.value.decode()

if backend == "torch":
    count, bus_id = module.cuda.device_count(), torch_bus_id(module)
else:
    count, bus_id = module.cuda.runtime.getDeviceCount(), module.cuda.Device(0).pci_bus_id
report(backend=backend, env=env, status=status, device_count=count, bus_id=bus_id)
'''

SIGNATURE_CHILD = '''
import json, os
from tfgpu_magic.core import nvml
print("RESULT " + json.dumps({"pid": os.getpid(), "snapshot": nvml.snapshot().to_dict()}))
'''


@contextlib.contextmanager
def memory_holder(budget: Budget, block_mib: int = BLOCK_MIB) -> Iterator[dict[str, Any]]:
    """A child holding ``block_mib`` of GPU memory through PyTorch or CuPy while the block runs. Yields its
    report: {"backend", "pid", "snapshot" (its own)}, {"not_run": why} or {"error": why}."""
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER_CHILD, str(block_mib)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=child_env())
        lines: queue.Queue[str] = queue.Queue()
        # A thread, so waiting for the child's line can time out however its output is buffered.
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        report: dict[str, Any] = {"error": "timed out waiting for the child's report"}
        deadline = time.monotonic() + budget.left(60)
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith("RESULT "):
                report = json.loads(line[7:])
                break
            if not line:  # the child ended without a report
                proc.wait(timeout=10)
                stderr.seek(0)
                report = {"error": f"exit {proc.returncode}: {_last_line(stderr.read())}"}
                break
        try:
            yield report
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # lets the child end
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)
    lines.put("")


# ---- nvidia-smi ------------------------------------------------------------------------------------

class NvidiaSmiMissing(Exception):
    pass


class NvidiaSmiFailed(Exception):
    pass


def nvidia_smi(*args: str, budget: Budget) -> str:
    """nvidia-smi's stdout. Raises NvidiaSmiMissing (not on PATH) or NvidiaSmiFailed."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NvidiaSmiMissing("nvidia-smi is not on PATH")
    command = " ".join(["nvidia-smi", *args])
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=budget.left(30))
    except subprocess.TimeoutExpired:
        raise NvidiaSmiFailed(f"`{command}` timed out") from None
    if proc.returncode != 0:
        raise NvidiaSmiFailed(f"`{command}` exited {proc.returncode}: {_last_line(proc.stdout + proc.stderr)}")
    return proc.stdout


# ---- the TensorFlow checks' children (each in a fresh process: its runtime starts once per process) --

CHILD_PRELUDE = """
import json, os, sys, time
import tfgpu_magic
from tfgpu_magic.core import nvml

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

TF_PROBE = """
import json
try:
    import tensorflow as tf
except ImportError as exc:
    print("RESULT " + json.dumps({"installed": False, "why": str(exc)}))
else:
    print("RESULT " + json.dumps({"installed": True, "version": tf.__version__,
                                  "gpus": len(tf.config.list_physical_devices("GPU"))}))
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
