"""MIG in tfgpu_magic.core.nvml: the real pynvml, in a subprocess, against the fake libnvidia-ml.so.1 (GPUs in
MIG mode with their MIG devices), plus the snapshot's MIG lookups in-process.

``mig_config()`` is GPU 0, an A100 in MIG mode with two MIG devices (slot 0: 3g.20gb with this process,
slot 1: 2g.10gb with pid 3999903), and GPU 1, a Tesla T4 without MIG.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from types import SimpleNamespace

import gpu_fakes
import pytest
from fakenvml import (
    MIB,
    assert_unavailable,
    expected_gpu,
    mig_config,
    mig_gpu,
    run_swaps,
    three_gpus,
    with_changes,
    without_owner,
    write_config,
)

from tfgpu_magic.core import nvml, nvml_mig

# ---- a GPU in MIG mode next to one without MIG ----

def test_mig_devices_every_field(fake_nvml):
    config = mig_config()
    pid, snap = fake_nvml.one_snapshot(config)
    assert [without_owner(g) for g in snap["gpus"]] == [expected_gpu(config, i, pid) for i in range(2)]

    a100, t4 = snap["gpus"]
    assert (a100["mig_mode"], a100["mig_pending"], a100["mig_error"]) == (True, True, None)
    first, second = a100["mig_devices"]
    assert [(m["parent_index"], m["index"]) for m in (first, second)] == [(0, 0), (0, 1)]
    assert first["uuid"] == "MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d"
    assert (first["name"], first["profile"]) == ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "3g.20gb")
    assert (second["profile"], second["gpu_instance_id"], second["compute_instance_id"]) == ("2g.10gb", 3, 0)
    assert (first["gpu_instance_id"], first["compute_instance_id"]) == (1, 0)
    assert (first["memory_total_mib"], first["memory_used_mib"], first["memory_free_mib"]) == (19968, 1024, 18944)
    me, = first["processes"]
    assert (me["pid"], me["used_mib"], me["is_self"]) == (pid, 1000, True)
    assert me["name"] and me["user"]  # from /proc, as on a whole GPU
    assert [(p["pid"], p["used_mib"], p["is_self"]) for p in second["processes"]] == [(3999903, 500, False)]
    for mig in (first, second):
        assert_unavailable(mig["utilization_gpu_pct"], "not_supported", "not reported per MIG device")
        assert_unavailable(mig["temperature_c"], "not_supported", "not reported per MIG device", "parent GPU")

    # The parent: its own figures where NVML gives them, utilization not in MIG mode, every instance's process.
    assert (a100["temperature_c"], a100["power_w"], a100["memory_total_mib"]) == (41, 88.0, 40960)
    assert_unavailable(a100["utilization_gpu_pct"], "not_supported", "MIG mode")
    assert [p["pid"] for p in a100["processes"]] == [pid, 3999903]

    assert (t4["mig_mode"], t4["mig_pending"], t4["mig_devices"], t4["mig_error"]) == (None, None, [], None)
    assert t4["utilization_gpu_pct"] == 0


def test_gpus_without_mig_are_unchanged(fake_nvml):
    config = three_gpus()
    pid, snap = fake_nvml.one_snapshot(config)
    assert [without_owner(g) for g in snap["gpus"]] == [expected_gpu(config, i, pid) for i in range(3)]
    assert all(g["mig_mode"] is None and g["mig_devices"] == [] for g in snap["gpus"])


def test_mig_mode_on_without_instances(fake_nvml):
    config = {"gpus": [mig_gpu(devices=[])]}
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, = snap["gpus"]
    assert without_owner(gpu) == expected_gpu(config, 0, pid)
    assert (gpu["mig_mode"], gpu["mig_devices"], gpu["mig_error"], gpu["processes"]) == (True, [], None, [])


def test_mig_mode_off_now_on_after_reset(fake_nvml):
    """Pending on, current off: a whole GPU still (its own processes and utilization); nothing MIG is listed."""
    config = {"gpus": [mig_gpu(mode=0, pending=1, processes=[{"pid": "self", "used": 256 * MIB}],
                               utilization_gpu=7)]}
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, = snap["gpus"]
    assert without_owner(gpu) == expected_gpu(config, 0, pid)
    assert (gpu["mig_mode"], gpu["mig_pending"], gpu["mig_devices"]) == (False, True, [])
    assert gpu["utilization_gpu_pct"] == 7 and [p["pid"] for p in gpu["processes"]] == [pid]
    assert "nvmlDeviceGetMaxMigDeviceCount" not in fake_nvml.calls()


def test_empty_slots_are_skipped(fake_nvml):
    devices = [{"slot": 0, "profile": "1g.5gb", "gpu_instance_id": 7, "memory_total": 4864 * MIB},
               {"slot": 4, "profile": "1g.5gb", "gpu_instance_id": 11, "compute_instance_id": 0,
                "memory_total": 4864 * MIB, "memory_used": 100 * MIB}]
    config = {"gpus": [mig_gpu(devices=devices)]}
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, = snap["gpus"]
    assert without_owner(gpu) == expected_gpu(config, 0, pid)
    assert [(m["index"], m["gpu_instance_id"]) for m in gpu["mig_devices"]] == [(0, 7), (4, 11)]
    assert gpu["mig_error"] is None


def test_one_process_on_two_instances_is_one_process_of_the_parent(fake_nvml):
    devices = [{"profile": "3g.20gb", "memory_total": 19968 * MIB, "processes": [{"pid": 3999904, "used": 300 * MIB}]},
               {"profile": "3g.20gb", "memory_total": 19968 * MIB, "processes": [{"pid": 3999904, "used": 200 * MIB},
                                                                                 {"pid": 3999905, "used": "unknown"}]}]
    config = {"gpus": [mig_gpu(devices=devices)]}
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, = snap["gpus"]
    assert without_owner(gpu) == expected_gpu(config, 0, pid)
    assert [(p["pid"], p["used_mib"]) for p in gpu["processes"]] == [(3999904, 500), (3999905, None)]


def test_calls_per_snapshot_stay_few(fake_nvml):
    """A GPU without MIG says so once and is not asked again; a MIG device's identity is read once."""
    config = dict(mig_config(), gpus=[*mig_config()["gpus"], three_gpus()["gpus"][1]])
    fake_nvml.write(config)
    _, snaps = fake_nvml.snapshots(3)
    assert all(len(s["gpus"][0]["mig_devices"]) == 2 for s in snaps)
    calls = fake_nvml.calls()
    assert calls.count("nvmlDeviceGetMigMode") == 3 + 2  # the MIG GPU every time, the other two once
    assert calls.count("nvmlDeviceGetMaxMigDeviceCount") == 1
    assert calls.count("nvmlDeviceGetMigDeviceHandleByIndex") == 3 * 7  # handles are fetched afresh, as GPUs'
    assert calls.count("nvmlDeviceGetGpuInstanceId") == calls.count("nvmlDeviceGetComputeInstanceId") == 2
    assert calls.count("nvmlDeviceGetName") == 3 + 2  # 3 GPUs and 2 MIG devices, once each
    # Never asked per MIG device: NVML does not report them there.
    assert calls.count("nvmlDeviceGetUtilizationRates") == 3 * 3
    assert calls.count("nvmlDeviceGetTemperature") == 3 * 3


