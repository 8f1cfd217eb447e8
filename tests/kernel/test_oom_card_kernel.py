"""The out-of-memory card in a real kernel (ipykernel through nbclient, the user's environment: no
TF_CPP_MIN_LOG_LEVEL, no PYTHONUNBUFFERED) with real TensorFlow (the CPU build) and the fake NVML library.

- A real OOM: ``tf.zeros((2**40,))`` asks the CPU allocator for 4 TiB and TensorFlow raises ResourceExhaustedError:
  the card lands under that cell, with the ask, "host memory" and no GPU holders.
- The same real allocation through Keras (a layer's call, which Keras 3 re-raises with its own text around
  TensorFlow's, and a model's predict, a graph's "Graph execution error") gives the same card.
- A GPU's OOM cannot happen on this build: TensorFlow's own ResourceExhaustedError with the GPU allocator's text (and
  with XLA's, its node on GPU:0) is raised in a cell, while the fake NVML shows the kernel's GPU (physical 1, given as
  CUDA_VISIBLE_DEVICES=1) mostly held by another notebook's kernel (its report in the runtime folder) and a process
  of another user's: the card names the GPU's free memory and both.
- A ValueError gets no card; ``%tfgpu free`` lets a large array that only the failed frame holds go (a weakref
  dies then, not before) and prints the figures before and after; ``%tfgpu oom`` shows the last card again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cell_text import outputs_text
from fakenvml import MIB, fake_env, write_config
from harness import kernel_folder, user_env

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.kernel, pytest.mark.tf]

MIME = "application/vnd.tfgpu.oom+json"
GIB = 1 << 30
GPU_MESSAGE = ("OOM when allocating tensor with shape[8,1024,1024,64] and type float on "
               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")

CELLS = {
    "load": "%load_ext tfgpu_magic",
    "import": "import gc, weakref\nimport numpy as np\nimport tensorflow as tf\nimport keras",
    "none_yet": "%tfgpu oom",
    "cpu": "tf.zeros((2**40,))",
    "keras_layer": "layer = keras.layers.Lambda(lambda x: x + tf.zeros((2**40,)))\nlayer(tf.ones((1,)))",
    # In a graph a constant shape is folded into a 4 TiB constant (an InvalidArgumentError, no OOM): the size comes
    # from the data, so the allocation happens when the graph runs (after TensorFlow's allocator retries, ~10 s).
    "keras_predict": "model = keras.Sequential([keras.Input((1,)), keras.layers.Lambda(\n"
                     "    lambda x: x + tf.zeros(tf.cast(x[0], tf.int64) * 2**40))])\n"
                     "model.predict(np.ones((1, 1), 'float32'), verbose=0)",
    "gpu": f"raise tf.errors.ResourceExhaustedError(None, None, {GPU_MESSAGE + ' [Op:Conv2D]'!r})",
    "xla": "node = tf.compat.v1.NodeDef(name='cluster_0_1/xla_run', op='_XlaRun', "
           "device='/job:localhost/replica:0/task:0/device:GPU:0')\n"
           "raise tf.errors.ResourceExhaustedError(node, None, 'Out of memory while trying to allocate 8589934592 "
           "bytes.')",
    "value_error": "raise ValueError('on purpose')",
    "held": "def work():\n    big = np.ones((64, 1024, 1024), dtype=np.float32)  # 256 MiB, only in this frame\n"
            "    global ref\n    ref = weakref.ref(big)\n    tf.zeros((2**40,))\nwork()",
    "alive_before": "gc.collect()\nprint('alive before free:', ref() is not None)",
    "free": "%tfgpu free",
    "alive_after": "print('alive after free:', ref() is not None)",
    "again": "%tfgpu oom",
}


def fake_gpus(other_pid: int) -> dict:
    """GPU 0 idle; GPU 1 (this kernel's, CUDA_VISIBLE_DEVICES=1): an 80 GiB H100 with 1.5 GiB free, 70 GiB held by
    another notebook's kernel, 8 GiB by pid 1 (another user's process), 512 MiB by this kernel."""
    def gpu(k: int, name: str, total: int, processes: list) -> dict:
        used = sum(p["used"] for p in processes)
        return {"name": name, "uuid": f"GPU-0c0ffee0-0000-4000-8000-00000000000{k}",
                "pci_bus_id": f"00000000:{k + 1:02X}:00.0", "memory_total": total, "memory_used": used,
                "memory_reserved": 0, "utilization_gpu": 90,
                "utilization_memory": 50, "temperature": 50, "processes": processes}

    held = [{"pid": other_pid, "used": 70 * GIB}, {"pid": 1, "used": 8 * GIB}, {"pid": "self", "used": 512 * MIB}]
    return {"driver_version": "550.54.15", "cuda_driver_version": 12040, "gpus": [
        gpu(0, "NVIDIA A100-SXM4-40GB", 40 * GIB, []),
        gpu(1, "NVIDIA H100 80GB HBM3", 80 * GIB, held)]}


def write_report(runtime: Path, pid: int) -> None:
    """Another kernel's report (core/reports.py), as its tfgpu would keep it: its notebook and its PID."""
    folder = runtime / "tfgpu-kernels"
    folder.mkdir(mode=0o700, parents=True)
    report = {"schema": 1, "kernel_id": "other-kernel-1", "pid": pid, "notebook": "other.ipynb", "host_pid": None,
              "how": None, "note": "", "gpus": [], "tf_memory": {}, "written_at": 0.0}
    (folder / "other-kernel-1.json").write_text(json.dumps(report))
    os.chmod(folder / "other-kernel-1.json", 0o600)


