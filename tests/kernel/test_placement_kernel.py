"""Placement in a real Jupyter kernel (ipykernel through nbclient), as a notebook user sees it.

In a kernel fd 1 and fd 2 are pipes that ipykernel forwards to the notebook, and libc block-buffers
TensorFlow's printf: these tests run the kernel without PYTHONUNBUFFERED (and without pytest's
PYTEST_CURRENT_TEST, which turns ipykernel's descriptor forwarding off), like a notebook server would.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
from harness import kernel_folder

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.kernel, pytest.mark.tf]

RAW = re.compile(r"placer\.cc|Executing op|: \(\w+\): /job:")
BIG_LINES = 16_000  # x 66 bytes: just over 1 MiB


def run_notebook(sources: list[str], env_extra: dict[str, str] | None = None) -> list[dict]:
    """Run the cells in one fresh kernel; return per cell its stdout, stderr, display texts and errors."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTEST_CURRENT_TEST")}
    env.update(env_extra or {})
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=60, allow_errors=True,
                                     resources={"metadata": {"path": kernel_folder()}})
    with client.setup_kernel(env=env, cwd=kernel_folder()):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    results = []
    for cell in nb.cells:
        out = {"stdout": "", "stderr": "", "plain": [], "html": [], "errors": []}
        for o in cell.outputs:
            if o.output_type == "stream":
                out[o.name] += o.text
            elif o.output_type in ("display_data", "execute_result"):
                out["plain"].append(o.data.get("text/plain", ""))
                out["html"].append(o.data.get("text/html", ""))
            elif o.output_type == "error":
                out["errors"].append(o.ename)
        out["all"] = "\n".join([out["stdout"], out["stderr"], *out["plain"], *out["html"]])
        results.append(out)
    return results


BIG_CELL = f"""\
import os
data = b"".join(b"line %06d %s\\n" % (i, b"x" * 54) for i in range({BIG_LINES}))
os.write(2, data)
print("printed after", len(data))"""

MAIN = [
    "import sys, threading\nprint(sys.prefix)\nprint('threads', threading.active_count())",  # 0
    "%load_ext tfgpu_magic\nprint('threads', threading.active_count())",  # 1
    "%tfgpu placement on",  # 2
    "%tfgpu cpus 3",  # 3
    "import tensorflow as tf",  # 4
    "a = tf.constant([[1.0, 2.0], [3.0, 4.0]])\nwith tf.device('/CPU:2'):\n    b = tf.matmul(a, a)\n"
    "print('matmul on', b.device)",  # 5
    BIG_CELL,  # 6
    "raise ValueError('on purpose')",  # 7
    "c = tf.nn.relu(a)",  # 8
    "%%tfgpu device /CPU:1\nd = tf.sin(a)\nd.device",  # 9
    "%%tfgpu device /CPU:7\ntf.cos(a).device",  # 10
    "%%tfgpu device /GPU:1\ntf.tan(a).device",  # 11
    "%tfgpu placement show --device CPU:2 --op MatMul",  # 12
    "%tfgpu placement off",  # 13
    "e = tf.nn.softplus(a)\nprint('quiet cell')",  # 14
    "%tfgpu placement show --cell 14",  # 15
    "print('threads', threading.active_count())\n"
    "print('ours', sorted(t.name for t in threading.enumerate() if t.name.startswith('tfgpu')))",  # 16
]


@pytest.fixture(scope="module")
def main_run():
    return run_notebook(MAIN)


def test_kernel_is_this_venv(main_run):
    assert main_run[0]["stdout"].splitlines()[0] == sys.prefix


def test_no_raw_placement_line_in_any_cell(main_run):
    for index, out in enumerate(main_run):
        assert not RAW.search(out["stdout"] + out["stderr"]), (index, out["stdout"][-2000:], out["stderr"][-2000:])


