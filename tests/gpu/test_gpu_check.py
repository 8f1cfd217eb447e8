"""benchmarks/gpu_check.py without a GPU: its comparisons against the fake NVML library (tests/support/fakenvml) and
nvidia-smi text from a fake (tests/support/fake_nvidia_smi.py), its attribution and numbering logic on snapshot
dicts, an end-to-end run against both fakes, and the clear "no GPU" report where there is no NVML at all.
The run on real hardware is described in docs/development.md ("GPU check")."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pwd
import subprocess
import sys

import fake_nvidia_smi
import pytest
from fakenvml import MIB, three_gpus, with_changes
from harness import ROOT, SUPPORT, tf_env

from tfgpu_magic.core import nvml

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
SIGNATURE_FILE = ROOT / "benchmarks" / "gpu_field_signature.json"


def _load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gpu_check = _load_script()


def _failures(comparisons):
    return [c for c in comparisons if not c.ok]


# ---- the script as a whole ---------------------------------------------------------------------------

def test_gpu_check_says_no_gpu_without_nvml(tmp_path):
    env = tf_env(LD_LIBRARY_PATH=str(tmp_path))  # an empty folder: no libnvidia-ml.so.1 to find
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", str(out)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "no GPU:" in proc.stdout and "not found" in proc.stdout
    rows = _table(proc.stdout)
    assert [r[0] for r in rows] == [*gpu_check.NVML_CHECKS, *gpu_check.TF_CHECKS]
    assert {r[1] for r in rows} == {"not run"}
    document = json.loads(out.read_text())
    assert [(c["check"], c["result"], c["detail"]) for c in document["checks"]] == [tuple(r) for r in rows]
    assert document["nvml"]["available"] is False and document["exit_status"] == 0


def _table(stdout: str) -> list[list[str]]:
    """The rows of the script's one table: [check, result, detail]."""
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert lines[0] == "| check | result | detail |"
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[1:]]


def _run_script(fake_nvml, tmp_path, config, override=None, fake_torch=False):
    """The script against the fake NVML (``config``) and a fake nvidia-smi first on PATH; with ``fake_torch``,
    a stand-in for PyTorch importable by its children."""
    fake_nvml.write(config)
    smi_dir = tmp_path / "bin"
    smi_dir.mkdir()
    fake_nvidia_smi.install(smi_dir, {"config": config, "override": override or {}})
    env = fake_nvml.env
    env["PATH"] = f"{smi_dir}{os.pathsep}{env['PATH']}"
    if fake_torch:
        torch_dir = tmp_path / "fake_torch"
        torch_dir.mkdir()
        (torch_dir / "torch.py").write_text(FAKE_TORCH)
        spec = {"tests_dir": str(SUPPORT), "smi_spec": str(smi_dir / "nvidia-smi.json"),
                "nvml_config": str(fake_nvml.config_path)}
        (tmp_path / "fake_torch.json").write_text(json.dumps(spec))
        env["FAKE_TORCH_SPEC"] = str(tmp_path / "fake_torch.json")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(torch_dir), env.get("PYTHONPATH")) if p)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", str(out)], capture_output=True, text=True,
                          env=env, timeout=150)
    return proc, _table(proc.stdout), json.loads(out.read_text())


