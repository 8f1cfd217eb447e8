"""The teaching course (notebooks/00_start.ipynb and the lessons 01_*.ipynb ... 08_*.ipynb): each notebook runs
top to bottom in a real kernel, without a GPU and where only NVML sees GPUs, and shows what it teaches.

test_notebooks.py checks that every notebook is stripped of outputs; these tests run each notebook the way
`make lab` has a learner run it: in a working copy made by notebooks/prepare_course.py (the script `make lab`
runs), with the kernel started there and the executed notebook saved there, as JupyterLab saves it. Doing the
course must leave the repository as it was (git status, and the tracked notebooks byte for byte). They check
what each notebook must show (its key outputs), that what a lesson's text quotes from its outputs is really
there, the bilingual opening every lesson starts with, and the rules for magics and deliberate errors.

Every notebook runs twice, one kernel each (CASES): with no NVML at all (a machine without an NVIDIA driver) and
with NVML listing two GPUs (the tests' fake libnvidia-ml.so.1) while TensorFlow is the CPU build, the common
"wrong wheel" case, where TensorFlow sees no GPU and tfgpu says why. EXPECTED and QUOTED hold per case: what is
listed under BOTH must hold in both runs, so a sentence that quotes or predicts an output without saying for
which machine is checked on both; a phrase listed for one case only must sit in a paragraph that names that case
(CASE_WORDS). The third case, GPU TensorFlow on a GPU machine, is not run here: the lessons say what it shows in
sentences that name it ("With GPU TensorFlow ...")."""

import functools
import html
import itertools
import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from cell_text import outputs_text
from fakenvml import fake_env, n_gpus, write_config
from harness import ROOT, user_env
from nbclient import NotebookClient

NOTEBOOKS_DIR = ROOT / "notebooks"
REPO = NOTEBOOKS_DIR.parent
LESSONS = sorted(NOTEBOOKS_DIR.glob("0[1-8]_*.ipynb"))
COURSE = sorted(NOTEBOOKS_DIR.glob("0[0-8]_*.ipynb"))  # the start page and the lessons
CJK = re.compile(r"[\u4e00-\u9fff]")

NO_NVML, FAKE_GPUS = "no_nvml", "fake_gpus"
CASES = (NO_NVML, FAKE_GPUS)
BOTH = "both"

# Words that name a case in a lesson's text: a phrase QUOTED for one case only must sit in a paragraph with one.
CASE_WORDS = {
    NO_NVML: ("without a GPU", "no NVML", "without NVML"),
    FAKE_GPUS: ("where NVML lists GPUs", "CPU-only"),
}

# For each lesson, strings its executed outputs must contain: in both runs, and in one of them only.
EXPECTED = {
    "00": {BOTH: ["/device:CPU:2", "too late", "restart the kernel", "MirroredStrategy over 3 device(s)"],
           NO_NVML: ["NVML library (libnvidia-ml.so.1) not found"],
           FAKE_GPUS: ["GPUs (NVML, driver 550.54.15", "TensorFlow sees none of the 2 GPUs NVML lists"]},
    "01": {BOTH: ["physical: /physical_device:CPU:0", "logical: /device:CPU:1", "too late", "restart the kernel",
                  "TensorFlow lists no GPU here"],
           NO_NVML: ["GPUs (NVML): unavailable"],
           FAKE_GPUS: ["NVIDIA H100 80GB HBM3", "TensorFlow sees none of the 2 GPUs NVML lists"]},
    "02": {BOTH: ["CUDA_DEVICE_ORDER    = PCI_BUS_ID", "CUDA_VISIBLE_DEVICES = 0",
                  "visible 0: applied (through CUDA_VISIBLE_DEVICES)"],
           NO_NVML: ["`%tfgpu visible auto` needs NVML"],
           FAKE_GPUS: ["%tfgpu visible auto: waiting for import"]},
    "03": {BOTH: ["conflicts with growth", "TensorFlow allocator memory",
                  # the out-of-memory card under the failing cell, and what %tfgpu free did
                  "Out of memory on CPU:0 (host memory)", "tfgpu: free: dropped the last error"]},
    "04": {BOTH: ["b was computed on /job:localhost/replica:0/task:0/device:CPU:1", "asked for /CPU:7, ran on",
                  "d was computed on /job:localhost/replica:0/task:0/device:CPU:2", "fallback: asked /CPU:7",
                  # the error's first line in full, not cut mid-word
                  "InvalidArgumentError: Could not satisfy device specification", "All available devices [/job:"]},
    "05": {BOTH: ["device:CPU:1", "same result", "one device:"]},
    "06": {BOTH: ["Number of devices: 2", "MirroredStrategy over 2 device(s)", "replicas: 2 loss after 1 epoch"]},
    "07": {BOTH: ["/job:localhost/replica:0/task:0/device:CPU:1 CPU", "matmul result: [[11.]]",
                  "tf.compat.v1.ConfigProto()"]},
    "08": {BOTH: ["worker 0: replicas=2", "worker 1: replicas=2", "w=2.000"]},
}

