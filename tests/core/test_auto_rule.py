"""Which GPUs plain `visible auto` takes (issue 31, item 7): those that qualify, no other process computing on them
and at least half their memory free (`--min-free` replaces the half); `--wait` waits for one; without it, none
qualifying, the freest, said so. Where other users' jobs filled every GPU, auto took one at once and `--wait` never
waited, so two kernels waiting both 'got' a full GPU."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from fakeclock import Clock
from gpu_fakes import NA, gpu

from tfgpu_magic.core.changes import parse_change
from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot
from tfgpu_magic.core.plan import PlanError
from tfgpu_magic.core.runtime import Probe, TFState
from tfgpu_magic.core.settings import choosing
from tfgpu_magic.core.waiting import Claims, wait_until

GIB = 1024
THEIRS = 4242  # another user's training job
AUTO_RULE = "no other process computing on it and at least half its memory free"  # as help and docs/reference.md say it
RULE_LINE = f"waiting for a GPU with {AUTO_RULE}: "


def their_job(used: int = 8 * GIB) -> GpuProcess:
    return GpuProcess(THEIRS, used, "python", "bob")


def snapshot(*gpus) -> NvmlSnapshot:
    return NvmlSnapshot(available=True, gpus=tuple(gpus))


def full(index: int, free_mib: int = 512, processes=None) -> object:
    """A 40 GiB GPU with ``free_mib`` free, another user's job on it (or ``processes``)."""
    return gpu(index, "NVIDIA A100-SXM4-40GB", 40 * GIB, 40 * GIB - free_mib,
               [their_job()] if processes is None else processes)


def controller(tmp_path: Path, snaps) -> Controller:
    """A controller with claims; ``snaps``: one snapshot, or a list read one per NVML reading (the last repeats)."""
    readings = list(snaps) if isinstance(snaps, list) else [snaps]

    def nvml():
        return readings.pop(0) if len(readings) > 1 else readings[0]

    ctl = Controller(environ={}, nvml_snapshot=nvml, prober=lambda: Probe(TFState.NOT_IMPORTED), hooks_import=False)
    ctl.claims = Claims(tmp_path / "claims", holder="kernel me")
    return ctl


def change(ctl: Controller, line: str):
    return ctl.change(parse_change(line))


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The wait's clock and sleep, so a wait of minutes takes no time."""
    fake = Clock()
    monkeypatch.setattr(choosing, "wait_until", functools.partial(wait_until, clock=fake, sleep=fake.sleep))
    return fake


def test_every_gpu_filled_by_another_user_auto_takes_the_freest_and_says_so(tmp_path):
    ctl = controller(tmp_path, snapshot(full(0), full(1), full(2, free_mib=800), full(3)))
    outcome = change(ctl, "visible auto")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "2"
    assert outcome.detail.startswith(f"auto chose GPU 2; none qualified ({AUTO_RULE}), so it took the freest: GPU 2 "
                                     f"has 0.8 GiB free of 40.0 GiB (pid {THEIRS} computes there); `--wait 10m` waits "
                                     "for one that qualifies; applied when TensorFlow is imported"), outcome.detail
    assert "\n" not in outcome.detail


def test_auto_takes_a_gpu_that_qualifies_over_a_freer_one_that_does_not(tmp_path):
    snap = snapshot(full(0, free_mib=30 * GIB),  # the freest, but another user computes there
                    gpu(1, "A", 40 * GIB, 21 * GIB),  # 19 GiB of 40 free: less than half
                    gpu(2, "A", 40 * GIB, 18 * GIB),  # 22 GiB of 40, nobody: qualifies
                    gpu(3, "A", 40 * GIB, 20 * GIB, [GpuProcess(os.getpid(), 20 * GIB, is_self=True)]))  # ours
    ctl = controller(tmp_path, snap)
    outcome = change(ctl, "visible auto")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "2"
    assert outcome.detail.startswith("auto chose GPU 2; applied"), outcome
    change(ctl, "visible auto:2")  # this kernel's own process does not disqualify GPU 3
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
    outcome = change(ctl, "visible auto:3")  # two qualify: the third is the freest of the rest, said so
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "0,2,3"
    assert f"auto chose GPUs 0, 2, 3; only 2 qualified ({AUTO_RULE}), so it took the freest of the rest too: GPU 0 " \
           f"has 30.0 GiB free of 40.0 GiB (pid {THEIRS} computes there)" in outcome.detail, outcome.detail


