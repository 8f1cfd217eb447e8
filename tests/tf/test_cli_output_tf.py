"""`tfgpu devices --tensorflow`, the command line's one view that imports TensorFlow, on an output that goes away or
fills up and as a user runs it: quiet on stderr for a script, a progress line first on a terminal (the views without
TensorFlow, and why these checks: tests/render/test_cli_output.py)."""

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

VIEWS = [("devices", "--tensorflow"), ("devices", "--json", "--tensorflow")]


@pytest.fixture
def env(fake_nvml):
    return many_gpus_env(fake_nvml)


@pytest.mark.parametrize("view", VIEWS, ids=" ".join)
def test_a_reader_that_stops_early(env, view):
    assert_stops_quietly_for_a_reader_that_stops_early(ENTRY_POINTS["python -m tfgpu_magic"] + list(view), env)


def test_a_full_disk_is_one_line(env):
    assert_a_full_disk_is_one_line(ENTRY_POINTS["python -m tfgpu_magic"] + ["devices", "--json", "--tensorflow"], env)


@pytest.mark.parametrize("view", [("devices", "--json", "--tensorflow"), ("devices", "--tensorflow")])
def test_devices_imports_tensorflow_without_its_log_on_stderr(fake_nvml, view):
    """As a user runs it: no TF_CPP_MIN_LOG_LEVEL, so TensorFlow's absl notice and oneDNN line would reach stderr;
    stderr is no terminal, so no progress line either."""
    fake_nvml.write(three_gpus())
    env = {k: v for k, v in fake_nvml.env.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED")}
    proc = subprocess.run([*ENTRY_POINTS["tfgpu"], *view], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "TensorFlow" in proc.stdout and "NVIDIA A100-SXM4-40GB" in proc.stdout


def test_on_a_terminal_the_import_says_so_first(fake_nvml):
    """stderr on a terminal (a pseudo-terminal here): one line before the seconds of `import tensorflow`, then the
    answer on stdout; TensorFlow's own start-up lines are still kept off the terminal."""
    import os
    import pty

    fake_nvml.write(three_gpus())
    env = {k: v for k, v in fake_nvml.env.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED")}
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([*ENTRY_POINTS["tfgpu"], "devices", "--tensorflow"], stdout=subprocess.PIPE,
                              stderr=follower, text=True, env=env, timeout=120)
        os.close(follower)
        follower = -1
        said = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's last writer has closed it
                break
            if not chunk:
                break
            said += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    assert said.decode().replace("\r\n", "\n") == "tfgpu: importing TensorFlow (a few seconds)...\n"
    assert "TensorFlow physical devices: CPU:0" in proc.stdout