# Strings a lesson's text says a run does not show (the issue: "with GPUs present it says neither").
ABSENT = {
    "02": {FAKE_GPUS: ["not checked", "needs NVML"]},
}

# Words a lesson's text quotes from its own outputs: each must appear both in the lesson's markdown and in what its
# cells show (text or HTML; whitespace runs count as one space), in every run its sentence claims it for.
QUOTED = {
    "01": {BOTH: ["GPUs: []", "runtime not started", "already in force"],
           NO_NVML: ["NVML library (libnvidia-ml.so.1) not found"],
           # the fix for tensorflow-cpu: pip installs GPU TensorFlow beside it without removing it, so it goes first
           FAKE_GPUS: ["not seen", "TensorFlow will list none", "is a CPU-only build",
                       "pip uninstall -y tensorflow-cpu", "pip install 'tensorflow[and-cuda]'"]},
    "02": {BOTH: ["waiting for import", "applied (through CUDA_VISIBLE_DEVICES)", "through CUDA_VISIBLE_DEVICES",
                  "is too late", "TensorFlow has listed its devices"],
           NO_NVML: ["GPU 0 not checked", "needs NVML to see free memory"],
           FAKE_GPUS: ["is a CPU-only build"]},
    "03": {BOTH: ["waiting for import", "no GPU to apply to"]},
    # the HTML form (what a notebook shows) flags a fallback with ⚠, the text form (a terminal) with !!
    "04": {BOTH: ["⚠ fallback", "!! fallback", "executed", "placed", "_Arg", "_Retval", "asked"]},
    "06": {BOTH: ["waiting for import", "cpus 2: applied", "virtual 2GiB,2GiB: no GPU to apply to", "virtual[all]",
                  "TensorFlow sees no GPU; the setting applies where there is one",
                  # the log lines tf.distribute prints and its guide points at, shown under the cell
                  "Using MirroredStrategy with devices", "Input of GeneratorDatasetOp::Dataset will not be optimized"]},
    "07": {BOTH: ["no GPU to apply to"]},
}
# Every notebook that imports TensorFlow says before it that the import takes seconds, quoting the line tfgpu prints
# as it begins (the `import tensorflow` cells: test_a_slow_cell_is_announced).
IMPORT_NOTICE = "importing TensorFlow"
for _prefix in ("00", "01", "02", "03", "04", "05", "06", "07"):
    QUOTED.setdefault(_prefix, {}).setdefault(BOTH, []).append(IMPORT_NOTICE)

# The table columns a lesson's text names ("column `GPU`", "the `asked` column"): each must head a table (an HTML <th>,
# what JupyterLab shows) in that lesson's outputs, in every run the entry is listed for. Every column the text names
# is listed here (test_every_column_the_text_names_is_checked), so text and screen cannot drift apart unnoticed.
COLUMNS = {
    "01": {FAKE_GPUS: ["GPU", "TensorFlow"]},  # the GPU table: there is none without NVML
    "04": {BOTH: ["device", "op type", "executed", "placed", "channels", "lines", "channel", "asked"]},
}
COLUMN_CITED = re.compile(r"(?i:\bcolumns?) `([^`]+)`|`([^`]+)` (?i:columns?\b)")
TABLE_HEAD = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)