@pytest.fixture(scope="module")
def run(fake_nvml_lib, tmp_path_factory):
    """Every cell of CELLS in one fresh kernel: name -> {"cell": the executed cell, "cards": its OOM bundles}."""
    where = tmp_path_factory.mktemp("oom")
    runtime = where / "runtime"
    runtime.mkdir(mode=0o700)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # the other notebook's kernel
    try:
        write_report(runtime, other.pid)
        config = where / "fake_nvml.cfg"
        write_config(config, fake_gpus(other.pid))
        env = fake_env(fake_nvml_lib.parent, config, base=user_env(CUDA_VISIBLE_DEVICES="1",
                                                                   JUPYTER_RUNTIME_DIR=str(runtime),
                                                                   JPY_SESSION_NAME="mine.ipynb"))
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS.values()]
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=180, allow_errors=True,
                                         resources={"metadata": {"path": kernel_folder()}})
        with client.setup_kernel(env=env, cwd=kernel_folder()):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
    finally:
        other.kill()
        other.wait()
    results = {}
    for name, cell in zip(CELLS, nb.cells, strict=True):
        cards = [o["data"] for o in cell.outputs if o.output_type == "display_data" and MIME in o.get("data", {})]
        results[name] = {"cell": cell, "cards": cards, "text": outputs_text(cell.outputs)}
    return results


def one_card(run, name: str) -> dict:
    cards = run[name]["cards"]
    assert len(cards) == 1, (name, run[name]["text"])
    bundle = cards[0]
    assert set(bundle) == {MIME, "text/html", "text/plain"}, bundle.keys()
    data = bundle[MIME]
    assert data["execution_count"] == run[name]["cell"].execution_count
    return bundle


def test_nothing_yet(run):
    assert run["none_yet"]["text"].strip() == "tfgpu: no out-of-memory error in this kernel yet"
    assert run["none_yet"]["cards"] == []


def assert_the_cpu_card(data: dict) -> None:
    assert data["schema"] == 1 and data["kind"] == "cpu" and data["error"] == "ResourceExhaustedError"
    assert data["asked"]["shape"] == [1099511627776] and data["asked"]["dtype"] == "float"
    assert data["asked"]["bytes"] == 4398046511104 and data["asked"]["device"] == "CPU:0"
    assert data["asked"]["allocator"] == "mklcpu"
    assert data["message"] == ("OOM when allocating tensor with shape[1099511627776] and type float on "
                               "/job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu")
    assert data["holders"] == [] and data["gpu"] is None and data["physical_index"] is None
    assert "host memory" in data["cause"] and data["suggested"] == {}
    assert any(s["magic"] is None and s["why"].startswith("a smaller batch") for s in data["steps"])


def test_a_real_cpu_oom_gets_a_card_under_its_cell(run):
    bundle = one_card(run, "cpu")
    assert_the_cpu_card(bundle[MIME])
    assert run["cpu"]["cell"].outputs[-1].output_type == "display_data"  # after the traceback: under the cell
    assert any(o.output_type == "error" and o.ename == "ResourceExhaustedError" for o in run["cpu"]["cell"].outputs)
    assert "host memory" in bundle["text/plain"] and "4.0 TiB (4,398,046,511,104 bytes)" in bundle["text/plain"]
    assert "class='tfgpu-view tfgpu-oom'" in bundle["text/html"] and "host memory" in bundle["text/html"]
    print(bundle["text/plain"])  # the exact card, for the report (-s)