def test_min_free_replaces_the_half_and_keeps_the_process_rule(tmp_path):
    snap = snapshot(full(0, free_mib=30 * GIB), gpu(1, "A", 40 * GIB, 18 * GIB), gpu(2, "A", 80 * GIB, 65 * GIB))
    ctl = controller(tmp_path, snap)
    change(ctl, "visible auto --min-free 20GB")  # GPU 0 is freer, and another user computes there
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "1"
    change(ctl, "visible auto --min-free 10GB")  # 15 of 80 GiB free: less than half, and enough here
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "1"
    with pytest.raises(PlanError) as err:  # no fallback when --min-free says what is needed
        change(ctl, "visible auto:3 --min-free 10GB")
    assert "and not enough qualify now" in str(err.value) and ctl.environ["CUDA_VISIBLE_DEVICES"] == "1"
    change(ctl, "visible 0 --min-free 20GB")  # a GPU named: its free memory is the whole question
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "0"


def test_auto_wait_waits_for_a_gpu_that_qualifies(tmp_path, clock):
    busy = snapshot(full(0), full(1, free_mib=1024), full(2), full(3))
    freed = snapshot(full(0), full(1, free_mib=1024), full(2, free_mib=39 * GIB, processes=()), full(3))
    ctl = controller(tmp_path, [busy, busy, busy, freed])
    lines: list[str] = []
    ctl.on_progress = lines.append
    outcome = change(ctl, "visible auto --wait 60s")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "2" and outcome.detail.startswith("auto chose GPU 2; applied")
    assert clock.now == 3 and len(lines) == 3, lines
    assert lines[0] == (f"tfgpu: {RULE_LINE}GPU 0 has 0.5 GiB free of 40.0 GiB (pid {THEIRS} computes there), GPU 1 "
                        f"has 1.0 GiB free of 40.0 GiB (pid {THEIRS} computes there), GPU 2 has 0.5 GiB free of 40.0 "
                        f"GiB (pid {THEIRS} computes there), GPU 3 has 0.5 GiB free of 40.0 GiB (pid {THEIRS} computes "
                        "there); 0 s of 1 m")
    assert ctl.claims.held() == ("GPU-00000002-fake",)


def test_auto_wait_that_times_out_says_the_rule_and_changes_nothing(tmp_path, clock):
    ctl = controller(tmp_path, snapshot(full(0), full(1)))
    with pytest.raises(PlanError) as err:
        change(ctl, "visible auto:2 --wait 5s")
    message = str(err.value)
    assert message.startswith("tfgpu: `%tfgpu visible auto:2 --wait 5s`: nothing qualified within 5 s (waiting for 2 "
                              f"GPUs, each with {AUTO_RULE}: GPU 0 has 0.5 GiB free of 40.0 GiB"), message
    assert ctl.plan.visible is None and "CUDA_VISIBLE_DEVICES" not in ctl.environ and ctl.claims.held() == ()


def test_processes_nvml_cannot_list_leave_free_memory_to_decide(tmp_path):
    hidden = dataclasses.replace(gpu(0, "A", 40 * GIB, 4 * GIB), processes=NA)
    ctl = controller(tmp_path, snapshot(hidden, full(1)))
    change(ctl, "visible auto")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "0"
    ctl = controller(tmp_path, snapshot(dataclasses.replace(full(0), processes=NA)))
    with pytest.raises(PlanError, match=r"GPU 0 has 0\.5 GiB free \(its processes unknown\)"):
        change(ctl, "visible auto --min-free 1GB")


@pytest.mark.skipif("type" not in {f.name for f in dataclasses.fields(GpuProcess)},
                    reason="NVML's process lists carry no graphics processes yet (GpuProcess has no type field)")