def test_end_to_end_against_fake_nvml_and_fake_nvidia_smi(fake_nvml, tmp_path):
    proc, rows, document = _run_script(fake_nvml, tmp_path, three_gpus())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {check: (result, detail) for check, result, detail in rows}
    assert [r[0] for r in rows] == [*gpu_check.NVML_CHECKS, *gpu_check.TF_CHECKS]

    for check in (gpu_check.CHECK_GPU_FIELDS, gpu_check.CHECK_CUDA, gpu_check.CHECK_APPS):
        assert results[check][0] == "passed", results[check]
    assert results[gpu_check.CHECK_GPU_FIELDS][1].startswith("3 GPU(s) × 9 fields agree")
    assert results[gpu_check.CHECK_CUDA][1] == "both say 12.4"
    # GPU 0: pid 1 and a ghost; GPU 1: this script ("self") and a ghost whose memory NVML cannot attribute.
    assert results[gpu_check.CHECK_APPS][1].startswith("4 process(es) agree")

    # Neither PyTorch nor CuPy is installed here: the checks that start CUDA say so, never "passed".
    for check in (gpu_check.CHECK_ATTRIBUTION, gpu_check.CHECK_SELF):
        assert results[check] == ("not run", "not run: neither PyTorch nor CuPy is installed")
    numbering = results[gpu_check.CHECK_NUMBERING]
    assert numbering[0] == "not run"
    assert numbering[1] == ("not run: neither PyTorch nor CuPy is installed "
                            "(configure set CUDA_VISIBLE_DEVICES=2, CUDA_DEVICE_ORDER=PCI_BUS_ID)")

    fidelity = results[gpu_check.CHECK_FIDELITY]
    assert fidelity[0] == "passed" and "only exercises the check" in fidelity[1]

    for check in gpu_check.TF_CHECKS:  # TensorFlow here is the CPU build
        assert results[check][0] == "not run"
        assert results[check][1].startswith("not run: TensorFlow with CUDA is not installed here")

    assert [(c["check"], c["result"], c["detail"]) for c in document["checks"]] == [tuple(r) for r in rows]
    assert document["exit_status"] == 0
    assert document["nvml"]["gpus"] == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "Tesla T4"]
    signature = document["field_signature"]
    assert signature["from_real_hardware"] is False  # it read the fake
    assert signature["signature"]["gpus[].power_w"] == "float"
    assert document["seconds"] < 120


def test_end_to_end_a_disagreement_fails_the_run(fake_nvml, tmp_path):
    proc, rows, document = _run_script(fake_nvml, tmp_path, three_gpus(), override={"1": {"memory.total": "80000"}})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = {check: (result, detail) for check, result, detail in rows}
    assert results[gpu_check.CHECK_GPU_FIELDS] == (
        "failed", "GPU 1 memory.total: nvidia-smi '80000', NVML 81920")
    assert document["exit_status"] == 1


# A stand-in for the PyTorch calls the checks that start CUDA make. Allocating adds the process to the fake
# GPU's process list, in the fake NVML's config and the fake nvidia-smi's alike, as a real allocation shows in
# both; the entry goes when the process ends. Device 0 is the first GPU CUDA_VISIBLE_DEVICES names.
FAKE_TORCH = """
import atexit, json, os, sys, types

__version__ = "0.0+fake"
float32 = "float32"
CONTEXT_MIB = 500
with open(os.environ["FAKE_TORCH_SPEC"]) as f:
    _spec = json.load(f)
sys.path.insert(0, _spec["tests_dir"])
from fakenvml import MIB, write_config


def _load():
    with open(_spec["smi_spec"]) as f:
        return json.load(f)


def _save(smi):
    tmp = _spec["smi_spec"] + f".{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(smi, f)
    os.replace(tmp, _spec["smi_spec"])
    write_config(_spec["nvml_config"], smi["config"])


def _visible():
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = len(_load()["config"]["gpus"])
    return [int(i) for i in text.split(",")] if text is not None else list(range(count))


def _properties(ordinal):
    bus_id = _load()["config"]["gpus"][_visible()[ordinal]]["pci_bus_id"]
    domain, bus, rest = bus_id.split(":")
    return types.SimpleNamespace(pci_domain_id=int(domain, 16), pci_bus_id=int(bus, 16),
                                 pci_device_id=int(rest.split(".")[0], 16))


def _forget():
    smi = _load()
    for gpu in smi["config"]["gpus"]:
        gpu["processes"] = [p for p in gpu.get("processes", []) if p["pid"] != os.getpid()]
    _save(smi)


def ones(elements, dtype, device):
    smi = _load()
    gpu = smi["config"]["gpus"][_visible()[0]]
    gpu.setdefault("processes", []).append({"pid": os.getpid(), "used": elements * 4 + CONTEXT_MIB * MIB})
    _save(smi)
    atexit.register(_forget)


cuda = types.SimpleNamespace(is_available=lambda: True, synchronize=lambda: None,
                             device_count=lambda: len(_visible()), get_device_properties=_properties)
"""


