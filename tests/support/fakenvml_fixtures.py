"""pytest fixtures for the fake libnvidia-ml.so.1 (registered in conftest.py through pytest_plugins).

``fake_nvml`` gives a config file, an environment and ``run_python`` for a child process in which the
real pynvml loads the fake: glibc reads LD_LIBRARY_PATH only at process start, so every test that reads
fake GPUs does so in a fresh subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakenvml import FakeNvmlUnavailable, build_fake_nvml, fake_env, write_config

_SNAPSHOTS = """
import json, os
from tfgpu_magic.core import nvml
snaps = [nvml.snapshot().to_dict() for _ in range({n})]
print(json.dumps({{"pid": os.getpid(), "snaps": snaps}}))
"""


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the fake libnvidia-ml.so.1, compiled once per test session."""
    try:
        return build_fake_nvml(tmp_path_factory.mktemp("fakenvml"))
    except FakeNvmlUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def fake_nvml_r470_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake as a driver before R510 (no memory info v2, _v2 process lists), compiled once."""
    try:
        return build_fake_nvml(tmp_path_factory.mktemp("fakenvml_r470"), generation="r470")
    except FakeNvmlUnavailable as exc:
        pytest.skip(str(exc))


@dataclass
class FakeNvml:
    lib_dir: Path
    config_path: Path
    call_log: Path

    @property
    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should see the fake GPUs (and log its NVML calls)."""
        return fake_env(self.lib_dir, self.config_path, call_log=self.call_log)

    def write(self, config: dict[str, Any]) -> Path:
        """Describe the fake GPUs; a running child notices on its next device count/handle call."""
        return write_config(self.config_path, config)

    def run_python(self, code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``python -c code`` (this interpreter) against the fake; output captured as text."""
        return subprocess.run(
            [sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def run_json(self, code: str, timeout: float = 60) -> Any:
        """Run ``code``, which must print one JSON document per line; return the parsed last line.
        A failing child fails the test with its stderr."""
        proc = self.run_python(code, timeout=timeout)
        assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr}"
        lines = proc.stdout.strip().splitlines()
        assert lines, f"child printed nothing; stderr:\n{proc.stderr}"
        return json.loads(lines[-1])

    def snapshots(self, n: int = 1) -> tuple[int, list[dict[str, Any]]]:
        """Take ``n`` snapshots in one child process: (the child's pid, each ``snapshot().to_dict()``)."""
        out = self.run_json(_SNAPSHOTS.format(n=n))
        return out["pid"], out["snaps"]

    def one_snapshot(self, config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Describe the GPUs as ``config``, then (the child's pid, one ``snapshot().to_dict()``) that NVML answered."""
        self.write(config)
        pid, (snap,) = self.snapshots()
        assert snap["available"] is True and snap["error"] is None
        return pid, snap

    def calls(self) -> list[str]:
        """NVML functions the children called so far, in order."""
        return self.call_log.read_text().split() if self.call_log.exists() else []


@pytest.fixture
def fake_nvml(tmp_path: Path, fake_nvml_lib: Path) -> FakeNvml:
    """A fake NVML with no GPUs yet (``.write(config)`` to describe some)."""
    fake = FakeNvml(fake_nvml_lib.parent, tmp_path / "fake_nvml.cfg", tmp_path / "nvml_calls.log")
    fake.write({})
    return fake


@pytest.fixture
def fake_nvml_r470(tmp_path: Path, fake_nvml_r470_lib: Path) -> FakeNvml:
    """Like ``fake_nvml``, with the symbol set of a driver before R510."""
    fake = FakeNvml(fake_nvml_r470_lib.parent, tmp_path / "fake_nvml.cfg", tmp_path / "nvml_calls.log")
    fake.write({})
    return fake
