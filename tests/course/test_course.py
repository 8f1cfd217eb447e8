"""The teaching course (notebooks/00_start.ipynb and the lessons 01_*.ipynb ... 08_*.ipynb): each notebook runs
top to bottom in a real kernel on a machine without a GPU and shows what it teaches.

test_notebooks.py checks that every notebook is stripped of outputs; these tests run each notebook the way
`make lab` has a learner run it: in a working copy made by notebooks/prepare_course.py (the script `make lab`
runs), with the kernel started there and the executed notebook saved there, as JupyterLab saves it. Doing the
course must leave the repository as it was (git status, and the tracked notebooks byte for byte). They check
what each notebook must show (its key outputs), that what a lesson's text quotes from its outputs is really
there, the bilingual opening every lesson starts with, and the rules for magics and deliberate errors."""

import functools
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from harness import ROOT

NOTEBOOKS_DIR = ROOT / "notebooks"
REPO = NOTEBOOKS_DIR.parent
LESSONS = sorted(NOTEBOOKS_DIR.glob("0[1-8]_*.ipynb"))
COURSE = sorted(NOTEBOOKS_DIR.glob("0[0-8]_*.ipynb"))  # the start page and the lessons
CJK = re.compile(r"[\u4e00-\u9fff]")

# For each lesson, strings its executed outputs must contain (on a machine without a GPU).
EXPECTED = {
    "00": ["/device:CPU:2", "too late", "restart the kernel", "MirroredStrategy over 3 device(s)"],
    "01": ["physical: /physical_device:CPU:0", "logical: /device:CPU:1", "too late", "restart the kernel"],
    "02": ["CUDA_DEVICE_ORDER    = PCI_BUS_ID", "CUDA_VISIBLE_DEVICES = 0", "`%tfgpu visible auto` needs NVML"],
    "03": ["conflicts with growth", "TensorFlow allocator memory"],
    "04": ["b was computed on /job:localhost/replica:0/task:0/device:CPU:1", "asked for /CPU:7, ran on",
           "d was computed on /job:localhost/replica:0/task:0/device:CPU:2", "fallback: asked /CPU:7",
           # the error's first line in full, not cut mid-word
           "InvalidArgumentError: Could not satisfy device specification", "All available devices [/job:"],
    "05": ["device:CPU:1", "same result", "one device:"],
    "06": ["Number of devices: 2", "MirroredStrategy over 2 device(s)", "replicas: 2 loss after 1 epoch"],
    "07": ["/job:localhost/replica:0/task:0/device:CPU:1 CPU", "matmul result: [[11.]]", "tf.compat.v1.ConfigProto()"],
    "08": ["worker 0: replicas=2", "worker 1: replicas=2", "w=2.000"],
}

# Words a lesson's text quotes from its own outputs (on a machine without a GPU): each must appear both in the
# lesson's markdown and in what its cells show (text or HTML; whitespace runs count as one space).
QUOTED = {
    "02": ["waiting for import", "GPU 0 not checked", "applied (through CUDA_VISIBLE_DEVICES)",
           "through CUDA_VISIBLE_DEVICES"],
    "03": ["waiting for import", "no GPU to apply to"],
    # the HTML form (what a notebook shows) flags a fallback with ⚠, the text form (a terminal) with !!
    "04": ["⚠ fallback", "!! fallback", "executed", "placed", "_Arg", "_Retval", "asked"],
    "06": ["waiting for import", "cpus 2: applied", "virtual 2GiB,2GiB: no GPU to apply to", "no_gpu",
           "TensorFlow sees no GPU; the setting applies where there is one"],
    "07": ["no GPU to apply to"],
}


# TensorFlow's own log as it prints it (tfgpu's folded block reads differently): must not reach a cell.
RAW_TF_LOG = re.compile(r"absl::InitializeLog|^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"
                        r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]|^(?:INFO|WARNING|ERROR):tensorflow:",
                        re.M)


def _ids(paths):
    return [p.name for p in paths]


def _text(nb, with_html=False):
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.outputs:
            if out.output_type == "stream":
                parts.append(out.text)
            elif out.output_type == "error":
                parts.append(f"{out.ename}: {out.evalue}")
            else:
                data = out.get("data", {})
                parts.append(str(data.get("text/plain", "")))
                if with_html and "text/html" in data:
                    parts.append(html.unescape(re.sub(r"<[^>]+>", " ", str(data["text/html"]))))
    return "\n".join(parts)


def _words(text):
    return " ".join(text.split())


def _repo_state():
    """What doing the course could change: `git status` (None outside a git checkout) and every file in
    notebooks/, ignored ones too, with the tracked notebooks' bytes."""
    status = None
    if shutil.which("git"):
        proc = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=all"],
                              cwd=REPO, capture_output=True, text=True)
        if proc.returncode == 0:
            status = set(proc.stdout.splitlines())
    files = {str(p.relative_to(NOTEBOOKS_DIR)): p.read_bytes() if p.suffix == ".ipynb" else None
             for p in NOTEBOOKS_DIR.rglob("*") if p.is_file()}
    return status, files


