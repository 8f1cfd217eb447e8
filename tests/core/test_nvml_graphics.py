"""Graphics processes in tfgpu_magic.core.nvml: NVML's graphics list read beside the compute list (the real pynvml,
in a subprocess, against the fake libnvidia-ml.so.1), merged by pid, each process typed as nvidia-smi's Type column
types it ("C", "G", "C+G"), a process on both lists one row with its memory once; every failure of the graphics
call, on a whole GPU and on a MIG device.

``graphics_gpus()`` is ``three_gpus()`` with pid 3999911 graphics-only on GPU 0, this process on both lists on GPU 1,
and pid 3999912 graphics-only with no memory figure on GPU 2.
"""

from __future__ import annotations

import pytest
from fakenvml import (
    MIB,
    assert_unavailable,
    expected_gpu,
    graphics_gpus,
    mig_gpu,
    three_gpus,
    without_owner,
)

GRAPHICS_V3 = "nvmlDeviceGetGraphicsRunningProcesses_v3"


def rows(processes):
    return [(p["pid"], p["used_mib"], p["type"]) for p in processes]


def test_graphics_processes_are_listed_and_typed(fake_nvml):
    config = graphics_gpus()
    pid, snap = fake_nvml.one_snapshot(config)
    a100, h100, t4 = snap["gpus"]
    # Compute processes in NVML's order, then the graphics-only ones.
    assert rows(a100["processes"]) == [(1, 1000, "C"), (3999901, 29000, "C"), (3999911, 180, "G")]
    # On both lists: one row, typed C+G, its memory once (1024 MiB, not 2048).
    assert rows(h100["processes"]) == [(pid, 1024, "C+G"), (3999902, None, "C")]
    assert [p["is_self"] for p in h100["processes"]] == [True, False]
    assert rows(t4["processes"]) == [(3999912, None, "G")]
    assert [without_owner(g) for g in snap["gpus"]] == [expected_gpu(config, i, pid) for i in range(3)]


def test_a_graphics_process_has_its_name_and_user_from_proc(fake_nvml):
    config = three_gpus()
    config["gpus"][2]["processes"] = [{"pid": 1, "used": 64 * MIB, "type": "G"}]
    _, snap = fake_nvml.one_snapshot(config)
    init, = snap["gpus"][2]["processes"]
    with open("/proc/1/comm") as f:
        assert (init["name"], init["type"], init["used_mib"]) == (f.read().strip(), "G", 64)
    assert init["user"]


def test_both_lists_are_read_once_per_gpu_and_snapshot(fake_nvml):
    fake_nvml.write(graphics_gpus())
    _, snaps = fake_nvml.snapshots(2)
    assert all(rows(s["gpus"][0]["processes"])[-1] == (3999911, 180, "G") for s in snaps)
    # pynvml makes two C calls per non-empty list (the size, then the entries): 2 snapshots x 3 GPUs x 2.
    assert fake_nvml.calls().count(GRAPHICS_V3) == 2 * 3 * 2


def test_older_driver_generation_reads_graphics_through_v2(fake_nvml_r470):
    config = graphics_gpus()
    fake_nvml_r470.write(config)
    pid, snaps = fake_nvml_r470.snapshots(2)
    for snap in snaps:
        assert rows(snap["gpus"][0]["processes"])[-1] == (3999911, 180, "G")
        assert rows(snap["gpus"][1]["processes"])[0] == (pid, 1024, "C+G")
    calls = fake_nvml_r470.calls()
    assert calls.count("nvmlDeviceGetGraphicsRunningProcesses_v2") == 2 * 3 * 2  # as with _v3 above