# Cells that take over about 5 seconds (measured on a laptop and on the test machine: `import tensorflow` 3-15 s, the
# 4 TiB out-of-memory cell about 10 s, as TensorFlow's allocator waits 10 s for memory, the two workers 5-26 s): the
# markdown cell right before each says how long it takes, so a learner does not think the kernel hung.
SLOW_CELL = re.compile(r"^import tensorflow|^too_much = tf\.zeros\(\(2\*\*40|subprocess\.Popen\(", re.M)
SLOW_WARNING = re.compile(r"\btakes (?:about )?[\d ]+(?:to \d+ )?seconds\b")

# Cells tagged `raises-exception` that succeed in one case (the text says so): there they must show no error.
SUCCEEDS = {
    # `visible auto` before the import: refused without NVML, chosen where NVML lists GPUs.
    "02": {FAKE_GPUS: ["%tfgpu visible auto"]},
}


def _for(table, prefix, case):
    entry = table.get(prefix, {})
    return [*entry.get(BOTH, []), *entry.get(case, [])]


def _fake_gpus() -> dict:
    """Two GPUs as NVML lists them (the fake's ready-made identical H100s, no processes)."""
    return n_gpus(2)


# TensorFlow's own log as it prints it (tfgpu's folded block reads differently): must not reach a cell.
RAW_TF_LOG = re.compile(r"absl::InitializeLog|^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"
                        r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]|^(?:INFO|WARNING|ERROR):tensorflow:",
                        re.M)
# A warning that reaches a cell: a warning or error line of tfgpu's folded block of TensorFlow's log, or a Python
# warning. The lesson's text must explain each right there, quoting its first words (WARNING_WORDS).
TF_WARNING = re.compile(r"^  [WEF] [\w/.-]+:\d+\] (?P<message>.+)$", re.M)
PY_WARNING = re.compile(r"^\S+:\d+: \w*Warning: (?P<message>.+)$", re.M)
WARNING_WORDS = 7
# The memory map of TensorFlow's BFC allocator in its out-of-memory summary: chunks in use (*) and free (_), a
# different picture every run, so no lesson can quote it.
ALLOCATOR_MAP = re.compile(r"^[*_]+$")


def _ids(paths):
    return [p.name for p in paths]


def _text(nb, with_html=False):
    return "\n".join(outputs_text(cell.outputs, with_html) for cell in nb.cells if cell.cell_type == "code")


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
def _tf_build() -> dict:
    """This machine's TensorFlow, asked once in a child: whether it runs oneDNN's CPU kernels (by default only on CPUs
    with AVX-512 VNNI, BF16 or AMX: only then does a placement log name `_MklMatMul`) and whether it is a CUDA
    build (the course's runs need the CPU build)."""
    code = ("import json, tensorflow as tf; from tensorflow.python.util import _pywrap_util_port as p; "
            "print(json.dumps({'onednn': bool(p.IsMklEnabled()), "
            "'cuda': bool(tf.sysconfig.get_build_info().get('is_cuda_build'))}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=user_env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@functools.cache
def _real_nvml() -> bool:
    """Whether this machine has an NVML library of its own (an NVIDIA driver): then no run is without NVML."""
    proc = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libnvidia-ml.so.1')"],
                          capture_output=True, text=True, timeout=60, env=user_env())
    return proc.returncode == 0


