"""Fault tests of tfgpu_magic.core.nvml: what each NVML failure becomes, through the real pynvml and the fake
libnvidia-ml.so.1 (subprocesses), plus the error mapping itself in-process."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import sys

import pytest
from fakenvml import assert_unavailable, expected_gpu, run_swaps, three_gpus, with_changes, without_owner

from tfgpu_magic.core.nvml import Unavailable, unavailable_from_error


def assert_whole_gpu_unavailable(gpu, index, reason):
    assert gpu["index"] == index
    assert_unavailable(gpu["error"], reason, f"GPU {index}")
    assert gpu["mig_devices"] == []  # a tuple always, so code that iterates it never breaks
    for key, value in gpu.items():
        if key not in ("index", "mig_devices"):
            assert value == gpu["error"], key


# ---- no NVML at all ----

def test_no_library_at_all(fake_nvml, tmp_path):
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("a real libnvidia-ml.so.1 is installed here: the no-driver case cannot be staged")
    assert ctypes.util.find_library("nvidia-ml") is None
    empty = tmp_path / "empty"
    empty.mkdir()
    env = dict(fake_nvml.env, LD_LIBRARY_PATH=str(empty))
    code = """
import json
from tfgpu_magic.core import nvml
import pynvml
snaps = [nvml.snapshot().to_dict() for _ in range(2)]  # the second tries again, and fails the same way
print(json.dumps({"snaps": snaps, "loaded": pynvml.nvmlLib is not None}))
"""
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["loaded"] is False
    for snap in out["snaps"]:
        assert snap["available"] is False
        assert snap["gpus"] == []
        assert_unavailable(snap["error"], "error", "libnvidia-ml.so.1", "not found", "no NVIDIA driver")


@pytest.mark.parametrize(
    "code, reason, detail",
    [
        ("DRIVER_NOT_LOADED", "error", "kernel driver is not loaded"),
        ("NO_PERMISSION", "no_permission", "/dev/nvidia"),
        ("LIB_RM_VERSION_MISMATCH", "error", "reboot"),
        ("UNKNOWN", "error", "nvmlInit failed: Unknown Error"),
    ],
)
def test_init_failure_is_reported_and_not_cached(fake_nvml, tmp_path, code, reason, detail):
    broken = dict(three_gpus(), errors={"nvmlInitWithFlags": code})
    pid, (first, second, third) = run_swaps(fake_nvml, tmp_path, broken, broken, three_gpus())
    for snap in (first, second):
        assert snap["available"] is False and snap["gpus"] == []
        assert_unavailable(snap["error"], reason, detail)
    # Fixed (driver loaded, permissions granted): the very next snapshot works, no restart needed.
    assert third["available"] is True and third["error"] is None
    assert [without_owner(g) for g in third["gpus"]] == [expected_gpu(three_gpus(), i, pid) for i in range(3)]
    assert fake_nvml.calls().count("nvmlInitWithFlags") == 3


# ---- a GPU falls off the bus while the process runs ----

@pytest.mark.parametrize(
    "how",
    [
        pytest.param({"lost": True}, id="lost-no-handle"),
        # The handle still comes back but a call says the GPU is gone: nothing it said can be trusted.
        pytest.param({"errors": {"nvmlDeviceGetMemoryInfo_v2": {"gpu": 1, "code": "GPU_IS_LOST"}}}, id="lost-mid-read"),
        pytest.param({"errors": {"nvmlDeviceGetComputeRunningProcesses_v3": {"gpu": 1, "code": "GPU_IS_LOST"}}},
                     id="lost-at-processes"),
    ],
)
def test_gpu_lost_mid_run(fake_nvml, tmp_path, how):
    good = three_gpus()
    lost = with_changes(good, gpu1=how) if "lost" in how else dict(good, **how)
    pid, (before, during, after) = run_swaps(fake_nvml, tmp_path, good, lost, good)
    expected = [expected_gpu(good, i, pid) for i in range(3)]

    assert [without_owner(g) for g in before["gpus"]] == expected
    assert during["available"] is True and during["error"] is None
    assert [without_owner(during["gpus"][i]) for i in (0, 2)] == [expected[0], expected[2]]
    assert during["gpus"][0]["processes"] == before["gpus"][0]["processes"]  # names/users too
    assert_whole_gpu_unavailable(during["gpus"][1], 1, "gpu_lost")
    # Back on the bus (after a reset): reported again, in the same process.
    assert [without_owner(g) for g in after["gpus"]] == expected


def test_handle_refused_for_other_reasons(fake_nvml):
    fake_nvml.write(dict(three_gpus(), errors={"nvmlDeviceGetHandleByIndex_v2": {"gpu": 2, "code": "NO_PERMISSION"}}))
    pid, (snap,) = fake_nvml.snapshots()
    assert [without_owner(g) for g in snap["gpus"][:2]] == [expected_gpu(three_gpus(), i, pid) for i in (0, 1)]
    assert_whole_gpu_unavailable(snap["gpus"][2], 2, "no_permission")


# ---- one field fails, the rest of the GPU and the other GPUs are still reported ----

MEMORY = ("memory_total_mib", "memory_used_mib", "memory_free_mib", "memory_reserved_mib", "memory_total_bytes",
          "memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes")


@pytest.mark.parametrize(
    "function, code, fields, reason",
    [
        ("nvmlDeviceGetPowerUsage", "NOT_SUPPORTED", ("power_w",), "not_supported"),
        ("nvmlDeviceGetUtilizationRates", "NOT_SUPPORTED", ("utilization_gpu_pct", "utilization_memory_pct"),
         "not_supported"),
        ("nvmlDeviceGetComputeRunningProcesses_v3", "NO_PERMISSION", ("processes",), "no_permission"),
        ("nvmlDeviceGetTemperature", "UNKNOWN", ("temperature_c",), "error"),
        ("nvmlDeviceGetMemoryInfo_v2", "NO_PERMISSION", MEMORY, "no_permission"),
        ("nvmlDeviceGetName", "NOT_SUPPORTED", ("name",), "not_supported"),
        ("nvmlDeviceGetUUID", "UNKNOWN", ("uuid",), "error"),
        ("nvmlDeviceGetPciInfo_v3", "NO_PERMISSION", ("pci_bus_id",), "no_permission"),
    ],
)
@pytest.mark.parametrize("gpu", [0, 1])
def test_one_field_fails(fake_nvml, function, code, fields, reason, gpu):
    config = dict(three_gpus(), errors={function: {"gpu": gpu, "code": code}})
    fake_nvml.write(config)
    pid, (snap,) = fake_nvml.snapshots()
    assert snap["available"] is True and snap["error"] is None
    for i, got in enumerate(snap["gpus"]):
        want = expected_gpu(config, i, pid)
        if i == gpu:
            assert got["error"] is None
            for field in fields:
                assert_unavailable(got[field], reason)
                want[field] = got[field]
        assert without_owner(got) == want


def test_power_absent_is_not_supported(fake_nvml):
    config = with_changes(three_gpus(), gpu2={"power_mw": None})
    fake_nvml.write(config)
    _, (snap,) = fake_nvml.snapshots()
    assert_unavailable(snap["gpus"][2]["power_w"], "not_supported", "power", "Not Supported")
    assert snap["gpus"][1]["power_w"] == 71.25


@pytest.mark.parametrize(
    "function, key",
    [("nvmlSystemGetDriverVersion", "driver_version"), ("nvmlSystemGetCudaDriverVersion", "cuda_driver_version")],
)
def test_system_field_fails(fake_nvml, function, key):
    fake_nvml.write(dict(three_gpus(), errors={function: "UNKNOWN"}))
    _, (snap,) = fake_nvml.snapshots()
    assert snap["available"] is True and len(snap["gpus"]) == 3
    assert_unavailable(snap[key], "error")
    other = {"driver_version": "550.54.15", "cuda_driver_version": "12.4"}
    other.pop(key)
    assert {k: snap[k] for k in other} == other


def test_device_count_fails(fake_nvml):
    fake_nvml.write(dict(three_gpus(), errors={"nvmlDeviceGetCount_v2": "UNKNOWN"}))
    _, (snap,) = fake_nvml.snapshots()
    assert snap["available"] is True and snap["gpus"] == []
    assert_unavailable(snap["error"], "error", "GPU count")
    assert snap["driver_version"] == "550.54.15"


def test_nvml_uninitialized_even_after_starting_again_says_so_in_its_words(fake_nvml):
    """A GPU count that stays UNINITIALIZED after the adapter starts NVML again: one reason in tfgpu's words,
    never "unexpected NVMLError_Uninitialized"."""
    fake_nvml.write(dict(three_gpus(), errors={"nvmlDeviceGetCount_v2": "UNINITIALIZED"}))
    _, (snap,) = fake_nvml.snapshots()
    assert snap["available"] is True and snap["gpus"] == []
    assert_unavailable(snap["error"], "error", "GPU count", "not initialized even right after nvmlInit")
    assert "unexpected" not in snap["error"]["detail"] and "NVMLError" not in snap["error"]["detail"]
    assert snap["driver_version"] == "550.54.15"


def test_nvml_shut_down_behind_our_back_recovers(fake_nvml):
    """Another library in the process calls nvmlShutdown one time too many: the adapter starts again."""
    fake_nvml.write(three_gpus())
    code = """