def test_one_fd2_reader_and_per_cell_threads_only_while_captured(main_run):
    counts = [int(re.search(r"threads (\d+)", main_run[i]["stdout"]).group(1)) for i in (0, 1)]
    assert counts[0] == counts[1], counts  # loading the extension starts no thread
    # placement is off but TensorFlow still logs, so this cell is captured (and swallowed): the fd-2 reader
    # kept for the kernel's life and this cell's fd-1 reader exist, and none left over from the 15 cells before
    assert "ours ['tfgpu-placement-fd1', 'tfgpu-stderr']" in main_run[16]["stdout"]


def test_summary_in_the_same_cell(main_run):
    out = main_run[5]
    assert "matmul on /job:localhost/replica:0/task:0/device:CPU:2" in out["stdout"]
    (plain,) = out["plain"]
    assert re.search(r"CPU:2\s+MatMul\s+1\s+1", plain), plain  # executed (listener) and placed (printf/log)
    assert "MatMul" in out["html"][0] and "<table>" in out["html"][0]


def test_one_mib_on_fd2_every_line_once_in_order(main_run):
    out = main_run[6]
    lines = out["stderr"].splitlines()
    expected = [f"line {i:06d} {'x' * 54}" for i in range(BIG_LINES)]
    assert lines == expected, (len(lines), lines[:2], lines[-2:])
    assert "printed after" in out["stdout"]


def test_after_an_error_the_next_cell_is_captured(main_run):
    assert main_run[7]["errors"] == ["ValueError"]
    assert re.search(r"CPU:0\s+Relu", "".join(main_run[8]["plain"]))


def test_device_cell_places_on_the_asked_device(main_run):
    out = main_run[9]
    assert "'/job:localhost/replica:0/task:0/device:CPU:1'" in out["plain"][0]  # the cell's own value
    summary = out["plain"][1]
    assert "asked /CPU:1" in summary and re.search(r"CPU:1\s+Sin", summary) and "fallback" not in summary


@pytest.mark.parametrize(("index", "asked"), [(10, "/CPU:7"), (11, "/GPU:1")])
def test_missing_device_is_flagged_as_fallback(main_run, index, asked):
    summary = main_run[index]["plain"][-1]
    assert f"fallback: asked {asked}, ran on CPU:0" in summary, summary
    assert "fallback: asked" in main_run[index]["html"][-1]


def test_show_filters(main_run):
    (plain,) = main_run[12]["plain"]
    # The listener's and the placer's record of the one MatMul (with oneDNN the placer reports the node as its
    # rewrite _MklMatMul, which `--op MatMul` also matches): one op row, both channels.
    assert re.search(r"\b1 matching", plain) and "eager+placer" in plain, plain
    body = plain.split("\n", 1)[1]
    assert "MatMul" in body and "CPU:0" not in body and "Relu" not in body
    assert "<table>" in main_run[12]["html"][0]


def test_off_stops_summaries_and_raw_lines(main_run):
    assert "hiding" in main_run[13]["stdout"]
    out = main_run[14]
    assert out["stdout"] == "quiet cell\n" and out["plain"] == [] and out["stderr"] == ""
    assert "0 matching" in main_run[15]["plain"][0]


def test_printf_channel_alone_lands_in_its_cell():
    """TF_CPP_MIN_LOG_LEVEL=2 removes the fd-2 log: the placer's printf is the only graph channel left,
    and it is block-buffered on the kernel's pipe."""
    out = run_notebook(
        [
            "%load_ext tfgpu_magic\n%tfgpu placement on",
            "import tensorflow as tf\na = tf.constant([1.0, 2.0])\nb = tf.square(a)",
            "print('next cell')",
            "%tfgpu placement status",
        ],
        env_extra={"TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert re.search(r"CPU:0\s+Square\s+1\s+1", "".join(out[1]["plain"])), out[1]
    assert out[2]["stdout"] == "next cell\n" and out[2]["stderr"] == ""
    assert "TF_CPP_MIN_LOG_LEVEL=2 hides" in "".join(out[3]["plain"])  # a display, text and HTML
    for cell in out:
        assert not RAW.search(cell["stdout"] + cell["stderr"])