@pytest.fixture(scope="module")
def working_copies(tmp_path_factory):
    """The learner's copy of the course, made by the script `make lab` runs (there into course/): one per case,
    made when a case first needs it."""
    made = {}

    def copy(case):
        if case not in made:
            before = _repo_state()
            dest = tmp_path_factory.mktemp(f"course_{case}")
            proc = subprocess.run([sys.executable, str(NOTEBOOKS_DIR / "prepare_course.py"), str(dest)],
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            names = sorted(p.name for p in NOTEBOOKS_DIR.glob("*.ipynb"))
            assert sorted(p.name for p in dest.glob("*.ipynb")) == names
            _assert_unchanged(before, "preparing the working copy")
            made[case] = dest
        return made[case]

    return copy


@pytest.fixture
def kernel_env(request, tmp_path):
    """A learner's kernel environment for one case (harness.user_env: no PYTHONUNBUFFERED, TensorFlow's log at its
    default level, nothing of the checkout on PYTHONPATH), with the fake NVML first on LD_LIBRARY_PATH for
    FAKE_GPUS. Skipped where the machine cannot give that case."""
    case = request.param
    if _tf_build()["cuda"]:
        pytest.skip("the course runs need the CPU build of TensorFlow (tests/gpu covers a GPU machine)")
    if case == NO_NVML:
        if _real_nvml():
            pytest.skip("this machine has an NVIDIA driver (libnvidia-ml.so.1): no run here is without NVML")
        return case, user_env()
    lib = request.getfixturevalue("fake_nvml_lib")  # skips without gcc
    config = write_config(tmp_path / "fake_nvml.cfg", _fake_gpus())
    return case, user_env(**fake_env(lib.parent, config, base={}))


def test_the_course_is_there():
    assert len(LESSONS) >= 5, [p.name for p in LESSONS]
    assert {p.name[:2] for p in LESSONS} <= set(EXPECTED)
    for table in (EXPECTED, QUOTED, ABSENT, SUCCEEDS, COLUMNS):
        for prefix, entry in table.items():
            assert set(entry) <= {BOTH, *CASES}, (prefix, entry)


def _paragraphs(markdown: list[str]) -> list[str]:
    return [_words(p) for source in markdown for p in re.split(r"\n\s*\n", source)]


@pytest.mark.parametrize("path", LESSONS, ids=_ids(LESSONS))
def test_a_phrase_quoted_for_one_case_is_said_for_it(path):
    """A sentence that quotes an output without saying for which machine must hold on both (BOTH); a phrase listed
    for one case only sits in a paragraph that names that case."""
    nb = nbformat.read(path, as_version=4)
    paragraphs = _paragraphs([c.source for c in nb.cells if c.cell_type == "markdown"])
    for case in CASES:
        for phrase in QUOTED.get(path.name[:2], {}).get(case, []):
            where = [p for p in paragraphs if phrase in p]
            assert where, f"{path.name}: the text does not quote {phrase!r}"
            unnamed = [p for p in where if not any(w.lower() in p.lower() for w in CASE_WORDS[case])]
            assert not unnamed, (f"{path.name}: {phrase!r} is quoted for {case} only, in a paragraph that names no "
                                 f"such machine ({CASE_WORDS[case]}): {unnamed[0][:200]!r}")


def _cited_columns(nb) -> set[str]:
    said = _words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    return {a or b for a, b in COLUMN_CITED.findall(said)}


def _table_heads(nb) -> set[str]:
    """The column names of every table the notebook's outputs show in JupyterLab (their HTML form)."""
    heads = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for head in TABLE_HEAD.findall(str(out.get("data", {}).get("text/html", ""))):
                heads.add(_words(html.unescape(re.sub(r"<[^>]+>", " ", head))))
    return heads


@pytest.mark.parametrize("path", LESSONS, ids=_ids(LESSONS))
def test_every_column_the_text_names_is_checked(path):
    """A column the text names is listed in COLUMNS (whose entries the runs check against the tables shown), and a
    listed column is named by the text."""
    nb = nbformat.read(path, as_version=4)
    listed = {c for entry in COLUMNS.get(path.name[:2], {}).values() for c in entry}
    cited = _cited_columns(nb)
    assert cited == listed, (f"{path.name}: the text names columns {sorted(cited - listed)} that COLUMNS does not "
                             f"list; COLUMNS lists {sorted(listed - cited)} that the text does not name")


@pytest.mark.parametrize("path", COURSE, ids=_ids(COURSE))
def test_a_slow_cell_is_announced(path):
    nb = nbformat.read(path, as_version=4)
    for before, cell in itertools.pairwise(nb.cells):
        if cell.cell_type == "code" and SLOW_CELL.search(cell.source):
            assert before.cell_type == "markdown" and SLOW_WARNING.search(_words(before.source)), (
                f"{path.name}: no 'takes N seconds' right before the slow cell {cell.source[:60]!r}")


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
@pytest.mark.parametrize("kernel_env", CASES, indirect=True)
@pytest.mark.parametrize("path", COURSE, ids=_ids(COURSE))
def test_notebook_runs_in_the_working_copy_and_shows_its_point(path, kernel_env, working_copies):
    # As a learner has it: no PYTHONUNBUFFERED, and TensorFlow's log at its default level (kernel_env).
    case, env = kernel_env
    working_copy = working_copies(case)
    prefix = path.name[:2]
    before = _repo_state()
    copy = working_copy / path.name
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3").execute(env=env, cwd=str(working_copy))
    nbformat.write(nb, copy)  # saved with its outputs, as JupyterLab saves the learner's copy
    _assert_unchanged(before, f"running and saving {path.name} in the working copy")
    text = _text(nb)
    missing = [s for s in _for(EXPECTED, prefix, case) if s not in text]
    assert not missing, f"{path.name} ({case}): outputs lack {missing}"
    outputs = _words(_text(nb, with_html=True))
    shown = [s for s in _for(ABSENT, prefix, case) if s in outputs]
    assert not shown, f"{path.name} ({case}): outputs show {shown}, which the text says this run does not"
    said = _words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    quoted = _for(QUOTED, prefix, case)
    unsaid = [s for s in quoted if s not in said]
    unshown = [s for s in quoted if s not in outputs]
    if prefix == "04" and _tf_build()["onednn"]:  # the lesson says when it shows: "Where TensorFlow runs oneDNN's"
        unshown += [s for s in ["_MklMatMul"] if s not in outputs]
    assert not unsaid and not unshown, f"{path.name} ({case}): text lacks {unsaid}; outputs lack {unshown}"
    heads = _table_heads(nb)
    no_table = [c for c in _for(COLUMNS, prefix, case) if c not in heads]
    assert not no_table, f"{path.name} ({case}): the text names columns {no_table}; the tables have {sorted(heads)}"
    succeeds = _for(SUCCEEDS, prefix, case)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        streams = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        raw = RAW_TF_LOG.search(streams)
        assert raw is None, f"{path.name} ({case}): TensorFlow's raw log in {cell.source[:60]!r}: {raw.group(0)!r}"
        shown_text = "\n".join([streams, *(str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)])
        for warning in [*TF_WARNING.finditer(shown_text), *PY_WARNING.finditer(streams)]:
            if ALLOCATOR_MAP.match(warning["message"]):
                continue  # a line of the allocator's summary, which the lesson says TensorFlow prints on an OOM
            first = " ".join(warning["message"].split()[:WARNING_WORDS])
            assert first in said, (f"{path.name} ({case}): a warning reaches {cell.source[:60]!r} and the text does "
                                   f"not explain it (quote its first words: {first!r})")
        errors = [o for o in cell.outputs if o.output_type == "error"]
        printed = [o for o in cell.outputs if "Error" in o.get("text", "")]  # a UsageError is printed, not raised
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        assert tagged or not errors, f"{path.name} ({case}): untagged cell failed: {cell.source[:80]!r}"
        if tagged and cell.source.strip() in succeeds:
            assert not errors and not printed, f"{path.name} ({case}): {cell.source[:80]!r} should succeed here"
        elif tagged:  # a tagged cell must still show its error
            assert errors or printed, f"{path.name} ({case}): tagged cell shows no error: {cell.source[:80]!r}"