import json, pynvml
from tfgpu_magic.core import nvml
first = nvml.snapshot().available
pynvml.nvmlShutdown()
again = nvml.snapshot()
print(json.dumps([first, again.available, len(again.gpus)]))
"""
    assert fake_nvml.run_json(code) == [True, True, 3]


# ---- the mapping itself, in-process (a missing symbol cannot be staged at run time) ----

def _pynvml():
    return pytest.importorskip("pynvml")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("NVMLError_NotSupported", "not_supported"),
        ("NVMLError_NoPermission", "no_permission"),
        ("NVMLError_GpuIsLost", "gpu_lost"),
        ("NVMLError_FunctionNotFound", "function_not_found"),
        ("NVMLError_Unknown", "error"),
        ("NVMLError_DriverNotLoaded", "error"),
        ("NVMLError_LibraryNotFound", "error"),
        ("NVMLError_Timeout", "error"),
    ],
)
def test_error_mapping(name, reason):
    exc = getattr(_pynvml(), name)()
    got = unavailable_from_error(exc, "power")
    assert got == Unavailable(reason, f"power: {exc}")
    assert got.detail.startswith("power: ") and len(got.detail) > len("power: ")


def test_mapping_of_the_unversioned_call_mismatch():
    exc = _pynvml().NVMLLibraryMismatchError("Unversioned function called ...")
    assert unavailable_from_error(exc).reason == "function_not_found"


def test_mapping_of_a_non_nvml_error():
    got = unavailable_from_error(OSError("boom"), "processes")
    assert got == Unavailable("error", "processes: OSError: boom")


def test_mapping_of_an_unknown_code():
    got = unavailable_from_error(_pynvml().NVMLError(4242))
    assert got.reason == "error"
