"""The command line on an output that goes away or fills up, through real pipes and /dev/full: a reader that
stops early (`tfgpu status --json | head -c 10`) ends it quietly with status 141, a full disk is one
`tfgpu:` line and status 1; never a traceback, never "Exception ignored" at interpreter exit."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakenvml import n_gpus, three_gpus, with_changes

PIPE_BYTES = 4096  # the smallest pipe Linux allows: every view below writes several times that
ENTRY_POINTS = {
    "tfgpu": [str(Path(sys.executable).with_name("tfgpu"))],
    "python -m tfgpu_magic": [sys.executable, "-m", "tfgpu_magic"],
}
VIEWS = [("status", "--json"), ("status",), ("devices",), ("devices", "--json")]


@pytest.fixture
def env(fake_nvml):
    fake_nvml.write(n_gpus(32, procs_per_gpu=16))  # enough GPUs and processes to fill a small pipe, even as text
    return {**fake_nvml.env, "TF_CPP_MIN_LOG_LEVEL": "2"}


def assert_quiet(stderr: str):
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


def run_into_closed_pipe(command: list[str], env: dict[str, str], read: int) -> tuple[int, bytes, str]:
    """Run ``command`` with stdout on a pipe whose reader takes ``read`` bytes and closes it, as `| head -c`
    does: (exit status, the bytes read, stderr). Before the close at most PIPE_BYTES + ``read`` bytes got
    out, so a command writing more meets a broken pipe."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    proc = subprocess.Popen(command, stdout=writer, stderr=subprocess.PIPE, env=env)
    os.close(writer)
    head = b""
    while len(head) < read and (chunk := os.read(reader, read - len(head))):
        head += chunk
    os.close(reader)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, head, stderr.decode()


def full_output_size(command: list[str], env: dict[str, str]) -> int:
    proc = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return len(proc.stdout)


@pytest.mark.parametrize("view", VIEWS, ids=" ".join)
def test_a_reader_that_stops_early(env, view):
    command = ENTRY_POINTS["python -m tfgpu_magic"] + list(view)
    assert full_output_size(command, env) > 2 * PIPE_BYTES  # so the pipe does break
    status, head, stderr = run_into_closed_pipe(command, env, read=10)
    assert len(head) == 10
    assert_quiet(stderr)
    assert status == 141, stderr


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
    ("tfgpu", ("status", "--json")), ("tfgpu", ("status",)),
    ("python -m tfgpu_magic", ("status", "--json")), ("python -m tfgpu_magic", ("devices", "--json")),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_a_full_disk_is_one_line(env, entry, view):
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(ENTRY_POINTS[entry] + list(view), stdout=full, stderr=subprocess.PIPE, env=env,
                              timeout=120)
    stderr = proc.stderr.decode()
    assert_quiet(stderr)
    assert proc.returncode == 1
    lines = [line for line in stderr.splitlines() if line.startswith("tfgpu:")]
    assert lines == ["tfgpu: cannot write the output: No space left on device"], stderr
    if view[0] == "status":
        assert stderr == lines[0] + "\n"


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


@pytest.mark.parametrize("view", [("devices", "--json"), ("devices",)])
def test_devices_imports_tensorflow_without_its_log_on_stderr(fake_nvml, view):
    """As a user runs it: no TF_CPP_MIN_LOG_LEVEL, so TensorFlow's absl notice and oneDNN line would reach stderr."""
    fake_nvml.write(three_gpus())
    env = {k: v for k, v in fake_nvml.env.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED")}
    proc = subprocess.run([*ENTRY_POINTS["tfgpu"], *view], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "TensorFlow" in proc.stdout and "NVIDIA A100-SXM4-40GB" in proc.stdout