# ---- failures: the GPU stays listed, the MIG part says what is missing ----

def test_mig_devices_refused_keeps_the_gpu(fake_nvml):
    config = dict(mig_config(), errors={"nvmlDeviceGetMigDeviceHandleByIndex": {"gpu": 0, "code": "NO_PERMISSION"}})
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, t4 = snap["gpus"]
    assert gpu["error"] is None and gpu["mig_mode"] is True and gpu["mig_devices"] == []
    assert_unavailable(gpu["mig_error"], "no_permission", "MIG device 0", "Insufficient Permissions")
    want = expected_gpu(config, 0, pid)
    want.update(mig_devices=[], mig_error=gpu["mig_error"])
    # The MIG devices could not be listed: the parent's own process list is shown (this fake's: every instance's).
    assert without_owner(gpu) == want
    assert without_owner(t4) == expected_gpu(config, 1, pid)


def test_mig_devices_and_parent_processes_both_refused(fake_nvml):
    config = dict(mig_config(), errors={
        "nvmlDeviceGetMigDeviceHandleByIndex": {"gpu": 0, "code": "NO_PERMISSION"},
        "nvmlDeviceGetComputeRunningProcesses_v3": {"gpu": 0, "code": "NO_PERMISSION"},
    })
    _, snap = fake_nvml.one_snapshot(config)
    gpu = snap["gpus"][0]
    assert_unavailable(gpu["mig_error"], "no_permission")
    assert_unavailable(gpu["processes"], "no_permission", "processes")
    assert gpu["memory_total_mib"] == 40960 and gpu["name"] == "NVIDIA A100-SXM4-40GB"