@pytest.mark.parametrize("code, reason", [("NO_PERMISSION", "no_permission"), ("UNKNOWN", "error")])
def test_graphics_list_refused_makes_the_list_missing_and_says_which(fake_nvml, code, reason):
    """Half a list would leave memory unattributed without saying so: the GPU's list is missing, named as the
    graphics list; the other GPUs keep theirs, graphics processes included."""
    config = dict(graphics_gpus(), errors={GRAPHICS_V3: {"gpu": 1, "code": code}})
    pid, snap = fake_nvml.one_snapshot(config)
    assert_unavailable(snap["gpus"][1]["processes"], reason, "graphics processes")
    assert snap["gpus"][1]["error"] is None and snap["gpus"][1]["memory_total_mib"] == 81920
    assert [without_owner(snap["gpus"][i]) for i in (0, 2)] == [expected_gpu(config, i, pid) for i in (0, 2)]


def test_graphics_list_not_supported_is_an_empty_graphics_list(fake_nvml):
    """A device with no graphics list runs no graphics processes: its compute list stands."""
    config = dict(graphics_gpus(), errors={GRAPHICS_V3: {"gpu": 0, "code": "NOT_SUPPORTED"}})
    pid, snap = fake_nvml.one_snapshot(config)
    assert rows(snap["gpus"][0]["processes"]) == [(1, 1000, "C"), (3999901, 29000, "C")]
    assert [without_owner(snap["gpus"][i]) for i in (1, 2)] == [expected_gpu(config, i, pid) for i in (1, 2)]


def test_gpu_lost_at_the_graphics_list_is_the_whole_gpu_lost(fake_nvml):
    config = dict(graphics_gpus(), errors={GRAPHICS_V3: {"gpu": 2, "code": "GPU_IS_LOST"}})
    pid, snap = fake_nvml.one_snapshot(config)
    assert_unavailable(snap["gpus"][2]["error"], "gpu_lost", "GPU 2")
    assert snap["gpus"][2]["processes"] == snap["gpus"][2]["error"]
    assert [without_owner(snap["gpus"][i]) for i in (0, 1)] == [expected_gpu(config, i, pid) for i in (0, 1)]


# ---- MIG: each MIG device's two lists, and the parent's union ----

def _mig_with_graphics():
    devices = [
        {"profile": "3g.20gb", "memory_total": 19968 * MIB, "memory_used": 1024 * MIB,
         "processes": [{"pid": "self", "used": 1000 * MIB, "type": "C+G"}, {"pid": 3999913, "used": 40 * MIB,
                                                                           "type": "G"}]},
        {"profile": "2g.10gb", "memory_total": 9728 * MIB, "memory_used": 512 * MIB,
         "processes": [{"pid": 3999913, "used": 60 * MIB}, {"pid": 3999903, "used": 500 * MIB}]},
    ]
    return {"driver_version": "550.54.15", "cuda_driver_version": 12040, "gpus": [mig_gpu(devices=devices)]}


def test_mig_devices_list_graphics_processes_and_the_parent_joins_them(fake_nvml):
    config = _mig_with_graphics()
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, = snap["gpus"]
    first, second = gpu["mig_devices"]
    assert rows(first["processes"]) == [(pid, 1000, "C+G"), (3999913, 40, "G")]
    assert rows(second["processes"]) == [(3999913, 60, "C"), (3999903, 500, "C")]
    # The parent: each pid once, memory added up over instances, G on one and C on the other is C+G.
    assert rows(gpu["processes"]) == [(pid, 1000, "C+G"), (3999913, 100, "C+G"), (3999903, 500, "C")]
    assert without_owner(gpu) == expected_gpu(config, 0, pid)


def test_mig_graphics_list_not_supported_keeps_the_compute_lists(fake_nvml):
    config = dict(_mig_with_graphics(), errors={GRAPHICS_V3: {"gpu": 0, "mig": "*", "code": "NOT_SUPPORTED"}})
    pid, snap = fake_nvml.one_snapshot(config)
    gpu, = snap["gpus"]
    assert rows(gpu["mig_devices"][0]["processes"]) == [(pid, 1000, "C")]
    assert rows(gpu["processes"]) == [(pid, 1000, "C"), (3999913, 60, "C"), (3999903, 500, "C")]
