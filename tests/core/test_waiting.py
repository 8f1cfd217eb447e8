"""Waiting for a GPU: durations, claims held with flock by a process (ending with it), and the wait loop's
timeout, interruption and progress, without a kernel."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from fakeclock import Clock
from message_sweep import one_answer

from tfgpu_magic.core.plan import PlanError
from tfgpu_magic.core.waiting import Claims, holder_name, parse_duration, wait_until


@pytest.mark.parametrize(("text", "seconds"), [("30", 30), ("30s", 30), ("10m", 600), ("2h", 7200), ("1.5h", 5400),
                                               (" 45 S ", 45), ("7d", 604800), (".5m", 30)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "said"), [
    ("-1s", "expected a duration"), ("10 years", "unknown unit 'years'"), ("1e400s", "expected a duration"),
    ("10y", "unknown unit 'y'"), ("8d", "at most 7 days"), ("0", "more than 0 s"), ("", "expected a duration"),
    ("9" * 5000, "at most 7 days"), ("nan", "expected a duration"), ("inf", "expected a duration"),
])
def test_bad_durations_are_one_line_naming_the_value(text, said):
    with pytest.raises(PlanError) as err:
        parse_duration(text)
    message = str(err.value)
    assert message.startswith("tfgpu: bad --wait duration") and said in message and "\n" not in message
    assert len(message) < 300


HOLD = """
import sys, time
from pathlib import Path
from tfgpu_magic.core.waiting import Claims
claims = Claims(Path(sys.argv[1]), holder="kernel 4f2c8a1e")
print(claims.claim("GPU-aaa"), flush=True)
time.sleep(60)
"""


def test_a_claim_is_another_processes_until_it_ends(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLD), str(tmp_path)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "True"
        mine = Claims(tmp_path, holder="me")
        assert not mine.claim("GPU-aaa")  # held by the child
        (claim,) = mine.others(["GPU-aaa", "GPU-bbb"]).values()
        assert claim.pid == child.pid and claim.describe() == (f"claimed by kernel 4f2c8a1e (pid {child.pid}), "
                                                                "waiting for it to allocate")
        assert mine.claim("GPU-bbb") and mine.held() == ("GPU-bbb",)
    finally:
        child.kill()
        child.wait()
    assert mine.others(["GPU-aaa"]) == {}  # the process ended: its claim with it
    assert mine.claim("GPU-aaa")
    mine.release()
    assert mine.held() == () and Claims(tmp_path).others(["GPU-aaa", "GPU-bbb"]) == {}


def test_the_holder_is_named_by_its_kernel_connection_file(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f",
                                      "/run/user/1000/jupyter/runtime/kernel-4f2c8a1e-77aa-4b1c-9c1d-0e2f3a4b5c6d.json"])
    assert holder_name() == "kernel 4f2c8a1e"
    monkeypatch.setattr(sys, "argv", ["python"])
    assert holder_name().startswith("pid ")


def test_the_wait_loop_times_out_reports_progress_and_stops_on_ctrl_c():
    clock, lines = Clock(), []
    with pytest.raises(PlanError, match=r"^tfgpu: `x`: nothing qualified within 3 s \(GPU 0 busy\); nothing changed"):
        wait_until(lambda: (None, "GPU 0 busy"), 3, "`x`", lines.append, clock=clock, sleep=clock.sleep)
    assert lines == ["tfgpu: GPU 0 busy; 0 s of 3 s", "tfgpu: GPU 0 busy; 1 s of 3 s", "tfgpu: GPU 0 busy; 2 s of 3 s"]
    answers = iter([(None, "a"), (None, "b"), ("GPU 2", "c")])
    assert wait_until(lambda: next(answers), 60, "`x`", clock=clock, sleep=clock.sleep) == "GPU 2"

    def interrupted(_seconds):
        raise KeyboardInterrupt

    with pytest.raises(PlanError, match=r"interrupted after 0 s; nothing changed$"):
        wait_until(lambda: (None, "a"), 60, "`x`", clock=clock, sleep=interrupted)


# -- a --min-free no GPU could ever meet -------------------------------------------------------------------------
def _three_gpu_controller(tmp_path, start: dict | None = None):
    import gpu_fakes

    from tfgpu_magic.core.assignment import Assignment
    from tfgpu_magic.core.control import Controller
    from tfgpu_magic.core.runtime import Probe, TFState

    ctl = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus, prober=lambda: Probe(TFState.NOT_IMPORTED),
                     hooks_import=False, assignment=Assignment.from_environ(start or {}))
    ctl.claims = Claims(tmp_path / "claims")
    return ctl


@pytest.mark.parametrize(("line", "said"), [
    ("visible auto --min-free 15TiB --wait 7d", "more than any of this machine's GPUs has in all (the largest, GPU 2, "
                                                "has 80GiB)"),
    ("visible auto:2 --min-free 50GB --wait 1h", "more than 2 of this machine's GPUs have in all"),
    ("visible 0 --min-free 41GiB --wait 10m", "more than any of the GPUs named has in all (the largest, GPU 0"),
    ("visible auto --min-free 90GiB", "more than any of this machine's GPUs"),
])
def test_a_min_free_no_gpu_could_ever_meet_is_refused_by_check_and_at_once(tmp_path, line, said):
    """Check & save refused nothing here, and each kernel start then waited up to the whole --wait."""
    import time

    from tfgpu_magic.core import saved
    from tfgpu_magic.core.changes import parse_change

    ctl = _three_gpu_controller(tmp_path)
    errors = saved.check({"settings": {"visible": line.removeprefix("visible ")}}, ctl)
    assert set(errors) == {"visible"} and said in errors["visible"] and "lower --min-free" in errors["visible"], errors
    assert errors["visible"].startswith("tfgpu: `%tfgpu visible ") and one_answer(errors["visible"])
    started = time.monotonic()
    with pytest.raises(PlanError) as err:
        ctl.change(parse_change(line))
    assert time.monotonic() - started < 1 and str(err.value) == errors["visible"]
    assert ctl.plan.visible is None and not ctl.claims.held()


def test_a_min_free_a_gpu_could_meet_later_is_accepted(tmp_path):
    from tfgpu_magic.core import saved

    ctl = _three_gpu_controller(tmp_path)
    # 30 GiB: none has it free now (the wait's business), but GPU 0 (40 GiB) and GPU 2 (80 GiB) could.
    assert saved.check({"settings": {"visible": "auto --min-free 30GiB --wait 7d"}}, ctl) == {}
    assert saved.check({"settings": {"visible": "auto:2 --min-free 40GiB --wait 1h"}}, ctl) == {}
    # Given GPUs 0 and 1 by the scheduler, 50 GiB is out of reach although GPU 2 has 80.
    given = _three_gpu_controller(tmp_path, {"CUDA_VISIBLE_DEVICES": "0,1"})
    (message,) = saved.check({"settings": {"visible": "auto --min-free 50GiB --wait 1h"}}, given).values()
    assert "any of this kernel's GPUs" in message and "GPU 0, has 40GiB" in message, message