def test_a_user_without_privileges_still_sees_every_instances_processes(fake_nvml):
    """NVML gives the parent's aggregate list only to a privileged caller; the MIG handles answer anyone."""
    config = dict(mig_config(), errors={"nvmlDeviceGetComputeRunningProcesses_v3": {"gpu": 0, "code": "NO_PERMISSION"}})
    pid, snap = fake_nvml.one_snapshot(config)
    assert [without_owner(g) for g in snap["gpus"]] == [expected_gpu(config, i, pid) for i in range(2)]


def test_one_slot_refused_the_others_listed(fake_nvml):
    config = dict(mig_config(), errors={"nvmlDeviceGetMigDeviceHandleByIndex": {"gpu": 0, "mig": 1, "code": "UNKNOWN"}})
    pid, snap = fake_nvml.one_snapshot(config)
    gpu = snap["gpus"][0]
    assert [m["index"] for m in gpu["mig_devices"]] == [0]
    assert without_owner(gpu["mig_devices"][0]) == expected_gpu(mig_config(), 0, pid)["mig_devices"][0]
    assert_unavailable(gpu["mig_error"], "error", "MIG device 1")


@pytest.mark.parametrize("function, code, reason", [
    ("nvmlDeviceGetMigMode", "UNKNOWN", "error"),
    ("nvmlDeviceGetMigMode", "NO_PERMISSION", "no_permission"),
    ("nvmlDeviceGetMaxMigDeviceCount", "UNKNOWN", "error"),
])
def test_mig_mode_or_count_fails(fake_nvml, function, code, reason):
    config = dict(mig_config(), errors={function: {"gpu": 0, "code": code}})
    pid, snap = fake_nvml.one_snapshot(config)
    gpu = snap["gpus"][0]
    assert gpu["error"] is None and gpu["mig_devices"] == []
    assert gpu["name"] == "NVIDIA A100-SXM4-40GB" and gpu["memory_total_mib"] == 40960
    assert [p["pid"] for p in gpu["processes"]] == [pid, 3999903]  # the parent's own list
    if function == "nvmlDeviceGetMigMode":
        assert_unavailable(gpu["mig_mode"], reason, "MIG mode")
        assert gpu["mig_pending"] == gpu["mig_mode"] and gpu["mig_error"] is None
    else:
        assert gpu["mig_mode"] is True
        assert_unavailable(gpu["mig_error"], reason, "MIG devices")


@pytest.mark.parametrize("function, fields, code, reason", [
    ("nvmlDeviceGetMemoryInfo_v2", ("memory_total_mib", "memory_used_mib", "memory_free_mib", "memory_reserved_mib",
                                    "memory_total_bytes", "memory_used_bytes", "memory_free_bytes",
                                    "memory_reserved_bytes"), "NO_PERMISSION", "no_permission"),
    ("nvmlDeviceGetUUID", ("uuid",), "UNKNOWN", "error"),
    ("nvmlDeviceGetName", ("name", "profile"), "NOT_SUPPORTED", "not_supported"),
    ("nvmlDeviceGetGpuInstanceId", ("gpu_instance_id",), "NO_PERMISSION", "no_permission"),
    ("nvmlDeviceGetComputeInstanceId", ("compute_instance_id",), "UNKNOWN", "error"),
])
def test_one_mig_device_field_fails(fake_nvml, function, fields, code, reason):
    """An error on MIG device 1 only ("mig": 1): that field of that device; the parent and slot 0 are whole."""
    config = dict(mig_config(), errors={function: {"gpu": 0, "mig": 1, "code": code}})
    pid, snap = fake_nvml.one_snapshot(config)
    want = expected_gpu(config, 0, pid)
    got = snap["gpus"][0]
    for field in fields:
        assert_unavailable(got["mig_devices"][1][field], reason)
        want["mig_devices"][1][field] = got["mig_devices"][1][field]
    assert without_owner(got) == want


@pytest.mark.parametrize(("function", "what"), [("nvmlDeviceGetComputeRunningProcesses_v3", "processes"),
                                                ("nvmlDeviceGetGraphicsRunningProcesses_v3", "graphics processes")])
