"""core/idle.py's rule, case by case: per-process utilization decides where NVML gives it; the device's only where the
kernel is alone on it; a device computing for a process nobody here can place keeps every kernel holding memory on
it; memory at 0 % is idle; and a guess is never published as measured work."""

from __future__ import annotations

import pytest

from tfgpu_magic.core.idle import Device, Use, describe, duration, gpu_work


def use(kernel, pid, sm, used=1024, child=False, placed=True):
    return Use(kernel, pid, child, used, sm, placed)


def test_a_child_computing_makes_its_kernel_busy_measured():
    work = gpu_work([Device(1, 90, (use("k", 10, 0, 512), use("k", 11, 100, 4096, child=True)))])["k"]
    assert (work.busy, work.measured, work.gpu, work.pid, work.child) == (True, True, 1, 11, True)
    assert work.why == "busy on GPU 1 (child pid 11, 100% SM)" and work.held_mib == 4608 and work.gpus == (1,)


@pytest.mark.parametrize("sm", [0, 5])
def test_memory_at_or_below_the_threshold_is_idle(sm):
    work = gpu_work([Device(0, 80, (use("k", 10, sm, 12288), use(None, 99, 100)))], threshold=5)["k"]
    assert not work.busy and work.held_mib == 12288


def test_without_per_process_figures_the_device_decides_only_for_a_kernel_alone_on_it():
    alone_idle = gpu_work([Device(0, 0, (use("k", 10, None),))])["k"]
    alone_busy = gpu_work([Device(0, 40, (use("k", 10, None),))])["k"]
    shared = gpu_work([Device(0, 0, (use("k", 10, None), use(None, 99, None)))])["k"]
    no_util = gpu_work([Device(0, None, (use("k", 10, None),))])["k"]  # a MIG device
    assert not alone_idle.busy
    assert alone_busy.busy and alone_busy.measured and alone_busy.why == "busy on GPU 0 (40% utilization)"
    assert shared.busy and not shared.measured and "other processes share" in shared.why
    assert no_util.busy and not no_util.measured


def test_a_device_computing_for_a_process_that_cannot_be_placed_keeps_the_kernels_holding_memory_there():
    computing = gpu_work([Device(2, 70, (use("k", 10, 0), use(None, 4242, 80, placed=False)))])["k"]
    quiet = gpu_work([Device(2, 0, (use("k", 10, 0), use(None, 4242, 0, placed=False)))])["k"]
    unknown = gpu_work([Device(2, 70, (use("k", 10, 0), use(None, 4242, None, placed=False)))])["k"]
    placed_other = gpu_work([Device(2, 70, (use("k", 10, 0), use(None, 4242, 80)))])["k"]
    assert computing.busy and not computing.measured and "cannot be placed" in computing.why
    assert not quiet.busy and unknown.busy and not placed_other.busy


def test_a_measured_verdict_on_one_gpu_wins_over_a_guess_on_another():
    work = gpu_work([Device(0, None, (use("k", 10, None),)), Device(1, 50, (use("k", 11, 60, child=True),))])["k"]
    assert work.busy and work.measured and work.gpu == 1 and work.gpus == (0, 1) and work.held_mib == 2048


def test_the_sidebar_line():
    idle = gpu_work([Device(1, 0, (use("k", 10, 0, 12288),))])["k"]
    assert describe(running=False, idle_s=42 * 60 + 5, work=idle)["text"] == "idle 42 min · holds 12.0 GiB"
    assert describe(running=True, idle_s=None, work=idle)["state"] == "running"
    assert describe(running=False, idle_s=3.0, work=None) == {
        "state": "idle", "idle_s": 3.0, "text": "idle 3 s", "gpu": None, "pid": None, "child": False,
        "measured": True, "held_mib": 0}
    assert describe(running=False, idle_s=None, work=None)["state"] == "unknown"
    assert [duration(s) for s in (0, 59, 60, 3599, 3600, 3 * 3600 + 300)] == [
        "0 s", "59 s", "1 min", "59 min", "1 h", "3 h 5 min"]
