"""The live panel in a real kernel (nbclient, jupyter_client), with the user's environment: no
PYTHONUNBUFFERED, no TF_CPP_MIN_LOG_LEVEL. What a front end would store and receive is what is checked: the
widget state nbclient saves in the notebook, and the comm messages on iopub while a cell runs."""

from __future__ import annotations

import json
import re
import time

import nbclient
import nbformat
import pytest
from cell_text import outputs_text
from harness import kernel_folder, user_env

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

pytestmark = pytest.mark.tf


def run_with_widgets(sources: list[str], **env: str) -> tuple[list[str], list[str]]:
    """Run the cells in one fresh kernel; return each cell's output text and the HTML values of every widget
    whose state nbclient stored (what a saved notebook would show)."""
    texts, states = run_notebook(sources, **env)
    values = [s["state"].get("value") for s in states.values() if s["model_name"] == "HTMLModel"]
    return texts, [v for v in values if isinstance(v, str)]


def run_notebook(sources: list[str], **env: str) -> tuple[list[str], dict[str, dict]]:
    """Run the cells in one fresh kernel; return each cell's output text and every widget's stored state by id."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=False,
                                     store_widget_state=True, resources={"metadata": {"path": kernel_folder()}})
    with client.setup_kernel(env=user_env(**env), cwd=kernel_folder()):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        client.set_widgets_metadata()
    texts = [outputs_text(cell.outputs, raw_html=True) for cell in nb.cells]
    return texts, nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def plain(markup: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", markup).replace("&#x27;", "'").split())


PANEL_SESSION = [
    "%load_ext tfgpu_magic",
    "%tfgpu cpus 2",
    "%tfgpu placement on",
    "%tfgpu cpumem on",
    "import tensorflow as tf\nsmall = tf.constant([1.0, 2.0])",
    "x = tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))",
    "big = tf.ones((2048, 2048)) * 2.0",  # 16 MiB, and as much again for the product's input
    "tiny = tf.constant(3.0)",
    "%tfgpu memory",
    "%tfgpu panel",
]


def cell_peaks(text: str) -> dict[int, float]:
    """cell count -> its CPU:0 peak MiB, from the recent-cells table's text form (columns: two spaces apart)."""
    peaks = {}
    for line in text.splitlines():
        columns = re.split(r"\s{2,}", line.strip())
        if len(columns) == 6 and columns[2] == "CPU:0" and re.match(r"\d+", columns[0]):
            peak = columns[4].replace(",", "")
            peaks[int(re.match(r"\d+", columns[0]).group())] = 0.05 if peak.startswith("<") else float(peak)
    return peaks


def test_panel_state_in_a_real_kernel_has_cpus_placement_and_per_cell_memory():
    texts, values = run_with_widgets(PANEL_SESSION)
    shown = [plain(v) for v in values]
    everything = "\n".join(shown)
    # Devices: both logical CPUs, and the MatMul's placement in the records.
    assert "CPU:0" in everything and "CPU:1" in everything, everything[:2000]
    records = next(s for s in shown if "records match" in s)
    assert "MatMul" in records and "CPU:0" in records, records
    # Per-cell memory with the CPU figures setting on: the cell with the 16 MiB tensor peaks above the others.
    memory_text = texts[8]
    peaks = cell_peaks(memory_text)
    assert set(peaks) >= {6, 7, 8}, memory_text
    assert peaks[7] >= 16 and peaks[7] > peaks[6] and peaks[7] > peaks[8], peaks
    cells = next(s for s in shown if "Recent cells" in s)
    assert re.search(r"\b7 [\d.]+ s CPU:0", cells), cells
    assert "TensorFlow CPU allocator in use" in everything