def test_mig_processes_refused_names_the_list_and_the_device(fake_nvml, function, what):
    config = dict(mig_config(), errors={function: {"gpu": 0, "mig": "*", "code": "NO_PERMISSION"}})
    _, snap = fake_nvml.one_snapshot(config)
    gpu = snap["gpus"][0]
    for mig in gpu["mig_devices"]:
        assert_unavailable(mig["processes"], "no_permission", what)
    assert_unavailable(gpu["processes"], "no_permission", f"MIG device 0: {what}")
    assert snap["gpus"][1]["processes"] == []


@pytest.mark.parametrize("function", ["nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetMemoryInfo_v2"])
def test_gpu_lost_through_a_mig_call(fake_nvml, function):
    spec = {"gpu": 0, "code": "GPU_IS_LOST"}
    if function != "nvmlDeviceGetMigDeviceHandleByIndex":
        spec["mig"] = 0
    config = dict(mig_config(), errors={function: spec})
    pid, snap = fake_nvml.one_snapshot(config)
    gpu = snap["gpus"][0]
    assert_unavailable(gpu["error"], "gpu_lost", "GPU 0")
    assert gpu["mig_devices"] == [] and gpu["mig_mode"] == gpu["error"] and gpu["mig_error"] == gpu["error"]
    assert without_owner(snap["gpus"][1]) == expected_gpu(config, 1, pid)


def test_instances_destroyed_and_created_while_running(fake_nvml, tmp_path):
    first = mig_config()
    fewer = with_changes(first, gpu0={"mig": {"mode": 1, "devices": first["gpus"][0]["mig"]["devices"][1:2]}})
    off = with_changes(first, gpu0={"mig": {"mode": 0, "pending": 0}})
    pid, (before, during, after, again) = run_swaps(fake_nvml, tmp_path, first, fewer, off, first)
    assert [m["index"] for m in before["gpus"][0]["mig_devices"]] == [0, 1]
    # mig_gpu's used memory is not recomputed by with_changes: compare the MIG part only.
    assert [without_owner(m) for m in during["gpus"][0]["mig_devices"]] == expected_gpu(fewer, 0, pid)["mig_devices"]
    assert [m["uuid"] for m in during["gpus"][0]["mig_devices"]] == ["MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f"]
    assert after["gpus"][0]["mig_mode"] is False and after["gpus"][0]["mig_devices"] == []
    assert [without_owner(g) for g in again["gpus"]] == [expected_gpu(first, i, pid) for i in range(2)]


# ---- the fake's MIG entry points against nvidia-ml-py's own ctypes calls ----

PYNVML_MIG = """
import ctypes, json, os, pynvml as nv
nv.nvmlInit()
out = {"pid": os.getpid()}
def err(fn, *args):
    try:
        fn(*args)
    except nv.NVMLError as exc:
        return exc.value
    return "no error"
addr = lambda handle: ctypes.cast(handle, ctypes.c_void_p).value
def processes(handle):  # _v3 from R510, _v2 before
    try:
        return nv.nvmlDeviceGetComputeRunningProcesses_v3(handle)
    except nv.NVMLError_FunctionNotFound:
        return nv.nvmlDeviceGetComputeRunningProcesses_v2(handle)
def memory_v2(handle):
    try:
        v2 = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
    except nv.NVMLError_FunctionNotFound:
        return None
    return [v2.total, v2.used, v2.free, v2.reserved]
a100, t4 = nv.nvmlDeviceGetHandleByIndex(0), nv.nvmlDeviceGetHandleByIndex(1)
out["mode"] = nv.nvmlDeviceGetMigMode(a100)
out["t4_mode"] = err(nv.nvmlDeviceGetMigMode, t4)
out["max"] = [nv.nvmlDeviceGetMaxMigDeviceCount(a100), nv.nvmlDeviceGetMaxMigDeviceCount(t4)]
out["empty_slot"] = err(nv.nvmlDeviceGetMigDeviceHandleByIndex, a100, 2)
out["slot_past_max"] = err(nv.nvmlDeviceGetMigDeviceHandleByIndex, a100, 7)
out["t4_slot"] = err(nv.nvmlDeviceGetMigDeviceHandleByIndex, t4, 0)
out["is_mig_parent"] = nv.nvmlDeviceIsMigDeviceHandle(a100).value
out["parent_gi"] = err(nv.nvmlDeviceGetGpuInstanceId, a100)
out["parent_util"] = err(nv.nvmlDeviceGetUtilizationRates, a100)
out["parent_processes"] = sorted((p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId)
                                 for p in processes(a100))
out["t4_processes"] = [(p.gpuInstanceId, p.computeInstanceId) for p in processes(t4)]
out["migs"] = []
for slot in (0, 1):
    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(a100, slot)
    mem = nv.nvmlDeviceGetMemoryInfo(mig)
    out["migs"].append({
        "is_mig": nv.nvmlDeviceIsMigDeviceHandle(mig).value,
        "parent_is_a100": addr(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)) == addr(a100),
        "index": nv.nvmlDeviceGetIndex(mig),
        "gi": nv.nvmlDeviceGetGpuInstanceId(mig), "ci": nv.nvmlDeviceGetComputeInstanceId(mig),
        "name": nv.nvmlDeviceGetName(mig), "uuid": nv.nvmlDeviceGetUUID(mig),
        "memory": [mem.total, mem.used, mem.free],
        "memory_v2": memory_v2(mig),
        "processes": [(p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId) for p in processes(mig)],
        "bus_id": nv.nvmlDeviceGetPciInfo(mig).busId,
        "util": err(nv.nvmlDeviceGetUtilizationRates, mig),
        "temperature": err(nv.nvmlDeviceGetTemperature, mig, nv.NVML_TEMPERATURE_GPU),
        "power": err(nv.nvmlDeviceGetPowerUsage, mig),
        "mig_mode_of_a_mig": err(nv.nvmlDeviceGetMigMode, mig),
    })
out["parent_from_t4"] = err(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, t4)
print(json.dumps(out))
"""


