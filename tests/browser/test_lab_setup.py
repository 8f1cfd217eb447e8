"""`make lab` opens JupyterLab on a working copy of the course in course/ (git-ignored), never on the tracked
notebooks: doing the course saves outputs and new notebooks there, and `make test` keeps passing.

`make course` (which `make lab` runs first) is notebooks/prepare_course.py; test_course.py runs every notebook
in a copy that script makes and checks the repository is left as it was. These tests check the Makefile
wiring and the script's rules, without starting JupyterLab."""

import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from harness import ROOT

REPO = ROOT
NOTEBOOKS = REPO / "notebooks"
SCRIPT = NOTEBOOKS / "prepare_course.py"


def _prepare(dest, *extra):
    return subprocess.run([sys.executable, str(SCRIPT), str(dest), *extra], capture_output=True, text=True,
                          timeout=60)


def test_lab_prepares_the_working_copy_and_serves_it_opening_the_start_page():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # -n prints the commands without running them (nor the set-up of .venv)
    proc = subprocess.run(["make", "-n", "--no-print-directory", "lab", "COURSE=elsewhere"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.replace("\\\n", " ").splitlines()
    prepare = [i for i, line in enumerate(lines) if re.search(r'notebooks/prepare_course\.py "?elsewhere"?$', line)]
    lab = [i for i, line in enumerate(lines) if " lab " in f"{line} " and "jupyter" in line]
    assert prepare and lab and prepare[0] < lab[0], proc.stdout
    command = " ".join(lines[lab[0]].split())
    assert re.search(r'--ServerApp\.root_dir="?elsewhere"? ', command), command
    # The URL the server prints (and the browser it opens) is the start page of the working copy.
    assert "--LabApp.default_url=/lab/tree/00_start.ipynb" in command, command
    assert "notebooks/" not in command, command
    assert command.startswith("env -u PYTHONUNBUFFERED "), command


def test_the_default_working_copy_is_ignored_by_git():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("course/00_start.ipynb", "course/Untitled.ipynb", "course/.ipynb_checkpoints/x.ipynb"):
        proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO)
        assert proc.returncode == 0, f"{path} is not ignored by git"
    proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", "notebooks/00_start.ipynb"], cwd=REPO)
    assert proc.returncode == 1, "the tracked notebooks must not be ignored"


def test_prepare_copies_the_course_and_keeps_the_learners_work(tmp_path):
    dest = tmp_path / "course"
    first = _prepare(dest)
    assert first.returncode == 0, first.stderr
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert sorted(p.name for p in dest.iterdir()) == names
    assert all((dest / n).read_bytes() == (NOTEBOOKS / n).read_bytes() for n in names)
    assert "00_start.ipynb" in names and "copied: 00_start.ipynb" in first.stdout

    # The learner's work: outputs saved into a lesson, a lesson deleted to start it afresh, a new notebook.
    work = nbformat.read(dest / "01_devices.ipynb", as_version=4)
    code = next(c for c in work.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="the learner's output\n")]
    code.execution_count = 1
    nbformat.write(work, dest / "01_devices.ipynb")
    saved = (dest / "01_devices.ipynb").read_bytes()
    (dest / "04_placement.ipynb").unlink()
    (dest / "Untitled.ipynb").write_text("{}")

    again = _prepare(dest)
    assert again.returncode == 0, again.stderr
    assert (dest / "01_devices.ipynb").read_bytes() == saved
    assert (dest / "04_placement.ipynb").read_bytes() == (NOTEBOOKS / "04_placement.ipynb").read_bytes()
    assert (dest / "Untitled.ipynb").read_text() == "{}"
    assert "copied: 04_placement.ipynb" in again.stdout and "kept your copy of: 00_start.ipynb" in again.stdout


def test_prepare_never_writes_into_the_tracked_notebooks():
    proc = _prepare(NOTEBOOKS)
    assert proc.returncode != 0 and "must not be notebooks/" in proc.stderr + proc.stdout
    assert _prepare("a", "b").returncode == 2