def test_a_graphics_process_does_not_keep_auto_off_a_gpu(tmp_path):
    desktop = GpuProcess(1234, 180, "Xorg", "root", type="G")  # type: ignore[call-arg]
    both = GpuProcess(THEIRS, 8 * GIB, "python", "bob", type="C+G")  # type: ignore[call-arg]
    snap = snapshot(full(0, free_mib=30 * GIB, processes=[both]), full(1, free_mib=25 * GIB, processes=[desktop]))
    ctl = controller(tmp_path, snap)
    change(ctl, "visible auto")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "1"


# -- two kernels waiting: one GPU each, as GPUs free up ------------------------------------------------------------
WAITER = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from gpu_fakes import gpu
from tfgpu_magic.core.changes import parse_change
from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot
from tfgpu_magic.core.runtime import Probe, TFState
from tfgpu_magic.core.waiting import Claims

def nvml():
    state = json.loads(Path(sys.argv[1]).read_text())
    return NvmlSnapshot(available=True, gpus=tuple(
        gpu(k, "A", 40960, g["used"], [GpuProcess(pid, 1024) for pid in g["pids"]]) for k, g in enumerate(state)))

ctl = Controller(environ={}, nvml_snapshot=nvml, prober=lambda: Probe(TFState.NOT_IMPORTED), hooks_import=False)
ctl.claims = Claims(Path(sys.argv[2]), holder="kernel " + sys.argv[4])
ctl.on_progress = lambda line: print("waiting", flush=True)
ctl.change(parse_change("visible auto --wait 60s"))
print("chose", ctl.environ["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stdin.read()  # holds its claim until the test lets go, as a kernel does until its TensorFlow allocates
"""


class Waiter:
    def __init__(self, tmp_path: Path, name: str):
        support = str(Path(__file__).resolve().parents[1] / "support")
        self.process = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WAITER), str(tmp_path / "nvml.json"), str(tmp_path / "claims"),
             support, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.chose: str | None = None

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def poll(self, seconds: float) -> str | None:
        """Its next line within ``seconds``: "waiting" (a progress line), or its choice; None: nothing said."""
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return None
        if line.startswith("chose "):
            self.chose = line.split()[1]
            return self.chose
        return line

    def still_waiting(self, seconds: float) -> bool:
        """Whether it said it waits, and chose nothing, for ``seconds``."""
        said = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            said.append(self.poll(max(0.0, deadline - time.monotonic())))
        return "waiting" in said and self.chose is None

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def write_state(tmp_path: Path, gpus: list[dict]) -> None:
    temporary = tmp_path / "nvml.json.new"
    temporary.write_text(json.dumps(gpus))
    temporary.replace(tmp_path / "nvml.json")  # the waiters never read half a file


def test_two_kernels_waiting_with_plain_auto_get_one_gpu_each_as_gpus_free_up(tmp_path):
    busy = [{"used": 40448, "pids": [THEIRS]} for _ in range(4)]  # 0.5 of 40 GiB free, 100% someone else's
    write_state(tmp_path, busy)
    waiters = [Waiter(tmp_path, name) for name in ("a", "b")]
    try:
        for waiter in waiters:
            assert waiter.poll(30) == "waiting", "took a full GPU at once instead of waiting"
        write_state(tmp_path, [*busy[:2], {"used": 1024, "pids": []}, busy[3]])  # GPU 2 frees up
        deadline = time.monotonic() + 15
        while not any(w.chose for w in waiters) and time.monotonic() < deadline:
            for waiter in waiters:
                waiter.poll(0.2)
        (first,) = [w for w in waiters if w.chose]
        (other,) = [w for w in waiters if w is not first]
        assert first.chose == "2"
        assert other.still_waiting(2.5)  # GPU 2 is claimed by the first until it allocates there
        write_state(tmp_path, [*busy[:2], {"used": 8192, "pids": [first.process.pid]}, busy[3]])  # it allocated
        assert other.still_waiting(2.5)  # 31 GiB free, but another process computes there now
        write_state(tmp_path, [{"used": 2048, "pids": []}, busy[1],
                               {"used": 8192, "pids": [first.process.pid]}, busy[3]])  # GPU 0 frees up
        deadline = time.monotonic() + 15
        while other.chose is None and time.monotonic() < deadline:
            other.poll(0.5)
        assert other.chose == "0"
    finally:
        for waiter in waiters:
            waiter.close()
