"""What `make lab` and `make test` would install, read from `make -n` (which prints the commands and runs none) in
a copy of the Makefile whose `.venv` is in each state a user's can be in: none yet, after `make lab`, after `make
test`, after `make lab GPU=1`.

- `make lab` installs the course only (the `lab` extra and one TensorFlow), says each step, and `make test`'s install
  is never satisfied by it;
- `make lab GPU=1` installs tensorflow[and-cuda] in place of tensorflow-cpu, which goes first (both are one
  `tensorflow` package folder: pip installs one over the other without removing it), and a later `make lab` keeps
  it; `make test` puts tensorflow-cpu back the same way.

The install itself (minutes, the network) is not run here: a fresh clone's `make lab` is checked by hand, and the
README's GPU commands with `pip install --dry-run` (see the README)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess

import pytest
from harness import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# tensorflow-cpu has wheels for x86-64 Linux only (and Windows); elsewhere `tensorflow` is the CPU build.
CPU = "tensorflow-cpu" if (platform.system(), platform.machine()) == ("Linux", "x86_64") else "tensorflow"
PAST = 1_000_000_000  # an old mtime: the stamps written after it are newer than pyproject.toml


@pytest.fixture
def clone(tmp_path):
    """The Makefile and pyproject.toml beside empty stand-ins for the sidebar's sources."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
        os.utime(tmp_path / name, (PAST, PAST))
    for name in ("package.json", "tsconfig.json", "yarn.lock"):
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (PAST, PAST))
    return tmp_path


def _venv(clone, *stamps):
    """A .venv as an earlier install left it: its python and the stamps it wrote."""
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").write_text("")
    for stamp in stamps:
        (clone / ".venv" / stamp).write_text("")


def _dry(clone, *args):
    proc = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=clone, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _installs(out):
    """The arguments of each `pip install -e` the commands run."""
    return [line.split(" install -e ", 1)[1].strip() for line in out.splitlines() if " pip install -e " in line]


def _says(out):
    return [m.group(1) for m in re.finditer(r'^echo "make \w[\w-]*:" "([^"]*)"', out, re.M)]


def test_make_lab_on_a_fresh_clone_installs_the_course_only_and_says_each_step(clone):
    out = _dry(clone, "lab")
    assert _installs(out) == [f'".[lab]" "{CPU}>=2.13"'], out
    assert _says(out) == ["creating .venv (a Python environment of its own)",
                          "installing JupyterLab and TensorFlow (a few minutes)",
                          "building the sidebar (about a minute)",
                          "copying the course into course/",
                          "starting JupyterLab on course/00_start.ipynb (Ctrl-C twice stops it)"], out
    # pip's own progress shows: the install is not silenced.
    assert not re.search(r"pip install (-q|--quiet) -e", out), out


def test_the_lab_extra_names_no_test_tool_and_no_tensorflow():
    # Read as text: tomllib is Python 3.11's, and the suite runs on 3.10 too.
    lab = re.search(r"^lab = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert [re.split(r"[<>=!\[ ]", r)[0] for r in re.findall(r'"([^"]+)"', lab)] == ["jupyterlab"], lab


def test_make_test_installs_the_test_tools_even_after_make_lab(clone):
    _venv(clone, ".lab-cpu-stamp")
    out = _dry(clone, "test")
    assert _installs(out) == [f'".[test,lab,bench]" "{CPU}>=2.13"'], out


def test_make_lab_after_make_test_installs_nothing(clone):
    _venv(clone, ".installed-stamp", ".lab-cpu-stamp")
    out = _dry(clone, "lab")
    assert _installs(out) == [], out
    assert "jupyter lab" in out


def test_make_lab_gpu_puts_the_cuda_tensorflow_in_place_of_tensorflow_cpu(clone):
    _venv(clone, ".installed-stamp", ".lab-cpu-stamp")
    out = _dry(clone, "lab", "GPU=1")
    assert _installs(out) == ['".[lab]" "tensorflow[and-cuda]>=2.13"'], out
    remove = out.index("pip uninstall -y -q tensorflow-cpu")
    assert remove < out.index(" pip install -e "), out
    # The tests' install held tensorflow-cpu: it no longer holds, nor does the CPU course's.
    assert re.search(r"^rm -f \.venv/\.lab-cpu-stamp \.venv/\.installed-stamp$", out, re.M), out


def test_a_later_make_lab_keeps_the_cuda_tensorflow_until_told_otherwise(clone):
    _venv(clone, ".lab-cuda-stamp")
    assert _installs(_dry(clone, "lab")) == []
    back = _dry(clone, "lab", "GPU=")
    assert _installs(back) == [f'".[lab]" "{CPU}>=2.13"'], back
    if CPU == "tensorflow-cpu":  # elsewhere the CUDA build and the CPU one are one distribution, tensorflow
        assert back.index("pip uninstall -y -q tensorflow;") < back.index(" pip install -e "), back


def test_make_test_after_make_lab_gpu_puts_tensorflow_cpu_back_first(clone):
    _venv(clone, ".lab-cuda-stamp")
    out = _dry(clone, "test")
    assert _installs(out) == [f'".[test,lab,bench]" "{CPU}>=2.13"'], out
    if CPU == "tensorflow-cpu":
        assert out.index("pip uninstall -y -q tensorflow;") < out.index(" pip install -e "), out


def test_gpu_is_refused_for_the_tests(clone):
    proc = subprocess.run(["make", "-n", "test", "GPU=1"], cwd=clone, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "GPU=1 is for `make lab` only" in proc.stderr, proc.stderr


def test_lab_args_reach_jupyter_lab(clone):
    _venv(clone, ".lab-cpu-stamp")
    out = _dry(clone, "lab", "LAB_ARGS=--no-browser --port 8888")
    line = next(" ".join(line.split()) for line in out.replace("\\\n", " ").splitlines() if "jupyter lab " in line)
    assert line.endswith("--LabApp.default_url=/lab/tree/00_start.ipynb --no-browser --port 8888"), line
