"""GPU check: on a machine with an NVIDIA GPU, check the NVML adapter against the driver and the GPU paths
of %tfgpu for real. CI has no GPU: there this script's logic runs against a fake libnvidia-ml.so.1 and a
fake nvidia-smi (tests/test_gpu_check.py), and the GPU paths are checked call by call
(tests/test_gpu_paths.py).

Two parts, each check in its own row:
- NVML, needing neither TensorFlow nor IPython: ``nvml.snapshot()`` against nvidia-smi field by field;
  process attribution and physical-index numbering, with a child process that starts CUDA through PyTorch
  (or CuPy); and the type / N/A signature of every snapshot field, compared with the fake library's.
- TensorFlow: each check in a fresh process (its runtime starts once per process), run only where
  TensorFlow imports and lists a GPU.

It prints one table (check | result | detail; result is passed, failed or not run) and, with --json, writes
the same as JSON. Exit status 1 only when a check that ran failed. Without NVML it prints a "no GPU" report
and exits 0. No network; under two minutes.

Run from the repository root:  python3 benchmarks/gpu_check.py --json gpu_check.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pwd
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tfgpu_magic import nvml  # noqa: E402  (needs the path above when run as a script)

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"
TIME_BUDGET_S = 110.0  # the whole run, so it ends within two minutes even when children hang
MIB = 1 << 20
BLOCK_MIB = 1024  # what the attribution child allocates
CONTEXT_ALLOWANCE_MIB = 1024  # the CUDA context and the framework's kernels come on top of the block
# The fake library reads its GPUs from the file this variable names and shows none without it, so a run
# that found GPUs with it unset read a real driver.
FAKE_NVML_CONFIG_ENV = "FAKE_NVML_CONFIG"

CHECK_GPU_FIELDS = "nvidia-smi vs NVML: GPU fields"
CHECK_CUDA = "nvidia-smi vs NVML: CUDA driver version"
CHECK_APPS = "nvidia-smi vs NVML: compute processes"
CHECK_ATTRIBUTION = "attribution: a child's 1 GiB shows under its pid, name and user"
CHECK_SELF = "attribution: is_self marks the reading process only"
CHECK_NUMBERING = "numbering: configure(visible=k) makes CUDA device 0 the GPU NVML calls k"
CHECK_FIDELITY = "fake NVML: field types and N/A match the real driver's"
NVML_CHECKS = (CHECK_GPU_FIELDS, CHECK_CUDA, CHECK_APPS, CHECK_ATTRIBUTION, CHECK_SELF, CHECK_NUMBERING,
               CHECK_FIDELITY)
NO_TF_CUDA = "TensorFlow with CUDA is not installed here"
NO_TORCH_OR_CUPY = "neither PyTorch nor CuPy is installed"


@dataclass(frozen=True)
class CheckResult:
    check: str
    part: str  # "nvml" (no TensorFlow needed) or "tensorflow"
    result: str  # PASSED, FAILED or NOT_RUN
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


class Budget:
    """The run's time limit, shared out: every wait takes at most what is left."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline


# ---- nvidia-smi against the snapshot (pure: text and ``snapshot().to_dict()`` in, comparisons out) ----

GPU_QUERY = ("index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "utilization.gpu",
             "temperature.gpu", "power.draw", "driver_version")
APPS_QUERY = ("pid", "process_name", "used_memory", "gpu_uuid")
CSV_FORMAT = "--format=csv,noheader,nounits"
CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)")


@dataclass(frozen=True)
class Tolerance:
    """How far apart two readings of a moving figure may be: the larger of an absolute and a relative bound."""

    absolute: float
    relative: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        return abs(a - b) <= max(self.absolute, self.relative * max(abs(a), abs(b)))

    def describe(self, unit: str) -> str:
        bound = f"{self.absolute:g} {unit}"
        return f"±max({bound}, {self.relative:.0%})" if self.relative else f"±{bound}"


@dataclass(frozen=True)
class FieldRule:
    nvml_field: str  # the key in the GPU's dict, else in the snapshot's (driver_version)
    kind: str = "text"  # text | bus_id | number
    tolerance: Tolerance | None = None  # numbers only; None: equal
    unit: str = ""