@pytest.mark.parametrize("name", ["keras_layer", "keras_predict"])
def test_the_same_allocation_through_keras_gets_the_same_card(run, name):
    data = one_card(run, name)[MIME]
    assert_the_cpu_card(data)
    errors = [o for o in run[name]["cell"].outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "ResourceExhaustedError", run[name]["text"]
    wrapped = "Exception encountered when calling" if name == "keras_layer" else "Graph execution error"
    assert wrapped in errors[0].evalue, errors[0].evalue  # Keras' (or the graph's) text around TensorFlow's


def assert_the_gpu_figures(data: dict) -> None:
    assert data["kind"] == "gpu" and data["physical_index"] == 1 and data["asked"]["device"] == "GPU:0"
    assert data["gpu"] == {"name": "NVIDIA H100 80GB HBM3", "total_bytes": 80 * GIB,
                           "free_bytes": 80 * GIB - 78 * GIB - 512 * MIB}
    holders = [(h["notebook"], h["bytes"], h["mine"]) for h in data["holders"]]
    assert holders == [("other.ipynb", 70 * GIB, False), (None, 8 * GIB, False), ("mine.ipynb", 512 * MIB, True)]
    assert data["holders"][0]["text"].startswith("other.ipynb (another kernel, pid ")
    assert data["holders"][1]["pid"] == 1 and data["holders"][1]["text"].startswith("pid 1 (")
    assert data["case"] == "others" and "other.ipynb" in data["cause"] and "1.5 GiB was free" in data["cause"]
    assert data["steps"][0]["magic"].startswith("%tfgpu visible auto --min-free ")
    assert data["suggested"] == {"visible": data["steps"][0]["magic"].removeprefix("%tfgpu visible ")}


def test_a_gpu_oom_names_the_free_memory_and_the_other_notebook(run):
    bundle = one_card(run, "gpu")
    data = bundle[MIME]
    assert_the_gpu_figures(data)
    assert data["asked"] == {"shape": [8, 1024, 1024, 64], "dtype": "float", "bytes": 2 * GIB, "device": "GPU:0",
                             "allocator": "GPU_0_bfc", "form": "tf"}
    assert data["message"] == GPU_MESSAGE
    text = bundle["text/plain"]
    assert "GPU 1 (NVIDIA H100 80GB HBM3, TensorFlow's GPU:0): 1.5 GiB free of 80.0 GiB" in text, text
    assert "other.ipynb (another kernel, pid" in text and "this kernel (mine.ipynb): 512.0 MiB" in text
    print(text)


def test_xlas_oom_on_gpu_likewise(run):
    data = one_card(run, "xla")[MIME]
    assert_the_gpu_figures(data)
    assert data["asked"]["form"] == "xla" and data["asked"]["bytes"] == 8 * GIB and data["asked"]["shape"] is None
    assert data["message"] == "Out of memory while trying to allocate 8589934592 bytes."


def test_another_error_gets_no_card(run):
    assert run["value_error"]["cards"] == []
    assert "tfgpu" not in run["value_error"]["text"]


def test_free_lets_go_of_what_only_the_failed_frame_held(run):
    assert len(run["held"]["cards"]) == 1
    assert "alive before free: True" in run["alive_before"]["text"]
    assert "alive after free: False" in run["alive_after"]["text"], run["free"]["text"]
    said = run["free"]["text"]
    assert said.startswith("tfgpu: free: dropped the last error (ResourceExhaustedError)"), said
    lines = said.splitlines()
    assert any(line.split()[:1] == ["figure"] and "before" in line and "after" in line for line in lines), said
    resident = next(line for line in lines if "resident memory" in line).split()
    before, after = (float(resident[k].replace(",", "")) * {"MiB": 1, "GiB": 1024}[resident[k + 1]] for k in (-4, -2))
    assert before - after > 200, resident  # the 256 MiB array went back to the system
    assert "GPU 1: this process, as NVML counts it" in said and "512.0 MiB" in said, said
    assert "stays reserved by TensorFlow's allocator" in said and "Only a restart returns it" in said
    print(said)


def test_oom_shows_the_last_card_again(run):
    again = run["again"]["cards"]
    assert len(again) == 1 and again[0] == run["held"]["cards"][0]