@pytest.mark.parametrize("generation", ["fake_nvml", "fake_nvml_r470"])
def test_pynvml_reads_the_fakes_mig_calls(request, generation):
    """Every MIG entry point of the fake, through nvidia-ml-py's own ctypes calls (argument types, by-ref
    outputs, handles in and out): values that differ per argument, so a mismatched signature would show."""
    fake = request.getfixturevalue(generation)
    fake.write(mig_config())
    out = fake.run_json(PYNVML_MIG)
    not_supported, not_found, invalid = 3, 6, 2
    assert out["mode"] == [1, 1] and out["t4_mode"] == not_supported
    assert out["max"] == [7, 0]
    assert (out["empty_slot"], out["slot_past_max"], out["t4_slot"]) == (not_found, invalid, not_supported)
    assert (out["is_mig_parent"], out["parent_gi"], out["parent_util"]) == (0, not_supported, not_supported)
    me = out["pid"]
    # The parent in MIG mode: every instance's processes with their GPU / compute instance ids.
    assert out["parent_processes"] == sorted([[me, 1000 * MIB, 1, 0], [3999903, 500 * MIB, 3, 0]])
    assert out["t4_processes"] == []
    first, second = out["migs"]
    assert first == {
        "is_mig": 1, "parent_is_a100": True, "index": 0, "gi": 1, "ci": 0,
        "name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "uuid": "MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d",
        "memory": [19968 * MIB, 1024 * MIB, 18944 * MIB],
        "memory_v2": None if generation == "fake_nvml_r470" else [19968 * MIB, 1024 * MIB, 18944 * MIB, 0],
        "processes": [[me, 1000 * MIB, 1, 0]],
        "bus_id": "00000000:07:00.0",
        "util": not_supported, "temperature": not_supported, "power": not_supported,
        "mig_mode_of_a_mig": invalid,
    }
    assert (second["index"], second["gi"], second["uuid"]) == (1, 3, "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f")
    assert second["processes"] == [[3999903, 500 * MIB, 3, 0]]
    assert out["parent_from_t4"] == invalid


def test_stale_mig_handle_after_the_instance_is_destroyed(fake_nvml, tmp_path):
    config = mig_config()
    fake_nvml.write(config)
    later = write_config(tmp_path / "later.cfg", with_changes(config, gpu0={"mig": {"mode": 1, "devices": []}}))
    code = f"""
import json, os, pynvml as nv
nv.nvmlInit()
mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(nv.nvmlDeviceGetHandleByIndex(0), 1)
before = nv.nvmlDeviceGetUUID(mig)
os.replace({str(later)!r}, {str(fake_nvml.config_path)!r})
nv.nvmlDeviceGetCount()
try:
    nv.nvmlDeviceGetUUID(mig)
    after = None
except nv.NVMLError as exc:
    after = exc.value
print(json.dumps([before, after]))
"""
    assert fake_nvml.run_json(code) == ["MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f", 2]  # INVALID_ARGUMENT