# nvidia-smi and the snapshot read the GPU tens of milliseconds apart: figures that move get a tolerance.
GPU_FIELD_RULES = {
    "name": FieldRule("name"),
    "uuid": FieldRule("uuid"),
    "pci.bus_id": FieldRule("pci_bus_id", "bus_id"),
    "memory.total": FieldRule("memory_total_mib", "number", unit="MiB"),
    "memory.used": FieldRule("memory_used_mib", "number", Tolerance(256), "MiB"),
    "utilization.gpu": FieldRule("utilization_gpu_pct", "number", Tolerance(15), "points"),
    "temperature.gpu": FieldRule("temperature_c", "number", Tolerance(3), "°C"),
    "power.draw": FieldRule("power_w", "number", Tolerance(25, 0.2), "W"),
    "driver_version": FieldRule("driver_version"),
}
PROCESS_MEMORY_RULE = FieldRule("used_mib", "number", Tolerance(256), "MiB")


@dataclass(frozen=True)
class FieldComparison:
    gpu: int | None  # physical index; None for system-wide values
    field: str  # nvidia-smi's name for it
    smi: str  # as nvidia-smi printed it
    nvml: Any  # as the snapshot's dict has it
    ok: bool
    why: str = ""

    def describe(self) -> str:
        where = f"GPU {self.gpu} " if self.gpu is not None else ""
        why = f" ({self.why})" if self.why else ""
        return f"{where}{self.field}: nvidia-smi {self.smi!r}, NVML {_nvml_text(self.nvml)}{why}"


def _nvml_text(value: Any) -> str:
    if is_unavailable(value):
        return f"n/a ({value['unavailable']})"
    return repr(value)


def is_unavailable(value: Any) -> bool:
    """An ``Unavailable`` as ``to_dict()`` writes it."""
    return isinstance(value, dict) and "unavailable" in value


def smi_unavailable(text: str) -> bool:
    """nvidia-smi's ways of saying a value is missing: "[N/A]", "[Not Supported]", "[Insufficient Permissions]" ..."""
    return text in ("", "N/A") or (text.startswith("[") and text.endswith("]"))


