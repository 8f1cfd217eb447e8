"""Text NVML hands back that is not valid UTF-8 (a GPU name, UUID, PCI bus id, the driver version), through the
real pynvml and the fake libnvidia-ml.so.1: the bad field alone becomes unavailable, every other field and GPU
stays in view. Also how the text view words what is missing: a GPU count that could not be read, an
unavailable process list or memory figure."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from fakenvml import expected_gpu, three_gpus, with_changes, without_owner
from harness import SHELL_PRELUDE

from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.nvml import Gpu, NvmlSnapshot, Unavailable
from tfgpu_magic.render.snapshot import take
from tfgpu_magic.render.text import gpu_lines

# Bytes no UTF-8 decoder accepts: 0xFF never occurs in UTF-8; 0xC3 must be followed by a continuation byte.
BAD = {
    "name": b"NVIDIA H100 \xff\xfe 80GB",
    "uuid": b"GPU-9f3a6b21-\xc3(-4d5e",
    "pci_bus_id": b"00000000:3B:00.0\xff",
}
BAD_DRIVER = b"550.\xff54"
GOOD_NAMES = ("NVIDIA A100-SXM4-40GB", "Tesla T4")  # GPUs 0 and 2 of three_gpus(); GPU 1 gets the bad field


def bad_config(field: str) -> dict:
    return {**with_changes(three_gpus(), gpu1={field: BAD[field]}), "driver_version": BAD_DRIVER}


def assert_not_utf8(value, raw: bytes):
    assert isinstance(value, dict) and value["unavailable"] == "error", value
    assert "not valid UTF-8" in value["detail"], value
    assert repr(raw) in value["detail"], value  # the bytes themselves, so a bug report can quote them


@pytest.mark.parametrize("field", list(BAD))
def test_a_bad_string_is_that_field_only(fake_nvml, field):
    config = bad_config(field)
    fake_nvml.write(config)
    pid, (snap,) = fake_nvml.snapshots()

    assert snap["available"] is True and snap["error"] is None
    assert_not_utf8(snap["driver_version"], BAD_DRIVER)
    assert snap["cuda_driver_version"] == "12.4"
    assert len(snap["gpus"]) == 3
    gpu0, gpu1, gpu2 = (without_owner(g) for g in snap["gpus"])
    assert gpu0 == expected_gpu(config, 0, pid) and gpu2 == expected_gpu(config, 2, pid)
    assert_not_utf8(gpu1[field], BAD[field])
    assert gpu1["error"] is None
    expected = expected_gpu(config, 1, pid)
    assert {k: v for k, v in gpu1.items() if k != field} == {k: v for k, v in expected.items() if k != field}


def test_cli_shows_the_good_gpus(fake_nvml):
    fake_nvml.write(bad_config("name"))
    runs = {}
    for args in (("status",), ("status", "--json")):
        proc = subprocess.run([sys.executable, "-m", "tfgpu_magic", *args], capture_output=True, text=True,
                              env=fake_nvml.env, timeout=60)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        runs[args] = proc.stdout
    text = runs[("status",)]
    assert all(name in text for name in GOOD_NAMES), text
    assert "NVML, driver version: the driver returned bytes that are not valid UTF-8" in text  # named once
    data = json.loads(runs[("status", "--json")])
    assert [g["name"] for g in data["gpus"]][::2] == list(GOOD_NAMES)
    assert_not_utf8(data["gpus"][1]["name"], BAD["name"])


def test_magics_show_the_good_gpus_without_a_traceback(fake_nvml):
    fake_nvml.write(bad_config("uuid"))
    proc = fake_nvml.run_python(SHELL_PRELUDE + """
for line in ("%tfgpu status", "%tfgpu devices"):
    print("CELL", line)
    assert cell(line).success
""")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    for shown in proc.stdout.split("CELL")[1:]:
        assert all(name in shown for name in GOOD_NAMES), shown
        assert "NVIDIA H100 80GB HBM3" in shown  # GPU 1 itself: only its uuid is bad


def test_a_gpu_count_that_cannot_be_read_says_so(fake_nvml):
    fake_nvml.write({**three_gpus(), "errors": {"nvmlDeviceGetCount_v2": "NO_PERMISSION"}})
    proc = subprocess.run([sys.executable, "-m", "tfgpu_magic", "status"], capture_output=True, text=True,
                          env=fake_nvml.env, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("GPUs (NVML"))
    assert "GPU count" in line and "Insufficient Permissions" in line, line
    assert "none" not in line


# ---- the text view of fields that are missing (in-process, over an in-memory NVML snapshot) ----

def gpu_text(**fields) -> str:
    gpu = Gpu(index=0, name="NVIDIA L4", uuid="GPU-00000000-fake", pci_bus_id="00000000:01:00.0",
              memory_total_mib=23034, memory_used_mib=1000, memory_free_mib=22034, memory_reserved_mib=0,
              utilization_gpu_pct=12, utilization_memory_pct=5, temperature_c=40, power_w=20.0)
    gpu = dataclasses.replace(gpu, **fields)
    nvml = NvmlSnapshot(available=True, driver_version="550.54", cuda_driver_version="12.4", gpus=(gpu,))
    controller = Controller(environ={}, nvml_snapshot=lambda: nvml)
    lines = gpu_lines(take(controller))
    return lines[2]  # the head, the table's header, GPU 0's row


def test_an_unavailable_process_list_is_named_once():
    no_list = Unavailable("not_supported", "processes: Not Supported")
    row = gpu_text(processes=no_list)
    assert row.count("processes") == 1 and row.endswith("n/a (processes: Not Supported)"), row


def test_unavailable_memory_and_utilization_carry_no_unit():
    denied = Unavailable("no_permission", "memory: Insufficient Permissions")
    row = gpu_text(memory_total_mib=denied, memory_used_mib=denied, memory_free_mib=denied,
                   memory_reserved_mib=denied, utilization_gpu_pct=Unavailable("not_supported", "utilization: x"))
    assert row.count("memory: Insufficient Permissions") == 1, row
    assert "MiB" not in row and "%" not in row, row
    partly = gpu_text(memory_used_mib=Unavailable("not_supported"))
    assert "n/a (not supported) / 23034 MiB" in partly, partly
    assert "1000 / 23034 MiB" in gpu_text() and "12%" in gpu_text()
