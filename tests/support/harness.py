"""What the tests share that is no fixture: the repository's paths, the user's environment for a kernel, and
running real TensorFlow in a fresh process (its runtime starts once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"


def user_env(**extra: str) -> dict[str, str]:
    """A kernel's environment as a user has it: no PYTHONUNBUFFERED (it hides C-level buffering bugs), no
    TF_CPP_MIN_LOG_LEVEL, no test runner's variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONUNBUFFERED", "PYTEST_CURRENT_TEST", "TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def tf_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def run_tf(code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python with real TensorFlow available; fails the test on a non-zero exit."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env or tf_env(), timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


SHELL_PRELUDE = """
import sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
_c = Config(); _c.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=_c)
def cell(src):
    r = ip.run_cell(src)
    return r
def magic(line):
    return ip.run_line_magic("tfgpu", line)
ip.run_line_magic("load_ext", "tfgpu_magic")
"""