def parse_csv(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of ``--format=csv,noheader,nounits`` as dicts. nvidia-smi does not quote values, so a comma in a
    process name splits it: the surplus parts are joined back into process_name."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        surplus = len(parts) - len(fields)
        if surplus > 0 and "process_name" in fields:
            at = fields.index("process_name")
            parts[at : at + surplus + 1] = [", ".join(parts[at : at + surplus + 1])]
        if len(parts) != len(fields):
            raise ValueError(f"nvidia-smi printed {len(parts)} values for {len(fields)} fields: {line!r}")
        rows.append(dict(zip(fields, parts, strict=True)))
    return rows


def agree(smi: str, value: Any, rule: FieldRule) -> tuple[bool, str]:
    """Whether nvidia-smi's text and the snapshot's value say the same, and why not."""
    smi_na, nvml_na = smi_unavailable(smi), value is None or is_unavailable(value)
    if smi_na or nvml_na:
        if smi_na and nvml_na:
            return True, ""
        return False, "missing on one side only"
    if rule.kind == "bus_id":
        return nvml.normalise_bus_id(smi) == value, ""
    if rule.kind == "text":
        return smi == value, ""
    try:
        number = float(smi)
    except ValueError:
        return False, "nvidia-smi's value is not a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False, "NVML's value is not a number"
    if rule.tolerance is None:
        return number == value, ""
    if rule.tolerance.allows(number, value):
        return True, ""
    return False, f"beyond {rule.tolerance.describe(rule.unit)}"


def compare_gpu_fields(csv_text: str, snap: dict[str, Any]) -> list[FieldComparison]:
    """``nvidia-smi --query-gpu=<GPU_QUERY>`` output against the snapshot, GPU by GPU (joined on the physical
    index, which both number in PCI bus order)."""
    gpus = {g["index"]: g for g in snap.get("gpus", [])}
    comparisons = []
    seen = set()
    for row in parse_csv(csv_text, GPU_QUERY):
        index = int(row["index"])
        seen.add(index)
        gpu = gpus.get(index)
        if gpu is None:
            comparisons.append(FieldComparison(index, "index", row["index"], None, False, "only nvidia-smi lists it"))
            continue
        for name, rule in GPU_FIELD_RULES.items():
            value = gpu[rule.nvml_field] if rule.nvml_field in gpu else snap.get(rule.nvml_field)
            comparisons.append(FieldComparison(index, name, row[name], value, *agree(row[name], value, rule)))
    for index in sorted(set(gpus) - seen):
        comparisons.append(FieldComparison(index, "index", "", index, False, "only NVML lists it"))
    return comparisons


def compare_cuda_version(smi_text: str, snap: dict[str, Any]) -> FieldComparison:
    """The "CUDA Version: 12.4" of nvidia-smi's header against the snapshot's cuda_driver_version."""
    match = CUDA_VERSION.search(smi_text)
    smi = match.group(1) if match else "[not printed]"
    value = snap.get("cuda_driver_version")
    return FieldComparison(None, "CUDA Version", smi, value, *agree(smi, value, FieldRule("cuda_driver_version")))


def same_process_name(smi_name: str, comm: str | None) -> bool:
    """nvidia-smi shows a path or argv[0]; /proc's comm is the executed file's name cut to 15 characters.
    One may also be the other's prefix (``python3`` run as ``/usr/bin/python3.12``)."""
    if smi_unavailable(smi_name) or comm is None:
        return smi_unavailable(smi_name) and comm is None
    base = os.path.basename(smi_name.split(" ")[0])[:15]
    return base.startswith(comm) or comm.startswith(base)


def compare_processes(csv_text: str, snap: dict[str, Any]) -> list[FieldComparison]:
    """``nvidia-smi --query-compute-apps=<APPS_QUERY>`` output against the snapshot's process lists, joined on
    (GPU UUID, pid)."""
    rows = {(r["gpu_uuid"], int(r["pid"])): r for r in parse_csv(csv_text, APPS_QUERY)}
    index_by_uuid = {g["uuid"]: g["index"] for g in snap.get("gpus", []) if isinstance(g["uuid"], str)}
    entries = {}
    comparisons = []
    for gpu in snap.get("gpus", []):
        if is_unavailable(gpu["processes"]):
            listed = sum(1 for uuid, _ in rows if uuid == gpu["uuid"])
            comparisons.append(FieldComparison(gpu["index"], "processes", f"{listed} listed", gpu["processes"],
                                               listed == 0, "NVML gives no process list" if listed else ""))
            continue
        for entry in gpu["processes"]:
            entries[(gpu["uuid"], entry["pid"])] = entry
    for key in sorted(set(rows) | set(entries), key=lambda k: (str(k[0]), k[1])):
        uuid, pid = key
        row, entry, index = rows.get(key), entries.get(key), index_by_uuid.get(uuid)
        if row is None or entry is None:
            side = "NVML" if row is None else "nvidia-smi"
            comparisons.append(FieldComparison(index, f"pid {pid}", "" if row is None else row["used_memory"],
                                               entry and entry["used_mib"], False, f"only {side} lists it"))
            continue
        comparisons.append(FieldComparison(index, f"pid {pid} used_memory", row["used_memory"], entry["used_mib"],
                                           *agree(row["used_memory"], entry["used_mib"], PROCESS_MEMORY_RULE)))
        name_ok = same_process_name(row["process_name"], entry["name"])
        comparisons.append(FieldComparison(index, f"pid {pid} process_name", row["process_name"], entry["name"],
                                           name_ok, "" if name_ok else "names differ"))
    return comparisons


def comparison_result(check: str, comparisons: list[FieldComparison], summary: str) -> CheckResult:
    failures = [c for c in comparisons if not c.ok]
    data = {"comparisons": [asdict(c) for c in comparisons]}
    if failures:
        return CheckResult(check, "nvml", FAILED, "; ".join(c.describe() for c in failures), data)
    return CheckResult(check, "nvml", PASSED, summary, data)


def gpu_fields_summary(comparisons: list[FieldComparison]) -> str:
    gpus = sorted({c.gpu for c in comparisons})
    both_na = sorted({c.field for c in comparisons if smi_unavailable(c.smi)})
    tolerances = ", ".join(f"{name} {rule.tolerance.describe(rule.unit)}" for name, rule in GPU_FIELD_RULES.items()
                           if rule.tolerance)
    na = f"; n/a in both: {', '.join(both_na)}" if both_na else ""
    return f"{len(gpus)} GPU(s) × {len(GPU_FIELD_RULES)} fields agree ({tolerances}; the rest exact){na}"


# ---- process attribution and numbering (pure: reports and snapshot dicts in, problems out) ----------

def find_process(snap: dict[str, Any], pid: int) -> tuple[int, dict[str, Any]] | None:
    """(GPU index, entry) of ``pid`` in a snapshot dict, or None."""
    for gpu in snap.get("gpus", []):
        if isinstance(gpu["processes"], list):
            for entry in gpu["processes"]:
                if entry["pid"] == pid:
                    return gpu["index"], entry
    return None


def attribution_problems(snap: dict[str, Any], pid: int, *, name: str | None, user: str | None,
                         block_mib: int = BLOCK_MIB, allowance_mib: int = CONTEXT_ALLOWANCE_MIB) -> list[str]:
    """What is wrong with how ``snap`` (taken by another process) shows the process ``pid`` that holds a
    ``block_mib`` allocation: it must be listed with its name, user and the block plus at most the allowance."""
    found = find_process(snap, pid)
    if found is None:
        listed = sorted(e["pid"] for g in snap.get("gpus", []) if isinstance(g["processes"], list)
                        for e in g["processes"])
        return [f"pid {pid} is not in NVML's process lists (pids listed: {listed}); in a container NVML reports "
                "host pids, which this process cannot match to its own"]
    _, entry = found
    problems = []
    if entry["name"] != name:
        problems.append(f"name {entry['name']!r}, expected {name!r}")
    if entry["user"] != user:
        problems.append(f"user {entry['user']!r}, expected {user!r}")
    used = entry["used_mib"]
    if used is None or not block_mib <= used <= block_mib + allowance_mib:
        problems.append(f"{used} MiB used, expected {block_mib} to {block_mib + allowance_mib} MiB")
    return problems


def self_marking_problems(own: dict[str, Any], pid: int, other: dict[str, Any], other_pid: int) -> list[str]:
    """``own`` was taken by process ``pid``, ``other`` by process ``other_pid`` while ``pid`` held GPU memory:
    each marks its own pid as is_self, if listed, and nothing else."""
    problems = []
    found = find_process(own, pid)
    if found is None:
        problems.append(f"the process's own snapshot does not list its pid {pid}")
    elif found[1]["is_self"] is not True:
        problems.append(f"the process's own snapshot has is_self={found[1]['is_self']!r} for pid {pid}")
    for gpu in own.get("gpus", []):
        for entry in gpu["processes"] if isinstance(gpu["processes"], list) else ():
            if entry["is_self"] and entry["pid"] != pid:
                problems.append(f"its own snapshot also marks pid {entry['pid']} as is_self")
    for gpu in other.get("gpus", []):
        for entry in gpu["processes"] if isinstance(gpu["processes"], list) else ():
            if entry["is_self"] and entry["pid"] != other_pid:
                problems.append(f"the snapshot of pid {other_pid} marks pid {entry['pid']} as is_self")
    return problems


def numbering_problems(report: dict[str, Any], index: int, snap: dict[str, Any]) -> list[str]:
    """What is wrong with a child that ran ``configure(visible=str(index))`` and then started CUDA: its
    environment, how many devices CUDA saw, and device 0's PCI bus id against NVML's GPU ``index``."""
    env = report.get("env", {})
    problems = []
    if env.get("CUDA_VISIBLE_DEVICES") != str(index):
        problems.append(f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r}, expected {str(index)!r}")
    if env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        problems.append(f"CUDA_DEVICE_ORDER={env.get('CUDA_DEVICE_ORDER')!r}, expected 'PCI_BUS_ID'")
    if report.get("device_count") != 1:
        problems.append(f"CUDA sees {report.get('device_count')} devices, expected 1")
    gpu = next((g for g in snap.get("gpus", []) if g["index"] == index), None)
    expected = gpu["pci_bus_id"] if gpu else None
    got = nvml.normalise_bus_id(report["bus_id"]) if report.get("bus_id") else None
    if got is None or got != expected:
        problems.append(f"CUDA device 0 is at PCI {got}, NVML's GPU {index} at {expected}")
    return problems


# ---- the field signature: types and N/A of every snapshot field --------------------------------------

NA_PREFIX = "n/a:"
PROCESS_ENTRY = "gpus[].processes[]."

# The fake GPU the real driver is compared with: every field the fake can report is set (an absent one would
# read as not supported) and the reading process holds memory on it, as the attribution child does. Its
# figures are the fake's, not any real GPU's: only their types matter here.
FAKE_REFERENCE_CONFIG: dict[str, Any] = {
    "driver_version": "550.54.15",
    "cuda_driver_version": 12040,
    "gpus": [{
        "name": "Fake GPU for the fidelity check",
        "uuid": "GPU-00000000-0000-4000-8000-00000000f1de",
        "pci_bus_id": "00000000:18:00.0",
        "memory_total": 81920 * MIB,
        "memory_used": 1536 * MIB,
        "memory_reserved": 569 * MIB,
        "utilization_gpu": 3,
        "utilization_memory": 1,
        "temperature": 34,
        "power_mw": 71250,
        "power_limit_mw": 700000,
        "processes": [{"pid": "self", "used": 1536 * MIB}],
    }],
}


def field_signature(snap: dict[str, Any], pids: Collection[int] = ()) -> dict[str, str]:
    """Field path -> what the values there are: "int", "float", "str", "bool", "null", "list", or
    "n/a:<reason>" for an Unavailable; several joined by "|". GPUs are merged. Process entries count only
    for ``pids`` (processes the check started), so other users' processes do not change the signature."""
    kinds: dict[str, set[str]] = {}

    def note(path: str, value: Any) -> None:
        if is_unavailable(value):
            kinds.setdefault(path, set()).add(NA_PREFIX + value["unavailable"])
        elif isinstance(value, dict):
            for key, item in value.items():
                note(f"{path}.{key}" if path else key, item)
        elif isinstance(value, list):
            kinds.setdefault(path, set()).add("list")
            for item in value:
                if not path.endswith("processes") or item.get("pid") in pids:
                    note(path + "[]", item)
        else:
            kinds.setdefault(path, set()).add("null" if value is None else type(value).__name__)

    note("", snap)
    return {path: "|".join(sorted(names)) for path, names in sorted(kinds.items())}


def compare_signatures(real: dict[str, str], fake: dict[str, str]) -> tuple[list[str], list[str]]:
    """(differences, paths not compared). Process entry fields are compared only where both sides have an
    entry: without PyTorch or CuPy the real run has no process of its own on the GPU."""
    differences, skipped = [], []
    for path in sorted(set(real) | set(fake)):
        mine, theirs = real.get(path), fake.get(path)
        if mine == theirs:
            continue
        if (mine is None or theirs is None) and path.startswith(PROCESS_ENTRY):
            skipped.append(path)
        else:
            differences.append(f"{path}: real {mine or 'absent'}, fake {theirs or 'absent'}")
    return differences, skipped


def signature_document(signature: dict[str, str], snap: nvml.NvmlSnapshot, real: bool) -> dict[str, Any]:
    """What --signature-out writes (and benchmarks/gpu_field_signature.json holds once a real run made it)."""
    try:
        from importlib.metadata import version

        binding = version("nvidia-ml-py")
    except Exception:
        binding = None
    return {
        "from_real_hardware": real,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "gpus": [g.name for g in snap.gpus if isinstance(g.name, str)],
        "driver_version": nvml.to_jsonable(snap.driver_version),
        "cuda_driver_version": nvml.to_jsonable(snap.cuda_driver_version),
        "nvml_library": loaded_nvml_library(),
        "nvidia_ml_py": binding,
        "signature": signature,
    }


def loaded_nvml_library() -> str | None:
    """The libnvidia-ml file this process loaded (after a snapshot): the driver's, or a test's fake."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libnvidia-ml" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


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
from tfgpu_magic import nvml
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
from tfgpu_magic import nvml
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


# ---- the checks -------------------------------------------------------------------------------------

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


def _smi_failure(check: str, exc: Exception) -> CheckResult:
    return CheckResult(check, "nvml", NOT_RUN if isinstance(exc, NvidiaSmiMissing) else FAILED,
                       f"not run: {exc}" if isinstance(exc, NvidiaSmiMissing) else str(exc))


def check_gpu_fields(budget: Budget) -> tuple[list[CheckResult], dict[str, Any]]:
    """The GPU fields and the CUDA version, each against a snapshot taken right after nvidia-smi answered."""
    try:
        fields_text = nvidia_smi(f"--query-gpu={','.join(GPU_QUERY)}", CSV_FORMAT, budget=budget)
        snap = nvml.snapshot().to_dict()
        header = nvidia_smi(budget=budget)
    except (NvidiaSmiMissing, NvidiaSmiFailed) as exc:
        return [_smi_failure(CHECK_GPU_FIELDS, exc), _smi_failure(CHECK_CUDA, exc)], nvml.snapshot().to_dict()
    try:
        comparisons = compare_gpu_fields(fields_text, snap)
        fields = comparison_result(CHECK_GPU_FIELDS, comparisons, gpu_fields_summary(comparisons))
    except ValueError as exc:
        fields = CheckResult(CHECK_GPU_FIELDS, "nvml", FAILED, str(exc))
    cuda = compare_cuda_version(header, snap)
    versions = comparison_result(CHECK_CUDA, [cuda], f"both say {cuda.smi}")
    return [fields, versions], snap


def check_processes(snap: dict[str, Any], apps_text: str, context: str) -> CheckResult:
    try:
        comparisons = compare_processes(apps_text, snap)
    except ValueError as exc:
        return CheckResult(CHECK_APPS, "nvml", FAILED, str(exc))
    listed = len({c.field.split()[1] for c in comparisons if c.field.startswith("pid ")})
    return comparison_result(CHECK_APPS, comparisons, f"{listed} process(es) agree in pid, GPU, memory "
                             f"({PROCESS_MEMORY_RULE.tolerance.describe('MiB')}) and name; {context}")


def check_attribution(budget: Budget) -> tuple[list[CheckResult], dict[str, Any] | None, int | None]:
    """The process comparison, attribution and is_self (in table order), while a child holds GPU memory. Also
    returns this process's snapshot and the child's pid, for the field signature."""
    with memory_holder(budget) as child:
        if "pid" not in child:
            why = child.get("not_run") or child.get("error")
            ran = "not_run" not in child
            result, detail = (FAILED, f"the child failed: {why}") if ran else (NOT_RUN, f"not run: {why}")
            rows = [CheckResult(CHECK_ATTRIBUTION, "nvml", result, detail),
                    CheckResult(CHECK_SELF, "nvml", result, detail)]
            try:
                apps = nvidia_smi(f"--query-compute-apps={','.join(APPS_QUERY)}", CSV_FORMAT, budget=budget)
            except (NvidiaSmiMissing, NvidiaSmiFailed) as exc:
                return [_smi_failure(CHECK_APPS, exc), *rows], None, None
            context = f"no process of this check was on the GPU ({why})"
            return [check_processes(nvml.snapshot().to_dict(), apps, context), *rows], None, None
        pid = child["pid"]
        parent = nvml.snapshot().to_dict()
        try:
            apps = nvidia_smi(f"--query-compute-apps={','.join(APPS_QUERY)}", CSV_FORMAT, budget=budget)
            apps_error = None
        except (NvidiaSmiMissing, NvidiaSmiFailed) as exc:
            apps, apps_error = "", exc
            apps_snap = parent
        else:
            apps_snap = nvml.snapshot().to_dict()
    name = os.path.basename(sys.executable)[:15]  # the child's comm: the executed file's name
    user = pwd.getpwuid(os.getuid()).pw_name
    data = {"backend": child["backend"], "pid": pid, "entry": (find_process(parent, pid) or (None, None))[1]}
    problems = attribution_problems(parent, pid, name=name, user=user)
    if problems:
        attribution = CheckResult(CHECK_ATTRIBUTION, "nvml", FAILED, "; ".join(problems), data)
    else:
        index, entry = find_process(parent, pid)
        attribution = CheckResult(CHECK_ATTRIBUTION, "nvml", PASSED,
                                  f"pid {pid} ({entry['name']}, user {entry['user']}) holds {entry['used_mib']} "
                                  f"MiB on GPU {index} for a {BLOCK_MIB} MiB block ({child['backend']}); "
                                  f"allowed up to {CONTEXT_ALLOWANCE_MIB} MiB more for the CUDA context", data)
    problems = self_marking_problems(child["snapshot"], pid, parent, os.getpid())
    marking = CheckResult(CHECK_SELF, "nvml", FAILED if problems else PASSED, "; ".join(problems) or
                          f"the child's own snapshot marks its pid {pid} and nothing else; this process's snapshot "
                          "does not mark it")
    if apps_error is not None:
        processes = _smi_failure(CHECK_APPS, apps_error)
    else:
        processes = check_processes(apps_snap, apps, f"taken while this check's child held {BLOCK_MIB} MiB")
    return [processes, attribution, marking], parent, pid


def check_numbering(snap: dict[str, Any], budget: Budget) -> CheckResult:
    count = len(snap.get("gpus", []))
    index = count - 1  # the last GPU: index 0 would pass even if the setting were ignored
    report = run_child(NUMBERING_CHILD, budget, str(index))
    one_gpu = " (this machine has one GPU, so only index 0 could be tested)" if count == 1 else ""
    if "not_run" in report:
        env = ", ".join(f"{k}={v}" for k, v in report.get("env", {}).items())
        return CheckResult(CHECK_NUMBERING, "nvml", NOT_RUN, f"not run: {report['not_run']} (configure set {env})",
                           report)
    if "error" in report:
        return CheckResult(CHECK_NUMBERING, "nvml", FAILED, f"the child failed: {report['error']}", report)
    problems = numbering_problems(report, index, snap)
    if problems:
        return CheckResult(CHECK_NUMBERING, "nvml", FAILED, "; ".join(problems) + one_gpu, report)
    return CheckResult(CHECK_NUMBERING, "nvml", PASSED,
                       f"configure(visible=\"{index}\") set CUDA_VISIBLE_DEVICES={index} and CUDA_DEVICE_ORDER="
                       f"PCI_BUS_ID; {report['backend']} sees one device at PCI {report['bus_id']}, NVML's GPU "
                       f"{index}{one_gpu}", report)


def check_fidelity(real: dict[str, str], real_hardware: bool, budget: Budget) -> CheckResult:
    """The real snapshot's field signature against the fake library's, built here with gcc when there is one."""
    note = "" if real_hardware else " (this run read the fake library itself, so this only exercises the check)"
    tests_dir = str(REPO / "tests")
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    try:
        from fakenvml import FakeNvmlUnavailable, build_fake_nvml, fake_env, write_config
    except ImportError as exc:
        return CheckResult(CHECK_FIDELITY, "nvml", NOT_RUN, f"not run: tests/fakenvml is not here ({exc}); the real "
                           "signature is in the JSON (field_signature) for tests/test_gpu_check.py")
    with tempfile.TemporaryDirectory(prefix="gpu-check-fakenvml-") as folder:
        try:
            library = build_fake_nvml(folder)
        except FakeNvmlUnavailable as exc:
            return CheckResult(CHECK_FIDELITY, "nvml", NOT_RUN, f"not run: {exc}; the real signature is in the "
                               "JSON (field_signature) for tests/test_gpu_check.py")
        except subprocess.CalledProcessError as exc:
            return CheckResult(CHECK_FIDELITY, "nvml", FAILED, f"the fake did not compile: {_last_line(exc.stderr)}")
        config = write_config(Path(folder) / "reference.cfg", FAKE_REFERENCE_CONFIG)
        report = run_child(SIGNATURE_CHILD, budget, env=fake_env(library.parent, config, base=child_env()))
    if "error" in report:
        return CheckResult(CHECK_FIDELITY, "nvml", FAILED, f"the fake's child failed: {report['error']}")
    fake = field_signature(report["snapshot"], {report["pid"]})
    differences, skipped = compare_signatures(real, fake)
    data = {"fake_signature": fake, "differences": differences, "not_compared": skipped}
    if differences:
        return CheckResult(CHECK_FIDELITY, "nvml", FAILED, "; ".join(differences) + note, data)
    unchecked = "; process entry fields not compared (no process of this check on the GPU)" if skipped else ""
    return CheckResult(CHECK_FIDELITY, "nvml", PASSED,
                       f"{len(real)} fields: same types and N/A reasons{unchecked}{note}", data)


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
TF_CHECKS = tuple(f"TensorFlow: {name}" for name in CHECKS)


def tensorflow_checks(budget: Budget) -> list[CheckResult]:
    """The TensorFlow checks, each in a fresh process; only where TensorFlow imports and lists a GPU."""
    probe = run_child(TF_PROBE, budget)
    if "error" in probe:
        why = f"import tensorflow failed: {probe['error']}"
    elif not probe["installed"]:
        why = "TensorFlow is not installed"
    elif probe["gpus"] == 0:
        why = f"TensorFlow {probe['version']} is installed and lists no GPU"
    else:
        why = None
    if why is not None:
        return [CheckResult(name, "tensorflow", NOT_RUN, f"not run: {NO_TF_CUDA} ({why})") for name in TF_CHECKS]
    results = []
    for name, code in zip(TF_CHECKS, CHECKS.values(), strict=True):
        if budget.spent():
            results.append(CheckResult(name, "tensorflow", NOT_RUN, "not run: the run's time budget was spent"))
            continue
        outcome = run_child(CHILD_PRELUDE + textwrap.dedent(code), budget, cap=120)
        if "error" in outcome:
            results.append(CheckResult(name, "tensorflow", FAILED, f"the child failed: {outcome['error']}"))
        else:
            results.append(CheckResult(name, "tensorflow", PASSED if outcome["ok"] else FAILED, outcome["detail"]))
    return results


def run_checks(snap: nvml.NvmlSnapshot, budget: Budget) -> tuple[list[CheckResult], dict[str, Any]]:
    """Every check, in table order, and the field signature record for the JSON."""
    fields, snap_dict = check_gpu_fields(budget)
    processes, parent, child_pid = check_attribution(budget)
    real_hardware = FAKE_NVML_CONFIG_ENV not in os.environ
    signature = field_signature(parent or snap_dict, {child_pid} if child_pid else ())
    results = [*fields, *processes, check_numbering(snap_dict, budget),
               check_fidelity(signature, real_hardware, budget), *tensorflow_checks(budget)]
    return results, signature_document(signature, snap, real_hardware)


def render_table(results: Sequence[CheckResult]) -> str:
    lines = ["| check | result | detail |", "|---|---|---|"]
    for r in results:
        detail = r.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.check} | {r.result} | {detail} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--signature-out", metavar="PATH",
                        help="write the snapshot's field signature to PATH (benchmarks/gpu_field_signature.json "
                        "after a run on real hardware)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    budget = Budget(TIME_BUDGET_S)

    snap = nvml.snapshot()
    print(f"# GPU check on {platform.node()} ({platform.machine()}, Python {platform.python_version()})")
    signature = None
    if not snap.available or not snap.gpus:
        why = snap.error.detail if snap.error else "NVML reports no GPU"
        print(f"no GPU: {why}. Nothing to check here; the GPU paths are checked call by call in "
              "tests/test_gpu_paths.py.")
        # The reason is on the line above (and in the JSON's "nvml"): not repeated in every row.
        results = [CheckResult(name, "nvml", NOT_RUN, "not run: no GPU") for name in NVML_CHECKS]
        results += [CheckResult(name, "tensorflow", NOT_RUN, "not run: no GPU") for name in TF_CHECKS]
    else:
        print(f"driver {snap.driver_version}, CUDA {snap.cuda_driver_version}; GPUs: "
              + "; ".join(f"{g.index}: {g.name}, {g.memory_total_mib} MiB" for g in snap.gpus))
        results, signature = run_checks(snap, budget)
    print()
    print(render_table(results), flush=True)

    status = 1 if any(r.result == FAILED for r in results) else 0
    if args.json:
        document = {
            "host": platform.node(),
            "python": platform.python_version(),
            "seconds": round(time.monotonic() - started, 1),
            "nvml": {"available": snap.available, "error": nvml.to_jsonable(snap.error),
                     "library": loaded_nvml_library(), "driver_version": nvml.to_jsonable(snap.driver_version),
                     "cuda_driver_version": nvml.to_jsonable(snap.cuda_driver_version),
                     "gpus": [nvml.to_jsonable(g.name) for g in snap.gpus]},
            "checks": [asdict(r) for r in results],
            "field_signature": signature,
            "exit_status": status,
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    if args.signature_out and signature is not None:
        Path(args.signature_out).write_text(json.dumps(signature, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