def test_end_to_end_with_a_stand_in_for_pytorch(fake_nvml, tmp_path):
    """The checks that start CUDA, through FAKE_TORCH: the child's 1 GiB (plus a 500 MiB "context") shows
    in the fake NVML and the fake nvidia-smi, and configure(visible="2") makes device 0 the fake GPU 2."""
    proc, rows, document = _run_script(fake_nvml, tmp_path, three_gpus(), fake_torch=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {check: (result, detail) for check, result, detail in rows}
    for check in gpu_check.NVML_CHECKS:
        assert results[check][0] == "passed", (check, results[check])
    attribution = results[gpu_check.CHECK_ATTRIBUTION][1]
    user = pwd.getpwuid(os.getuid()).pw_name
    assert f"({os.path.basename(sys.executable)[:15]}, user {user}) holds 1524 MiB on GPU 0" in attribution
    assert results[gpu_check.CHECK_APPS][1].startswith("5 process(es) agree")
    assert "taken while this check's child held 1024 MiB" in results[gpu_check.CHECK_APPS][1]
    assert results[gpu_check.CHECK_NUMBERING][1] == (
        'configure(visible="2") set CUDA_VISIBLE_DEVICES=2 and CUDA_DEVICE_ORDER=PCI_BUS_ID; torch sees one '
        "device at PCI 0000:86:00.0, NVML's GPU 2")
    assert "not compared" not in results[gpu_check.CHECK_FIDELITY][1]  # the child's entry was compared too
    signature = document["field_signature"]["signature"]
    assert signature["gpus[].processes[].name"] == "str" and signature["gpus[].processes[].is_self"] == "bool"


# ---- nvidia-smi against the snapshot -----------------------------------------------------------------

def _gpu_comparisons(fake_nvml, config, override=None):
    fake_nvml.write(config)
    _, (snap,) = fake_nvml.snapshots()
    text = fake_nvidia_smi.gpu_csv(config, gpu_check.GPU_QUERY, override)
    return gpu_check.compare_gpu_fields(text, snap)


def test_gpu_fields_agree_with_the_fake_library(fake_nvml):
    comparisons = _gpu_comparisons(fake_nvml, three_gpus())
    assert len(comparisons) == 3 * len(gpu_check.GPU_FIELD_RULES)
    assert _failures(comparisons) == []
    assert gpu_check.gpu_fields_summary(comparisons).startswith("3 GPU(s) × 9 fields agree (memory.used ±256 MiB")


def test_gpu_field_mismatches_are_caught(fake_nvml):
    override = {"0": {"name": "NVIDIA A100-PCIE-40GB"}, "2": {"memory.total": "15361", "driver_version": "550.54.14"}}
    failures = _failures(_gpu_comparisons(fake_nvml, three_gpus(), override))
    assert [f.describe() for f in failures] == [
        "GPU 0 name: nvidia-smi 'NVIDIA A100-PCIE-40GB', NVML 'NVIDIA A100-SXM4-40GB'",
        "GPU 2 memory.total: nvidia-smi '15361', NVML 15360",
        "GPU 2 driver_version: nvidia-smi '550.54.14', NVML '550.54.15'",
    ]


@pytest.mark.parametrize("smi_text", ["[N/A]", "[Not Supported]"])
def test_power_not_available_on_both_sides_agrees(fake_nvml, smi_text):
    config = with_changes(three_gpus(), gpu2={"power_mw": None})  # the fake answers NOT_SUPPORTED
    comparisons = _gpu_comparisons(fake_nvml, config, {"2": {"power.draw": smi_text}})
    assert _failures(comparisons) == []
    power = next(c for c in comparisons if c.gpu == 2 and c.field == "power.draw")
    assert power.nvml["unavailable"] == "not_supported"
    assert "n/a in both: power.draw" in gpu_check.gpu_fields_summary(comparisons)


def test_not_available_on_one_side_only_is_a_mismatch(fake_nvml):
    config = with_changes(three_gpus(), gpu2={"power_mw": None})
    override = {"2": {"power.draw": "9.80"}, "1": {"power.draw": "[N/A]"}}
    failures = _failures(_gpu_comparisons(fake_nvml, config, override))
    assert [(f.gpu, f.field, f.why) for f in failures] == [
        (1, "power.draw", "missing on one side only"),
        (2, "power.draw", "missing on one side only"),
    ]


@pytest.mark.parametrize(("field", "text", "ok"), [
    ("temperature.gpu", "37", True),  # NVML 34, ±3 °C
    ("temperature.gpu", "38", False),
    ("power.draw", "96.25", True),  # NVML 71.25 W: 25 W is the larger bound here
    ("power.draw", "96.50", False),
    ("memory.used", "2304", True),  # NVML 2048 MiB, ±256 MiB
    ("memory.used", "2305", False),
    ("utilization.gpu", "18", True),  # NVML 3 %, ±15 points
    ("memory.total", "81919", False),  # exact
    ("pci.bus_id", "0000:3b:00.0", True),  # the short-domain, lower-case form of 00000000:3B:00.0
    ("pci.bus_id", "00000000:3C:00.0", False),
])
def test_tolerances_and_forms(fake_nvml, field, text, ok):
    comparisons = _gpu_comparisons(fake_nvml, three_gpus(), {"1": {field: text}})
    compared = next(c for c in comparisons if c.gpu == 1 and c.field == field)
    assert compared.ok is ok, compared.describe()
    assert len(_failures(comparisons)) == (0 if ok else 1)


def test_power_tolerance_is_relative_for_large_draws():
    rule = gpu_check.GPU_FIELD_RULES["power.draw"]
    assert gpu_check.agree("600", 700.0, rule) == (True, "")  # 20 % of 700 W is 140 W
    assert gpu_check.agree("550", 700.0, rule) == (False, "beyond ±max(25 W, 20%)")


def test_cuda_version_from_the_header():
    snap = {"cuda_driver_version": "12.4"}
    header = fake_nvidia_smi.header({"cuda_driver_version": 12040})
    assert gpu_check.compare_cuda_version(header, snap).ok
    assert not gpu_check.compare_cuda_version(header.replace("12.4", "12.5"), snap).ok
    assert gpu_check.compare_cuda_version("CUDA Version                              : 12.4", snap).ok  # nvidia-smi -q
    missing = {"cuda_driver_version": {"unavailable": "function_not_found", "detail": ""}}
    assert gpu_check.compare_cuda_version("no version here", missing).ok
    assert not gpu_check.compare_cuda_version("no version here", snap).ok


def test_processes_agree_with_the_fake_library(fake_nvml):
    # This test's own process stands on GPU 1, so it is alive when the fake nvidia-smi reads its name.
    pid = os.getpid()
    config = with_changes(three_gpus(), gpu1={"processes": [{"pid": pid, "used": 1024 * MIB},
                                                            {"pid": 3999902, "used": "unknown"}]})
    fake_nvml.write(config)
    _, (snap,) = fake_nvml.snapshots()
    text = fake_nvidia_smi.apps_csv(config, gpu_check.APPS_QUERY, self_pid=pid)
    comparisons = gpu_check.compare_processes(text, snap)
    assert _failures(comparisons) == []
    assert {c.field for c in comparisons} >= {f"pid {pid} used_memory", f"pid {pid} process_name",
                                              "pid 3999902 used_memory"}  # [N/A] in nvidia-smi, None in NVML

    lines = text.splitlines()
    missing = gpu_check.compare_processes("\n".join(lines[1:]), snap)  # nvidia-smi without pid 1
    assert [f.describe() for f in _failures(missing)] == ["GPU 0 pid 1: nvidia-smi '', NVML 1000 (only NVML lists it)"]
    grown = text.replace(", 1024, ", ", 1400, ")
    assert [(f.field, f.why) for f in _failures(gpu_check.compare_processes(grown, snap))] == [
        (f"pid {pid} used_memory", "beyond ±256 MiB")]


def test_process_names_nvidia_smi_may_print():
    assert gpu_check.same_process_name("/usr/bin/python3.12", "python3")
    assert gpu_check.same_process_name("python3", "python3.12")
    assert gpu_check.same_process_name("/opt/conda/bin/a-very-long-program-name", "a-very-long-pro")
    assert gpu_check.same_process_name("[N/A]", None)
    assert not gpu_check.same_process_name("/usr/bin/python3", "jupyter-lab")
    assert not gpu_check.same_process_name("python3", None)


def test_a_comma_in_a_process_name_stays_in_the_name():
    rows = gpu_check.parse_csv("42, my, odd name, 100, GPU-x\n", gpu_check.APPS_QUERY)
    assert rows == [{"pid": "42", "process_name": "my, odd name", "used_memory": "100", "gpu_uuid": "GPU-x"}]
    with pytest.raises(ValueError, match="4 values for 10 fields"):
        gpu_check.parse_csv("1, 2, 3, 4\n", gpu_check.GPU_QUERY)


# ---- attribution and numbering, on snapshot dicts -----------------------------------------------------

def _snap(*processes, bus_id="00000000:3B:00.0"):
    """A snapshot dict with one GPU listing ``processes`` (dicts of GpuProcess fields)."""
    return {"gpus": [{"index": 0, "pci_bus_id": bus_id, "processes": [
        {"pid": 0, "used_mib": None, "name": None, "user": None, "is_self": False, **p} for p in processes]}]}


def test_attribution_finds_the_child():
    child = {"pid": 4242, "used_mib": 1530, "name": "python3", "user": "alice"}
    snap = _snap({"pid": 17, "used_mib": 300, "name": "other", "user": "bob"}, child)
    assert gpu_check.attribution_problems(snap, 4242, name="python3", user="alice") == []


@pytest.mark.parametrize(("entry", "problem"), [
    ({"used_mib": 900}, "900 MiB used, expected 1024 to 2048 MiB"),  # less than the block: not its memory
    ({"used_mib": 2100}, "2100 MiB used, expected 1024 to 2048 MiB"),  # more than the context can explain
    ({"used_mib": None}, "None MiB used"),
    ({"user": "root"}, "user 'root', expected 'alice'"),
    ({"name": None}, "name None, expected 'python3'"),
])
def test_attribution_problems(entry, problem):
    snap = _snap({"pid": 4242, "used_mib": 1530, "name": "python3", "user": "alice", **entry})
    [found] = gpu_check.attribution_problems(snap, 4242, name="python3", user="alice")
    assert found.startswith(problem)


def test_attribution_of_a_pid_nvml_does_not_list_says_why():
    [problem] = gpu_check.attribution_problems(_snap({"pid": 98765, "used_mib": 1530}), 4242, name="p", user="u")
    assert problem.startswith("pid 4242 is not in NVML's process lists (pids listed: [98765]); in a container")


def test_is_self_only_in_the_process_itself():
    own = _snap({"pid": 4242, "is_self": True}, {"pid": 17})
    other = _snap({"pid": 4242}, {"pid": 17, "is_self": True})  # taken by pid 17, which is on the GPU too
    assert gpu_check.self_marking_problems(own, 4242, other, 17) == []
    assert gpu_check.self_marking_problems(own, 4242, _snap({"pid": 4242}), 99) == []  # 99 is not on the GPU
    assert gpu_check.self_marking_problems(_snap({"pid": 4242}), 4242, other, 17) == [
        "the process's own snapshot has is_self=False for pid 4242"]
    assert gpu_check.self_marking_problems(_snap({"pid": 4242, "is_self": True}, {"pid": 17, "is_self": True}),
                                           4242, other, 17) == ["its own snapshot also marks pid 17 as is_self"]
    assert gpu_check.self_marking_problems(own, 4242, _snap({"pid": 4242, "is_self": True}), 99) == [
        "the snapshot of pid 99 marks pid 4242 as is_self"]
    assert gpu_check.self_marking_problems(_snap({"pid": 17}), 4242, other, 17) == [
        "the process's own snapshot does not list its pid 4242"]


def test_numbering_logic():
    snap = _snap()
    report = {"env": {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "device_count": 1,
              "bus_id": "0000:3b:00.0"}  # as CuPy and the CUDA driver print it
    assert gpu_check.numbering_problems(report, 0, snap) == []
    wrong = {**report, "env": {"CUDA_VISIBLE_DEVICES": "1"}, "device_count": 2, "bus_id": "0000:86:00.0"}
    assert gpu_check.numbering_problems(wrong, 0, snap) == [
        "CUDA_VISIBLE_DEVICES='1', expected '0'",
        "CUDA_DEVICE_ORDER=None, expected 'PCI_BUS_ID'",
        "CUDA sees 2 devices, expected 1",
        "CUDA device 0 is at PCI 00000000:86:00.0, NVML's GPU 0 at 00000000:3B:00.0",
    ]


# ---- the field signature ------------------------------------------------------------------------------

def _fake_reference_signature(fake_nvml):
    fake_nvml.write(gpu_check.FAKE_REFERENCE_CONFIG)
    pid, (snap,) = fake_nvml.snapshots()
    return gpu_check.field_signature(snap, {pid})


def test_fake_field_signature_is_well_formed__real_comparison_waits_for_a_gpu_run(fake_nvml):
    """The fake's signature covers every snapshot field with the types the adapter promises. Comparing it
    with the real driver's needs benchmarks/gpu_field_signature.json from a GPU run (see the next test)."""
    signature = _fake_reference_signature(fake_nvml)
    gpu_fields = {f"gpus[].{f.name}" for f in dataclasses.fields(nvml.Gpu)}
    process_fields = {f"gpus[].processes[].{f.name}" for f in dataclasses.fields(nvml.GpuProcess)}
    top = {f.name for f in dataclasses.fields(nvml.NvmlSnapshot)}
    assert set(signature) == top | gpu_fields | process_fields
    ints = ("index", "memory_total_mib", "memory_used_mib", "memory_free_mib", "memory_reserved_mib",
            "memory_total_bytes", "memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes",
            "utilization_gpu_pct", "utilization_memory_pct", "temperature_c")
    assert {f: signature[f"gpus[].{f}"] for f in ints} == dict.fromkeys(ints, "int")
    assert signature["gpus[].power_w"] == "float"  # W, from mW
    assert signature["gpus[].name"] == signature["gpus[].uuid"] == signature["gpus[].pci_bus_id"] == "str"
    assert signature["gpus[].processes"] == signature["gpus"] == "list"
    assert signature["gpus[].error"] == signature["error"] == "null"
    assert {p: signature[p] for p in process_fields} == {
        "gpus[].processes[].pid": "int", "gpus[].processes[].used_mib": "int", "gpus[].processes[].name": "str",
        "gpus[].processes[].user": "str", "gpus[].processes[].is_self": "bool", "gpus[].processes[].type": "str",
        "gpus[].processes[].local_pid": "int", "gpus[].processes[].sm_pct": "int",
        "gpus[].processes[].used_bytes": "int"}
    assert signature["driver_version"] == signature["cuda_driver_version"] == "str"


def test_fake_field_signature_matches_the_real_drivers_once_a_gpu_run_recorded_it(fake_nvml):
    """Waits for a GPU run: benchmarks/gpu_field_signature.json must come from real hardware
    (``gpu_check.py --signature-out``); until then this test is skipped, never passed."""
    if not SIGNATURE_FILE.exists():
        pytest.skip("waits for a GPU run: benchmarks/gpu_field_signature.json has not been recorded yet")
    recorded = json.loads(SIGNATURE_FILE.read_text())
    if recorded.get("from_real_hardware") is not True:
        pytest.skip("waits for a GPU run: benchmarks/gpu_field_signature.json is not from real hardware")
    differences, _ = gpu_check.compare_signatures(recorded["signature"], _fake_reference_signature(fake_nvml))
    assert differences == []


def test_signature_na_reasons_and_merging():
    na = {"unavailable": "not_supported", "detail": "power: Not Supported"}
    snap = {"available": True, "gpus": [
        {"index": 0, "power_w": 71.5, "processes": [{"pid": 5, "used_mib": 10}, {"pid": 6, "used_mib": None}]},
        {"index": 1, "power_w": na, "processes": na},
    ]}
    assert gpu_check.field_signature(snap, {5}) == {
        "available": "bool", "gpus": "list", "gpus[].index": "int", "gpus[].power_w": "float|n/a:not_supported",
        "gpus[].processes": "list|n/a:not_supported", "gpus[].processes[].pid": "int",
        "gpus[].processes[].used_mib": "int"}  # pid 6 is not the check's: it does not count
    assert gpu_check.field_signature(snap, {5, 6})["gpus[].processes[].used_mib"] == "int|null"


def test_signature_comparison():
    real = {"gpus[].power_w": "float", "gpus[].temperature_c": "int", "gpus[].processes": "list"}
    fake = {**real, "gpus[].processes[].pid": "int"}
    assert gpu_check.compare_signatures(real, fake) == ([], ["gpus[].processes[].pid"])
    fake = {**fake, "gpus[].power_w": "n/a:not_supported", "gpus[].extra": "int"}
    assert gpu_check.compare_signatures(real, fake)[0] == [
        "gpus[].extra: real absent, fake int", "gpus[].power_w: real float, fake n/a:not_supported"]