def test_the_settings_form_in_a_real_kernel_shows_the_values_in_force_after_a_refusal():
    """After TensorFlow started with `cpus 2`, `cpumem on` and `placement on`, and `cpus 3` was refused as too
    late: the saved widget state has each input at its value in force (cpus 2, not 3), the reason once, and the
    restart button in the destructive style."""
    refuse = "try:\n    get_ipython().run_line_magic('tfgpu', 'cpus 3')\nexcept Exception as err:\n    print(err)"
    texts, states = run_notebook([*PANEL_SESSION[:5], "%tfgpu panel", refuse])
    assert "is too late" in texts[-1], texts[-1]
    by_id = {key: s for key, s in states.items()}
    grid = next(s["state"] for s in by_id.values() if s["model_name"] == "GridBoxModel")
    children = [by_id[ref.removeprefix("IPY_MODEL_")] for ref in grid["children"]]
    labels = [c["state"]["value"] for c in children if c["model_name"] == "LabelModel"]
    inputs = [c["state"] for c in children if c["model_name"] in ("TextModel", "DropdownModel")]
    # The dropdowns' stored value is the index of their option (on, off).
    shown = {label: (i.get("value") if "index" not in i else None, i.get("index"), i["disabled"])
             for label, i in zip(labels, inputs, strict=True)}
    assert shown["logical CPUs"] == ("2", None, True), shown  # the value in force, not the refused 3
    assert shown["visible GPUs"] == ("all", None, True) and shown["memory limit"] == ("off", None, True)
    assert shown["CPU figures"][1:] == (0, True) and shown["memory growth"][1:] == (1, True)  # on; off
    assert shown["placement log"][1:] == (0, False)  # on, and still switchable
    html = " ".join(plain(s["state"]["value"]) for s in by_id.values()
                    if s["model_name"] == "HTMLModel" and isinstance(s["state"].get("value"), str))
    assert html.count("TensorFlow's runtime has started") == 1, html
    assert "3 refused: too late" in html
    restart = next(s["state"] for s in by_id.values() if s["model_name"] == "ButtonModel"
                   and s["state"].get("description") == "Restart kernel and apply")
    assert restart["button_style"] == "danger" and restart["layout"]
    assert by_id[restart["layout"].removeprefix("IPY_MODEL_")]["state"]["display"] in ("", None)  # shown


NO_FIGURES_SESSION = [
    "%load_ext tfgpu_magic",
    "import tensorflow as tf\nsmall = tf.constant([1.0, 2.0])",
    "big = tf.ones((2048, 2048)) * 2.0",
    "%tfgpu memory",
    "%tfgpu panel",
]


def test_without_cpu_figures_memory_and_panel_say_why_and_how():
    # oneDNN's allocator (the x86 default) keeps figures; TensorFlow's plain one, here, does not.
    texts, values = run_with_widgets(NO_FIGURES_SESSION, TF_ENABLE_ONEDNN_OPTS="0")
    everything = plain("\n".join(values))
    for view in (texts[3], everything):
        assert "no figures" in view and "%tfgpu cpumem on" in view, view[:3000]
    assert not re.search(r"\b0\.0\b", texts[3]), texts[3]


LIVE_SETUP = [
    "%load_ext tfgpu_magic",
    "%tfgpu cpumem on",
    "import tensorflow as tf\nsmall = tf.constant([1.0])",
    "%config TfgpuMagics.refresh_interval = 0.25",
    "%tfgpu panel",
]
LIVE_CELL = "import time\nbig = tf.ones((4096, 4096)) + 1.0\ntime.sleep(3)\nprint('done')"


def test_panel_updates_reach_the_front_end_while_a_cell_runs():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
    try:
        for source in LIVE_SETUP:
            reply = client.execute_interactive(source, timeout=120)
            assert reply["content"]["status"] == "ok", reply
        msg_id = client.execute(LIVE_CELL)
        during, finished = [], False
        deadline = time.monotonic() + 60
        while not finished and time.monotonic() < deadline:
            msg = client.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" \
                    and msg["content"]["execution_state"] == "idle":
                finished = True
            elif msg["msg_type"] == "stream" and "done" in msg["content"].get("text", ""):
                finished = "stream"  # the cell's end: later messages are the post-cell refresh
            elif msg["msg_type"] == "comm_msg" and not finished:
                during.append(msg)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert finished, "the cell did not finish"
    texts = [json.dumps(m["content"]["data"].get("state", {})) for m in during]
    in_use = [float(v.replace(",", "")) for t in texts for v in re.findall(r"in use ([\d,.]+) MiB", t)]
    # The 64 MiB tensor (and its input) are in use while the cell sleeps, and the panel said so before it ended.
    assert any(v >= 64 for v in in_use), (in_use, texts[:3])
