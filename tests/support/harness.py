"""What the tests share that is no fixture: the repository's paths, the user's environment for a kernel, and
running real TensorFlow in a fresh process (its runtime starts once per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"


def user_env(**extra: str) -> dict[str, str]:
    """A kernel's environment as a user has it: no PYTHONUNBUFFERED (it hides C-level buffering bugs), no
    TF_CPP_MIN_LOG_LEVEL, no test runner's variables, and nothing of the checkout on PYTHONPATH: the kernel
    imports tfgpu_magic as installed (the venv's install of this checkout)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONUNBUFFERED", "PYTEST_CURRENT_TEST", "TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES",
                        "PYTHONPATH")}
    env.update(extra)
    return env


def kernel_folder() -> str:
    """A working directory for a kernel that is not the checkout (a notebook's folder is the kernel's, and
    it comes first on sys.path: the checkout there would be imported instead of the installed package)."""
    return tempfile.mkdtemp(prefix="tfgpu-kernel-")


def frontend_code(document: dict) -> tuple[str, str]:
    """The code and the user expression the sidebar sends for ``document``, made by its own compiled constants
    (labextension/src/constants.ts), so a moved Python module fails here, not in a user's kernel."""
    node = shutil.which("node")
    assert node and (ROOT / "lib" / "constants.js").exists(), "needs Node.js and lib/ (make setup builds it)"
    script = ("import('./lib/constants.js').then(c => process.stdout.write(JSON.stringify("
              "[c.pyApplyCall(process.argv[1]), c.PY_APPLY_USER_EXPRESSION])))")
    proc = subprocess.run([node, "-e", script, json.dumps(document)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    code, expression = json.loads(proc.stdout)
    return code, expression


def first_cell_by_the_sidebar(document: dict) -> str:
    """What the sidebar's "Write as first cell" writes: labextension/src/model/saved.ts's firstCellSource, compiled,
    with the registry's setting words as the sidebar receives them (``setting_words``)."""
    from tfgpu_magic.core.settings import wire_words

    node = shutil.which("node")
    assert node and (ROOT / "lib" / "model" / "index.js").exists(), "needs Node.js and lib/ (make setup builds it)"
    script = ("import('./lib/model/index.js').then(m => process.stdout.write(m.firstCellSource("
              "JSON.parse(process.argv[1]), m.readSettingWords(JSON.parse(process.argv[2])))))")
    proc = subprocess.run([node, "-e", script, json.dumps(document), json.dumps(wire_words())], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


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
