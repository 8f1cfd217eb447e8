"""The command line on an output that goes away or fills up, through real pipes and /dev/full: a reader that
stops early (`tfgpu status --json | head -c 10`) ends it quietly with status 141, a full disk is one
`tfgpu:` line and status 1; never a traceback, never "Exception ignored" at interpreter exit. The views that import
TensorFlow (`tfgpu devices`) are tests/tf/test_cli_output_tf.py."""

from __future__ import annotations

import os
import subprocess

import pytest
from clipipes import (
    ENTRY_POINTS,
    assert_a_full_disk_is_one_line,
    assert_quiet,
    assert_stops_quietly_for_a_reader_that_stops_early,
    many_gpus_env,
    run_into_closed_pipe,
)
from fakenvml import three_gpus, with_changes

VIEWS = [("status", "--json"), ("status",)]  # `devices` imports TensorFlow: tests/tf/test_cli_output_tf.py


@pytest.fixture
def env(fake_nvml):
    return many_gpus_env(fake_nvml)


@pytest.mark.parametrize("view", VIEWS, ids=" ".join)
def test_a_reader_that_stops_early(env, view):
    assert_stops_quietly_for_a_reader_that_stops_early(ENTRY_POINTS["python -m tfgpu_magic"] + list(view), env)


def test_the_installed_script_too(env):
    status, _, stderr = run_into_closed_pipe(ENTRY_POINTS["tfgpu"] + ["status", "--json"], env, read=10)
    assert_quiet(stderr)
    assert status == 141, stderr


def test_help_into_a_reader_that_is_gone(env):
    # The help is smaller than any pipe: it breaks only when the reader is gone before it is written.
    reader, writer = os.pipe()
    os.close(reader)
    proc = subprocess.run(ENTRY_POINTS["tfgpu"] + ["--help"], stdout=writer, stderr=subprocess.PIPE, env=env,
                          timeout=60)
    os.close(writer)
    assert_quiet(proc.stderr.decode())
    assert proc.returncode == 141


@pytest.mark.parametrize(("entry", "view"), [
    ("tfgpu", ("status", "--json")), ("tfgpu", ("status",)), ("python -m tfgpu_magic", ("status", "--json")),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_a_full_disk_is_one_line(env, entry, view):
    stderr = assert_a_full_disk_is_one_line(ENTRY_POINTS[entry] + list(view), env)
    assert stderr == "tfgpu: cannot write the output: No space left on device\n"


def test_a_closed_stdout_is_one_line(env):
    command = ["sh", "-c", 'exec "$0" "$@" >&-', *ENTRY_POINTS["tfgpu"], "status"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == "tfgpu: cannot write the output: standard output is closed\n"


def test_a_name_the_terminal_cannot_show_is_escaped(fake_nvml):
    fake_nvml.write(with_changes(three_gpus(), gpu2={"name": "Tesla T4 \u2013 caf\u00e9"}))
    proc = subprocess.run(ENTRY_POINTS["tfgpu"] + ["status"], capture_output=True, text=True, timeout=60,
                          env={**fake_nvml.env, "PYTHONIOENCODING": "ascii"})
    assert_quiet(proc.stderr)
    assert proc.returncode == 0
    assert "Tesla T4 \\u2013 caf\\xe9" in proc.stdout


def test_ctrl_c_during_a_slow_driver_call_is_one_line_and_status_130(fake_nvml, tmp_path):
    """The driver takes 3 s to count its GPUs; Ctrl-C (SIGINT) while it does ends the command as a shell tool
    ends: one line on stderr, status 130, no traceback."""
    import signal
    import time

    from fakenvml import CALL_LOG_ENV

    calls = tmp_path / "calls.log"
    fake_nvml.write(dict(three_gpus(), delays={"nvmlDeviceGetCount_v2": 3000}))
    proc = subprocess.Popen([*ENTRY_POINTS["tfgpu"], "status"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**fake_nvml.env, CALL_LOG_ENV: str(calls)})
    deadline = time.monotonic() + 60
    while "nvmlDeviceGetCount_v2" not in (calls.read_text() if calls.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == "tfgpu: interrupted\n" and out == "", (out, err)
