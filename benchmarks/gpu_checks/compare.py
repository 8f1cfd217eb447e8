"""The pure part of benchmarks/gpu_check.py: result types, nvidia-smi's CSV and the field rules, the
compare_* functions, the attribution and numbering problem finders and the field signature. Text and
``snapshot().to_dict()`` dicts in, comparisons and problems out: no processes, no clock."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tfgpu_magic.core import nvml

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"
MIB = 1 << 20
BLOCK_MIB = 1024  # what the attribution child allocates
CONTEXT_ALLOWANCE_MIB = 1024  # the CUDA context and the framework's kernels come on top of the block


@dataclass(frozen=True)
class CheckResult:
    check: str
    part: str  # "nvml" (no TensorFlow needed) or "tensorflow"
    result: str  # PASSED, FAILED or NOT_RUN
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


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
MIG_PROCESS_ENTRY = "gpus[].mig_devices[].processes[]."
MIG_DEVICE_ENTRY = "gpus[].mig_devices[]."

# The fake GPU the real driver is compared with: every field the fake can report is set (an absent one would
# read as not supported) and the reading process holds memory on it, as the attribution child does. Its
# figures are the fake's, not any real GPU's: only their types matter here. It supports MIG, with MIG off, as
# the data-centre GPUs these checks run on do (A100, H100, H200: mig_mode False); fake_reference_config()
# shapes it like a GPU without MIG (mig_mode None) or one in MIG mode when the real signature says so.
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
        "mig": {"mode": 0, "pending": 0},
    }],
}


def fake_reference_config(real: Mapping[str, str] | None = None) -> dict[str, Any]:
    """FAKE_REFERENCE_CONFIG with the MIG state of the GPU the ``real`` signature came from: no MIG at all
    (its mig_mode is only "null"), MIG off (the default), or MIG on with one MIG device (the real signature
    has MIG device fields). MIG support is the hardware's, not the adapter's, so it must not count as a
    difference; what the adapter makes of each state must."""
    config = copy.deepcopy(FAKE_REFERENCE_CONFIG)
    gpu = config["gpus"][0]
    real = real or {}
    if real.get("gpus[].mig_mode") == "null":
        del gpu["mig"]
    elif any(path.startswith(MIG_DEVICE_ENTRY) for path in real):
        gpu["mig"] = {"mode": 1, "pending": 1, "devices": [{
            "uuid": "MIG-00000000-0000-4000-8000-00000000f1de", "name": f"{gpu['name']} MIG 1g.10gb",
            "gpu_instance_id": 9, "compute_instance_id": 0, "memory_total": 9856 * MIB, "memory_used": 0,
            "memory_reserved": 0, "processes": [{"pid": "self", "used": 1536 * MIB}]}]}
    return config


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
        if (mine is None or theirs is None) and path.startswith((PROCESS_ENTRY, MIG_PROCESS_ENTRY)):
            skipped.append(path)
        else:
            differences.append(f"{path}: real {mine or 'absent'}, fake {theirs or 'absent'}")
    return differences, skipped