# ---- the snapshot's MIG lookups ----

def test_to_dict_round_trips_through_json(fake_nvml):
    fake_nvml.write(mig_config())
    code = """
import json
from tfgpu_magic.core import nvml
snap = nvml.snapshot()
d = snap.to_dict()
text = json.dumps(d, allow_nan=False)
found = snap.mig_device("mig-9D2C")
print(json.dumps({"equal": json.loads(text) == d, "text": text,
                  "found": [found[0].index, found[1].index, found[1].uuid],
                  "all": [[g.index, m.index] for g, m in snap.mig_devices()]}))
"""
    out = fake_nvml.run_json(code)
    assert out["equal"] is True
    assert json.loads(out["text"])["gpus"][0]["mig_devices"][1]["profile"] == "2g.10gb"
    assert out["found"] == [0, 1, "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f"]
    assert out["all"] == [[0, 0], [0, 1]]


def test_mig_device_lookup():
    snap = gpu_fakes.mig_gpus()
    exact, second, third = gpu_fakes.MIG_UUIDS
    parent, mig = snap.mig_device(exact)
    assert (parent.index, mig.index, mig.uuid, mig.profile) == (0, 0, exact, "3g.20gb")
    assert snap.mig_device("MIG-9d2c")[1].uuid == second  # a unique prefix
    assert snap.mig_device("mig-9D2C4E6F")[1].uuid == second  # case does not matter, as in CUDA_VISIBLE_DEVICES
    assert snap.mig_device(third)[1].index == 2  # exact, though another UUID starts the same way
    for nothing in ("MIG-5e8b", "MIG-", "MIG-ffff", "", "  ", "GPU-00000000", snap.gpus[0].uuid):
        assert snap.mig_device(nothing) is None, nothing  # ambiguous, unknown, or not a MIG device
    assert [(g.index, m.index) for g, m in snap.mig_devices()] == [(0, 0), (0, 1), (0, 2)]
    assert list(gpu_fakes.three_gpus().mig_devices()) == []
    assert gpu_fakes.three_gpus().mig_device(exact) is None


def test_mig_device_dict_has_every_field():
    d = gpu_fakes.mig_gpus().to_dict()["gpus"][0]["mig_devices"][0]
    assert list(d) == [f.name for f in dataclasses.fields(nvml.MigDevice)]
    assert d["utilization_gpu_pct"] == {"unavailable": "not_supported", "detail": "not reported per MIG device"}


@pytest.mark.parametrize("name, profile", [
    ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "3g.20gb"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "1g.10gb+me"),
    ("NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb", "1c.3g.40gb"),
    ("MIG 2g.10gb", "2g.10gb"),
    ("Tesla T4", None),
    ("NVIDIA MIGHTY 1g", None),
])
def test_mig_profile(name, profile):
    assert nvml.mig_profile(name) == profile


def test_a_mig_name_without_profile_is_unavailable(fake_nvml):
    config = {"gpus": [mig_gpu(devices=[{"name": "Strange MIG-less name", "memory_total": MIB}])]}
    _, snap = fake_nvml.one_snapshot(config)
    assert_unavailable(snap["gpus"][0]["mig_devices"][0]["profile"], "error", "profile", "Strange MIG-less name")


# ---- the MIG mode read without a driver's MIG calls (a missing symbol cannot be staged in the fake) ----

class _NvmlError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value


def _stub_nv(raise_code=None):
    calls = []

    def get_mig_mode(handle):
        calls.append(handle)
        if raise_code is not None:
            raise _NvmlError(raise_code)
        return [1, 0]

    return SimpleNamespace(NVMLError=_NvmlError, nvmlDeviceGetMigMode=get_mig_mode), calls


def test_driver_without_mig_calls_is_asked_once(monkeypatch):
    monkeypatch.setattr(nvml_mig, "_mig_calls", True)
    monkeypatch.setattr(nvml_mig, "_no_mig_uuids", set())
    nv, calls = _stub_nv(raise_code=13)  # NVML_ERROR_FUNCTION_NOT_FOUND: a driver before R450
    assert nvml_mig.mode(nv, "h0", "GPU-a") == (None, None)
    assert nvml_mig.mode(nv, "h1", "GPU-b") == (None, None)
    assert calls == ["h0"]


