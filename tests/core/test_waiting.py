"""Waiting for a GPU: durations, claims held with flock by a process (ending with it), and the wait loop's
timeout, interruption and progress, without a kernel."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

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


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


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
