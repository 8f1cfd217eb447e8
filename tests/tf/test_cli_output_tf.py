"""`tfgpu devices`, the command line's view that imports TensorFlow, on an output that goes away or fills up and
as a user runs it (the views without TensorFlow, and why these checks: tests/render/test_cli_output.py)."""

from __future__ import annotations

import subprocess

import pytest
from clipipes import (
    ENTRY_POINTS,
    assert_a_full_disk_is_one_line,
    assert_stops_quietly_for_a_reader_that_stops_early,
    many_gpus_env,
)
from fakenvml import three_gpus

VIEWS = [("devices",), ("devices", "--json")]


@pytest.fixture
def env(fake_nvml):
    return many_gpus_env(fake_nvml)


@pytest.mark.parametrize("view", VIEWS, ids=" ".join)
def test_a_reader_that_stops_early(env, view):
    assert_stops_quietly_for_a_reader_that_stops_early(ENTRY_POINTS["python -m tfgpu_magic"] + list(view), env)


def test_a_full_disk_is_one_line(env):
    assert_a_full_disk_is_one_line(ENTRY_POINTS["python -m tfgpu_magic"] + ["devices", "--json"], env)


@pytest.mark.parametrize("view", [("devices", "--json"), ("devices",)])
def test_devices_imports_tensorflow_without_its_log_on_stderr(fake_nvml, view):
    """As a user runs it: no TF_CPP_MIN_LOG_LEVEL, so TensorFlow's absl notice and oneDNN line would reach stderr."""
    fake_nvml.write(three_gpus())
    env = {k: v for k, v in fake_nvml.env.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED")}
    proc = subprocess.run([*ENTRY_POINTS["tfgpu"], *view], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "TensorFlow" in proc.stdout and "NVIDIA A100-SXM4-40GB" in proc.stdout
