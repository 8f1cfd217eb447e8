"""The command line's output into real pipes and /dev/full (tests/render/test_cli_output.py, and its views that import
TensorFlow in tests/tf/test_cli_output_tf.py): the entry points, a reader that stops early, and the checks."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

PIPE_BYTES = 4096  # the smallest pipe Linux allows: every view the tests run writes several times that
ENTRY_POINTS = {
    "tfgpu": [str(Path(sys.executable).with_name("tfgpu"))],
    "python -m tfgpu_magic": [sys.executable, "-m", "tfgpu_magic"],
}


def many_gpus_env(fake_nvml) -> dict[str, str]:
    """Enough GPUs and processes in the fake to fill a small pipe, even as text."""
    from fakenvml import n_gpus

    fake_nvml.write(n_gpus(32, procs_per_gpu=16))
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


def assert_stops_quietly_for_a_reader_that_stops_early(command: list[str], env: dict[str, str]):
    assert full_output_size(command, env) > 2 * PIPE_BYTES  # so the pipe does break
    status, head, stderr = run_into_closed_pipe(command, env, read=10)
    assert len(head) == 10
    assert_quiet(stderr)
    assert status == 141, stderr


def assert_a_full_disk_is_one_line(command: list[str], env: dict[str, str]) -> str:
    """The command's output into /dev/full: status 1 and one `tfgpu:` line; the whole stderr is returned."""
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, env=env, timeout=120)
    stderr = proc.stderr.decode()
    assert_quiet(stderr)
    assert proc.returncode == 1
    lines = [line for line in stderr.splitlines() if line.startswith("tfgpu:")]
    assert lines == ["tfgpu: cannot write the output: No space left on device"], stderr
    return stderr
