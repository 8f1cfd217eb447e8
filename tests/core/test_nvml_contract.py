"""Contract tests of tfgpu_magic.core.nvml: the real pynvml, in a subprocess, against the fake libnvidia-ml.so.1.

``fake_nvml.snapshots(n)`` takes n snapshots in one child and returns (child pid, their ``to_dict()``);
the tests compare those with the config the fake was given (``expected_gpu``).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys

import pytest
from fakenvml import MIB, expected_gpu, n_gpus, three_gpus, without_owner


def test_three_different_gpus_every_field(fake_nvml):
    config = three_gpus()
    fake_nvml.write(config)
    pid, (snap,) = fake_nvml.snapshots()

    assert snap["available"] is True
    assert snap["error"] is None
    assert snap["driver_version"] == "550.54.15"
    assert snap["cuda_driver_version"] == "12.4"
    assert [without_owner(g) for g in snap["gpus"]] == [expected_gpu(config, i, pid) for i in range(3)]


def test_figures_a_placement_plan_relies_on(fake_nvml):
    fake_nvml.write(three_gpus())
    _, (snap,) = fake_nvml.snapshots()
    gpus = snap["gpus"]
    assert [g["name"] for g in gpus] == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "Tesla T4"]
    freest = max(gpus, key=lambda g: g["memory_free_mib"])
    assert freest["index"] == 1
    assert freest["memory_total_mib"] == 81920 and freest["memory_total_mib"] // 4 == 20480
    # used + free + reserved add up to total: v2 reports reserved apart from used.
    for g in gpus:
        assert g["memory_used_mib"] + g["memory_free_mib"] + g["memory_reserved_mib"] == g["memory_total_mib"]


def test_processes_name_user_and_self(fake_nvml):
    fake_nvml.write(three_gpus())
    pid, (snap,) = fake_nvml.snapshots()
    by_pid = {p["pid"]: p for g in snap["gpus"] for p in g["processes"]}

    me = by_pid[pid]
    assert me["is_self"] is True
    assert me["used_mib"] == 1024
    assert me["name"] == os.path.basename(sys.executable)[:15]  # comm: the exec name, at most 15 chars
    assert me["user"] == pwd.getpwuid(os.getuid()).pw_name

    init = by_pid[1]  # a real process owned by someone: name and owner from /proc
    with open("/proc/1/comm") as f:
        assert init["name"] == f.read().strip()
    assert init["user"] == pwd.getpwuid(os.stat("/proc/1").st_uid).pw_name
    assert init["is_self"] is False

    ghost = by_pid[3999902]  # a host pid this kernel does not know, memory NVML cannot attribute
    assert ghost == {"pid": 3999902, "used_mib": None, "name": None, "user": None, "is_self": False, "type": "C",
                     # on the host NVML's numbers are ours (pidns); no sample: 0
                     "local_pid": 3999902, "sm_pct": 0, "used_bytes": None}
    assert sum(p["is_self"] for p in by_pid.values()) == 1


def test_to_dict_round_trips_through_json(fake_nvml):
    fake_nvml.write(three_gpus())
    code = """
import json
from tfgpu_magic.core import nvml
d = nvml.snapshot().to_dict()
text = json.dumps(d, allow_nan=False)
print(json.dumps({"equal": json.loads(text) == d, "text": text}))
"""
    out = fake_nvml.run_json(code)
    assert out["equal"] is True
    assert json.loads(out["text"])["gpus"][1]["memory_total_mib"] == 81920


@pytest.mark.parametrize("n, procs", [(0, 0), (1, 0), (1, 4), (8, 4)])
def test_gpu_counts(fake_nvml, n, procs):
    config = n_gpus(n, procs)
    fake_nvml.write(config)
    pid, (snap,) = fake_nvml.snapshots()
    assert snap["available"] is True and snap["error"] is None
    assert [without_owner(g) for g in snap["gpus"]] == [expected_gpu(config, i, pid) for i in range(n)]
    assert len({g["uuid"] for g in snap["gpus"]}) == n


@pytest.mark.parametrize("module", ["tfgpu_magic", "tfgpu_magic.core.nvml"])
def test_import_never_initialises_nvml(fake_nvml, module):
    fake_nvml.write(three_gpus())
    out = fake_nvml.run_json(f"import json, sys, {module}\nprint(json.dumps('pynvml' in sys.modules))")
    assert out is False
    assert fake_nvml.calls() == []


def test_init_once_and_kept(fake_nvml):
    fake_nvml.write(three_gpus())
    _, snaps = fake_nvml.snapshots(3)
    assert all(s["available"] for s in snaps)
    calls = fake_nvml.calls()
    assert calls.count("nvmlInitWithFlags") == 1  # the call log works, and init is not repeated
    assert "nvmlShutdown" not in calls
    # Handles are fetched on every snapshot, so a GPU that falls off the bus is seen at once ...
    assert calls.count("nvmlDeviceGetHandleByIndex_v2") == 3 * 3
    # ... while what cannot change for a UUID is read once.
    assert calls.count("nvmlDeviceGetName") == 3
    assert calls.count("nvmlSystemGetDriverVersion") == 1


def test_shutdown_releases_and_next_snapshot_initialises_again(fake_nvml):
    fake_nvml.write(three_gpus())
    code = """
import json
from tfgpu_magic.core import nvml
a = nvml.snapshot().available
nvml.shutdown()
nvml.shutdown()  # twice is harmless
b = nvml.snapshot().available
print(json.dumps([a, b]))
"""
    assert fake_nvml.run_json(code) == [True, True]
    calls = fake_nvml.calls()
    assert calls.count("nvmlInitWithFlags") == 2
    assert calls.count("nvmlShutdown") == 1


def test_older_driver_generation_falls_back(fake_nvml_r470):
    """A driver before R510: no memory info v2 (reserved is unknown, used includes it), _v2 processes."""
    config = three_gpus()
    fake_nvml_r470.write(config)
    pid, snaps = fake_nvml_r470.snapshots(2)
    for snap in snaps:
        for i, gpu in enumerate(snap["gpus"]):
            want = expected_gpu(config, i, pid)
            cfg = config["gpus"][i]
            want["memory_used_bytes"] = cfg["memory_used"] + cfg["memory_reserved"]
            want["memory_used_mib"] = want["memory_used_bytes"] // MIB
            assert gpu["memory_reserved_mib"]["unavailable"] == "function_not_found"
            want["memory_reserved_mib"] = want["memory_reserved_bytes"] = gpu["memory_reserved_mib"]
            assert without_owner(gpu) == want
    # The misses are paid once: the next snapshot goes straight to the calls that exist.
    calls = fake_nvml_r470.calls()
    assert calls.count("nvmlDeviceGetComputeRunningProcesses_v2") >= 2 * 3


def test_gpustat_reads_the_fake_like_a_driver(fake_nvml):
    """The fake is credible to a third-party tool (so it checks the adapter, not just our own reading)."""
    if shutil.which("gpustat", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("gpustat not installed")
    config = three_gpus()
    fake_nvml.write(config)
    proc = subprocess.run(
        [sys.executable, "-m", "gpustat", "--json"], env=fake_nvml.env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    gpus = json.loads(proc.stdout)["gpus"]
    assert [(g["index"], g["name"], g["memory.total"]) for g in gpus] == [
        (i, g["name"], g["memory_total"] // MIB) for i, g in enumerate(config["gpus"])
    ]