def test_not_supported_is_remembered_per_uuid(monkeypatch):
    monkeypatch.setattr(nvml_mig, "_mig_calls", True)
    monkeypatch.setattr(nvml_mig, "_no_mig_uuids", set())
    nv, calls = _stub_nv(raise_code=3)
    assert nvml_mig.mode(nv, "h0", "GPU-a") == (None, None)
    assert nvml_mig.mode(nv, "h0", "GPU-a") == (None, None)
    assert nvml_mig.mode(nv, "h1", nvml.Unavailable("error")) == (None, None)  # no UUID: nothing to remember
    assert calls == ["h0", "h1"]
    nv, calls = _stub_nv()
    assert nvml_mig.mode(nv, "h2", "GPU-b") == (True, False)


def test_older_driver_generation_reads_mig_too(fake_nvml_r470):
    """MIG calls exist since R450: before R510 a MIG device has no reserved figure and _v2 process lists."""
    config = mig_config()
    fake_nvml_r470.write(config)
    pid, (snap,) = fake_nvml_r470.snapshots()
    first, second = snap["gpus"][0]["mig_devices"]
    assert_unavailable(first["memory_reserved_mib"], "function_not_found")
    assert (first["uuid"], first["memory_total_mib"], first["memory_used_mib"]) == (
        "MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d", 19968, 1024)
    assert [(p["pid"], p["used_mib"]) for p in second["processes"]] == [(3999903, 500)]
    assert [p["pid"] for p in snap["gpus"][0]["processes"]] == [pid, 3999903]


# ---- the GPU check's field signature (benchmarks/gpu_checks) follows the real GPU's MIG support ----

def _compare_module():
    from harness import ROOT

    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from gpu_checks import compare

    return compare


@pytest.mark.parametrize("real, want", [({"gpus[].mig_mode": "null"}, "null"), ({"gpus[].mig_mode": "bool"}, "bool"),
                                        (None, "bool")])
def test_fidelity_reference_follows_the_real_gpus_mig_support(fake_nvml, real, want):
    compare = _compare_module()
    fake_nvml.write(compare.fake_reference_config(real))
    pid, (snap,) = fake_nvml.snapshots()
    signature = compare.field_signature(snap, {pid})
    assert signature["gpus[].mig_mode"] == signature["gpus[].mig_pending"] == want
    assert (signature["gpus[].mig_devices"], signature["gpus[].mig_error"]) == ("list", "null")
    assert not any(path.startswith("gpus[].mig_devices[].") for path in signature)
    assert signature["gpus[].utilization_gpu_pct"] == "int"


def test_fidelity_reference_in_mig_mode(fake_nvml):
    compare = _compare_module()
    fake_nvml.write(compare.fake_reference_config({"gpus[].mig_mode": "bool", "gpus[].mig_devices[].uuid": "str"}))
    pid, (snap,) = fake_nvml.snapshots()
    signature = compare.field_signature(snap, {pid})
    mig = {path.removeprefix("gpus[].mig_devices[]."): kind for path, kind in signature.items()
           if path.startswith("gpus[].mig_devices[].")}
    assert mig == {
        "parent_index": "int", "index": "int", "uuid": "str", "name": "str", "profile": "str",
        "gpu_instance_id": "int", "compute_instance_id": "int", "memory_total_mib": "int", "memory_used_mib": "int",
        "memory_free_mib": "int", "memory_reserved_mib": "int", "memory_total_bytes": "int", "memory_used_bytes": "int",
        "memory_free_bytes": "int", "memory_reserved_bytes": "int", "utilization_gpu_pct": "n/a:not_supported",
        "temperature_c": "n/a:not_supported", "processes": "list", "processes[].pid": "int",
        "processes[].used_mib": "int", "processes[].used_bytes": "int", "processes[].name": "str",
        "processes[].user": "str",
        "processes[].is_self": "bool", "processes[].type": "str", "processes[].local_pid": "int",
            "processes[].sm_pct": "null"}  # no per-process utilization on a MIG device
    assert signature["gpus[].utilization_gpu_pct"] == "n/a:not_supported"
    # A real run whose own process is on no MIG device: those entries are not compared, not different.
    real = {path: kind for path, kind in signature.items() if not path.startswith(compare.MIG_PROCESS_ENTRY)}
    differences, skipped = compare.compare_signatures(real, signature)
    assert differences == [] and skipped == sorted(set(signature) - set(real))