def _assert_unchanged(before, what):
    status, files = _repo_state()
    if before[0] is not None and status is not None:
        # Only new or changed entries count: other work in the same checkout may commit meanwhile.
        new = sorted(status - before[0])
        assert not new, f"{what} changed the repository (git status): {new}"
    added = sorted(set(files) - set(before[1]))
    changed = sorted(n for n in files if n in before[1] and files[n] != before[1][n])
    assert not added and not changed, f"{what} wrote into notebooks/: added {added}, changed {changed}"


@functools.cache
def _onednn() -> bool:
    """Whether this machine's TensorFlow runs oneDNN's CPU kernels (by default only on CPUs with AVX-512 VNNI, BF16 or
    AMX): only then does a placement log name `_MklMatMul`."""
    proc = subprocess.run([sys.executable, "-c", "from tensorflow.python.util import _pywrap_util_port as p; "
                           "print(p.IsMklEnabled())"], capture_output=True, text=True, timeout=120)
    return proc.stdout.strip().endswith("True")


@pytest.fixture(scope="module")
def working_copy(tmp_path_factory):
    """The learner's copy of the course, made by the script `make lab` runs (there into course/)."""
    before = _repo_state()
    dest = tmp_path_factory.mktemp("course")
    proc = subprocess.run([sys.executable, str(NOTEBOOKS_DIR / "prepare_course.py"), str(dest)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in dest.glob("*.ipynb")) == sorted(p.name for p in NOTEBOOKS_DIR.glob("*.ipynb"))
    _assert_unchanged(before, "preparing the working copy")
    return dest


def test_the_course_is_there():
    assert len(LESSONS) >= 5, [p.name for p in LESSONS]
    assert {p.name[:2] for p in LESSONS} <= set(EXPECTED)


@pytest.mark.parametrize("path", LESSONS, ids=_ids(LESSONS))
def test_lesson_opens_in_english_and_chinese(path):
    nb = nbformat.read(path, as_version=4)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    assert any("What you will be able to do" in s for s in markdown), f"{path.name}: no 'What you will be able to do'"
    assert any(CJK.search(s) for s in markdown), f"{path.name}: no summary in Chinese"
    assert nb.cells[0].cell_type == "markdown" and "What you will be able to do" in nb.cells[0].source


@pytest.mark.parametrize("path", LESSONS, ids=_ids(LESSONS))
def test_lesson_loads_the_magic_first_and_configures_before_import(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source.strip() == "%load_ext tfgpu_magic"
    first_import = next((i for i, c in enumerate(code) if re.search(r"^import tensorflow", c.source, re.M)), len(code))
    configuring = re.compile(r"^%tfgpu (cpus|growth|limit|virtual|visible|placement on)", re.M)
    # After the import a setting appears only to show the "too late" error (a tagged cell) or to repeat the
    # value in force (lesson 1's `%tfgpu cpus 2`).
    late = [c.source for c in code[first_import:] if configuring.search(c.source)
            and "raises-exception" not in c.metadata.get("tags", []) and c.source.strip() != "%tfgpu cpus 2"]
    assert not late, f"{path.name}: configuring magic after import tensorflow: {late}"


@pytest.mark.kernel
@pytest.mark.parametrize("path", COURSE, ids=_ids(COURSE))
def test_notebook_runs_in_the_working_copy_and_shows_its_point(path, working_copy, monkeypatch):
    # As a learner has it: no PYTHONUNBUFFERED, and TensorFlow's log at its default level.
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    before = _repo_state()
    copy = working_copy / path.name
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(working_copy)}}).execute()
    nbformat.write(nb, copy)  # saved with its outputs, as JupyterLab saves the learner's copy
    _assert_unchanged(before, f"running and saving {path.name} in the working copy")
    text = _text(nb)
    missing = [s for s in EXPECTED[path.name[:2]] if s not in text]
    assert not missing, f"{path.name}: outputs lack {missing}"
    outputs = _words(_text(nb, with_html=True))
    said = _words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    unsaid = [s for s in QUOTED.get(path.name[:2], []) if s not in said]
    unshown = [s for s in QUOTED.get(path.name[:2], []) if s not in outputs]
    if path.name.startswith("04") and _onednn():  # the lesson says when it shows: "Where TensorFlow runs oneDNN's"
        unshown += [s for s in ["_MklMatMul"] if s not in outputs]
    assert not unsaid and not unshown, f"{path.name}: text lacks {unsaid}; outputs lack {unshown}"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        streams = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        raw = RAW_TF_LOG.search(streams)
        assert raw is None, f"{path.name}: TensorFlow's raw log in {cell.source[:60]!r}: {raw.group(0)!r}"
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        assert tagged or not errors, f"{path.name}: untagged cell failed: {cell.source[:80]!r}"
        # A UsageError is printed, not raised as an error output; a tagged cell must still show its error.
        if tagged:
            shown = errors or [o for o in cell.outputs if "Error" in o.get("text", "")]
            assert shown, f"{path.name}: tagged cell shows no error: {cell.source[:80]!r}"
