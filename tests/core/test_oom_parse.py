"""The OOM card's core, without TensorFlow: TensorFlow's three OOM texts and their wrappers parsed, the error found in
an exception's chain by its classes' names, the cause and steps chosen from hand-made figures, the figures gathered
from an in-memory NVML snapshot and kernel reports, and both rendered forms escaping what came from data. The real
error in a real kernel: tests/kernel/test_oom_card_kernel.py."""

from __future__ import annotations

import dataclasses
import sys
from types import SimpleNamespace

import pytest
from gpu_fakes import gpu as fake_gpu

from tfgpu_magic.core import oom, oom_figures
from tfgpu_magic.core import settings as registry
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot, Unavailable
from tfgpu_magic.render.oom import to_html, to_text

GIB = 1 << 30
CPU_TEXT = ("OOM when allocating tensor with shape[1099511627776] and type float on "
            "/job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu [Op:Fill]")
CPU_MESSAGE = CPU_TEXT.removesuffix(" [Op:Fill]")
GPU_TEXT = ("{{function_node __wrapped__Fill_device_/job:localhost/replica:0/task:0/device:GPU:0}} OOM when "
            "allocating tensor with shape[64,1024,1024] and type half on /job:localhost/replica:0/task:0/device:GPU:0 "
            "by allocator GPU_0_bfc [Op:Fill] name: ")
BIG_GPU_TEXT = GPU_TEXT.replace("shape[64,1024,1024] and type half", "shape[1024,1024,1024] and type float")  # 4 GiB
XLA_TEXT = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.\n"
            "BufferAssignment OOM Debugging.")
KERAS_TEXT = ("Exception encountered when calling Lambda.call().\n\n\x1b[1m" + CPU_TEXT + "\x1b[0m\n\n"
              "Arguments received by Lambda.call():\n  • inputs=tf.Tensor(shape=(1, 1), dtype=float32)")
GRAPH_TEXT = ("Graph execution error:\n\nDetected at node zeros defined at (most recent call last):\n  "
              "File \"<cell>\", line 3\n\n" + CPU_MESSAGE + "\n\t [[{{node zeros}}]]\nHint: If you want to see a "
              "list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for "
              "current allocation info. [Op:__inference_predict_function_123]")


# -- the texts ----------------------------------------------------------------------------------------------------
def test_the_cpu_text_of_tf_zeros_2_to_the_40():
    asked = oom.parse(CPU_TEXT)
    assert asked == oom.Asked(message=CPU_MESSAGE, form="tf", shape=(1099511627776,), dtype="float",
                              bytes=4398046511104, device="CPU:0", allocator="mklcpu")


def test_the_gpu_text_inside_tensorflows_function_node_prefix():
    asked = oom.parse(GPU_TEXT)
    assert (asked.shape, asked.dtype, asked.bytes) == ((64, 1024, 1024), "half", 64 * 1024 * 1024 * 2)
    assert (asked.device, asked.allocator, asked.form) == ("GPU:0", "GPU_0_bfc", "tf")
    assert asked.message.startswith("OOM when allocating") and asked.message.endswith("by allocator GPU_0_bfc")


def test_xlas_text_gives_the_bytes_and_no_device():
    asked = oom.parse(XLA_TEXT)
    assert (asked.form, asked.bytes, asked.shape, asked.dtype, asked.device) == ("xla", 17179869184, None, None, None)
    assert asked.message == "Out of memory while trying to allocate 17179869184 bytes."


@pytest.mark.parametrize("text", [KERAS_TEXT, GRAPH_TEXT], ids=["keras-call", "graph-execution"])
def test_a_wrapped_text_gives_the_same_ask(text):
    asked = oom.parse(text)
    assert asked == oom.parse(CPU_TEXT), asked
    assert "\x1b" not in asked.message and "[[" not in asked.message


def test_an_older_tensorflows_wording_and_an_unknown_dimension():
    asked = oom.parse("OOM when allocating tensor of shape [] and type int64")
    assert (asked.shape, asked.bytes, asked.device, asked.allocator) == ((), 8, None, None)
    unknown = oom.parse("OOM when allocating tensor with shape[?,128] and type float on /device:GPU:1 by allocator x")
    assert (unknown.shape, unknown.bytes, unknown.device) == (None, None, "GPU:1")


@pytest.mark.parametrize(("dtype", "size"), [
    ("float", 4), ("double", 8), ("half", 2), ("bfloat16", 2), ("int8", 1), ("uint8", 1), ("int16", 2),
    ("int32", 4), ("int64", 8), ("bool", 1), ("complex64", 8), ("complex128", 16), ("uint64", 8), ("qint8", 1),
    ("string", None), ("variant", None),
])
def test_dtype_sizes(dtype, size):
    assert oom.element_bytes(dtype) == size
    asked = oom.parse(f"OOM when allocating tensor with shape[3,5] and type {dtype} on /device:CPU:0 by allocator cpu")
    assert asked.bytes == (15 * size if size is not None else None)


@pytest.mark.parametrize("text", [
    "Incompatible shapes: [2,3] vs. [3,2] [Op:AddV2]",
    "ValueError: too many values to unpack",
    "Out of memory",  # no figure: not XLA's sentence
    "",
])
def test_a_text_that_is_no_oom_gives_none(text):
    assert oom.parse(text) is None


@pytest.mark.parametrize(("text", "short"), [
    ("/job:localhost/replica:0/task:0/device:GPU:3", "GPU:3"), ("/GPU:0", "GPU:0"), ("gpu:1", "GPU:1"),
    ("/device:CPU:0", "CPU:0"), ("", None), (None, None), ("/TPU:0", None),
])
def test_short_device_names(text, short):
    assert oom.short_device(text) == short


# -- the error in an exception's chain -----------------------------------------------------------------------------
def _tf_class(name: str, base: type = Exception) -> type:
    return type(name, (base,), {"__module__": "tensorflow.python.framework.errors_impl"})


@pytest.fixture
def tf_loaded(monkeypatch):
    """``sys.modules`` as after `import tensorflow`, with a stand-in module (oom_error only looks the name up)."""
    monkeypatch.setitem(sys.modules, "tensorflow", SimpleNamespace(__name__="tensorflow"))


def test_the_error_is_found_by_its_classes_names_directly_and_through_the_chain(tf_loaded):
    op_error = _tf_class("OpError")
    exhausted = _tf_class("ResourceExhaustedError", op_error)
    error = exhausted(CPU_TEXT)
    assert oom.oom_error(error) is error
    try:  # raised during another exception's handling, then wrapped "from" it
        try:
            raise error
        except Exception as inner:
            raise RuntimeError("Exception encountered when calling layer") from inner
    except RuntimeError as outer:
        assert oom.oom_error(outer) is error
    wrapped = ValueError("context only")
    wrapped.__context__ = error
    wrapped.__suppress_context__ = True  # `raise ... from None`, as Keras does: the context is still there
    assert oom.oom_error(wrapped) is error
    subclass = type("MyOOM", (exhausted,), {})  # a subclass of TensorFlow's, by its MRO
    assert oom.oom_error(subclass("x")) is not None


def test_other_errors_and_lookalikes_are_not_it(tf_loaded):
    assert oom.oom_error(ValueError(CPU_TEXT)) is None  # the text alone does not make a card
    named = type("ResourceExhaustedError", (Exception,), {"__module__": "somewhere.else"})
    assert oom.oom_error(named("x")) is None
    assert oom.oom_error(None) is None
    loop = ValueError("a")
    loop.__context__ = KeyError("b")
    loop.__context__.__context__ = loop  # a cycle ends
    assert oom.oom_error(loop) is None


def test_without_tensorflow_loaded_nothing_is_looked_at():
    assert "tensorflow" not in sys.modules
    assert oom.oom_error(_tf_class("ResourceExhaustedError")("x")) is None


def test_the_ask_comes_from_a_wrapper_when_the_error_itself_has_no_text(tf_loaded):
    exhausted = _tf_class("ResourceExhaustedError")("")
    outer = RuntimeError(KERAS_TEXT)
    outer.__cause__ = exhausted
    assert oom.asked_of(outer, exhausted) == oom.parse(CPU_TEXT)
    bare = oom.asked_of(_tf_class("ResourceExhaustedError")("Failed to allocate the batch [Op:IteratorGetNext]"))
    assert (bare.form, bare.message, bare.bytes) == ("unknown", "Failed to allocate the batch", None)


# -- the cause and the steps ---------------------------------------------------------------------------------------
NAMES = registry.names()


def facts(text: str = GPU_TEXT, **figures) -> oom.Facts:
    asked = oom.parse(text)
    base = {"asked": asked, "device": asked.device, "registered": NAMES, "physical_index": 1}
    return oom.Facts(**{**base, **figures})


def holder(pid, gib, mine=False, notebook=None):
    return oom.Holder(pid=pid, bytes=int(gib * GIB), mine=mine, notebook=notebook)


def magics(diagnosis) -> list:
    return [s["magic"] for s in diagnosis.steps]


def _with_smaller_batch(diagnosis):
    assert 2 <= len(diagnosis.steps) <= 3, diagnosis.steps
    assert any(s["magic"] is None and s["why"].startswith("a smaller batch") for s in diagnosis.steps), diagnosis
    assert diagnosis.cause.endswith(".") and "\n" not in diagnosis.cause
    return diagnosis


def test_cpu_says_host_memory_and_has_no_gpu_steps():
    d = _with_smaller_batch(oom.diagnose(facts(CPU_TEXT, host_total=16 * GIB, host_available=12 * GIB,
                                               physical_index=None)))
    assert d.case == "cpu" and d.suggested == {}
    assert d.cause == ("TensorFlow could not get 4.0 TiB for a float tensor of shape [1099511627776] on CPU:0, more "
                       "than this machine's 16.0 GiB of host memory in all.")
    assert magics(d) == [None, "%tfgpu free"]


def test_another_process_holding_most_of_the_gpu_suggests_another_gpu():
    f = facts(gpu_total=80 * GIB, gpu_free=1 * GIB, tf_current=2 * GIB,
              holders=(holder(4242, 70, notebook="other.ipynb"), holder(77, 5), holder(99, 3, mine=True)))
    d = _with_smaller_batch(oom.diagnose(f))
    assert d.case == "others"
    assert d.cause.startswith("Other processes hold 75.0 GiB of the 80.0 GiB on GPU 1 (TensorFlow's GPU:0); "
                              "other.ipynb (another kernel, pid 4242) alone holds 70.0 GiB; 1.0 GiB was free when")
    assert magics(d)[0] == "%tfgpu visible auto --min-free 3GB"  # (128 MiB asked + 2 GiB in use) * 1.25, rounded up
    assert d.suggested == {"visible": "auto --min-free 3GB"}


def test_this_kernel_holding_the_gpu_without_growth_suggests_growth_and_a_limit():
    f = facts(BIG_GPU_TEXT, gpu_total=80 * GIB, gpu_free=1 * GIB, tf_current=78 * GIB, memory_grows=False,
              holders=(holder(99, 78.5, mine=True),))
    d = _with_smaller_batch(oom.diagnose(f))
    assert d.case == "mine_reserved" and "memory growth is off" in d.cause
    assert magics(d) == ["%tfgpu growth on", "%tfgpu limit 60%", None]
    assert d.suggested == {"growth": "on"}


def test_room_in_bfcs_pool_but_not_in_one_piece_is_fragmentation():
    f = facts(BIG_GPU_TEXT, gpu_total=80 * GIB, gpu_free=1 * GIB, tf_current=40 * GIB, memory_grows=False,
              holders=(holder(99, 78, mine=True),))
    d = _with_smaller_batch(oom.diagnose(f))
    assert d.case == "fragmented" and "fragmented" in d.cause and "39.0 GiB" in d.cause
    if "allocator" in NAMES:
        assert magics(d)[0] == "%tfgpu allocator async" and d.suggested == {"allocator": "async"}
    else:  # a tfgpu_magic without the allocator setting suggests no magic it does not have
        assert "%tfgpu allocator async" not in magics(d) and d.suggested == {}


def test_this_kernel_using_the_gpu_with_growth_on_suggests_freeing():
    f = facts(BIG_GPU_TEXT, gpu_total=80 * GIB, gpu_free=1 * GIB, tf_current=78 * GIB, memory_grows=True,
              holders=(holder(99, 78.9, mine=True),))
    d = _with_smaller_batch(oom.diagnose(f))
    assert d.case == "mine_used" and magics(d)[0] == "%tfgpu free --keras"


def test_a_tensor_larger_than_the_gpu():
    d = _with_smaller_batch(oom.diagnose(facts(CPU_TEXT.replace("CPU", "GPU"), gpu_total=80 * GIB, gpu_free=70 * GIB)))
    assert d.case == "too_big" and "more than the GPU's whole memory (80.0 GiB)" in d.cause and d.suggested == {}


def test_no_gpu_figures_says_why():
    d = _with_smaller_batch(oom.diagnose(facts(gpu_why="NVML library (libnvidia-ml.so.1) not found")))
    assert d.case == "unknown" and "libnvidia-ml.so.1" in d.cause


def test_a_step_naming_a_setting_that_is_not_registered_is_left_out():
    f = facts(BIG_GPU_TEXT, gpu_total=80 * GIB, gpu_free=1 * GIB, tf_current=78 * GIB, memory_grows=False,
              holders=(holder(99, 78.5, mine=True),), registered=tuple(n for n in NAMES if n != "growth"))
    d = oom.diagnose(f)
    assert "%tfgpu growth on" not in magics(d) and d.suggested == {}


# -- gathering, from an in-memory NVML and reports --------------------------------------------------------------------
def _snapshot(processes) -> NvmlSnapshot:
    gpus = (fake_gpu(0, "NVIDIA A100-SXM4-40GB", 40960, 100), fake_gpu(1, "NVIDIA H100 80GB HBM3", 81920, 80000,
                                                                      processes))
    gpus = tuple(dataclasses.replace(g, memory_total_bytes=g.memory_total_mib << 20,
                                     memory_free_bytes=g.memory_free_mib << 20) for g in gpus)
    return NvmlSnapshot(available=True, gpus=gpus)


def test_gather_maps_tensorflows_gpu_0_to_the_physical_gpu_and_names_the_holders(tf_loaded):
    error = _tf_class("ResourceExhaustedError")(GPU_TEXT)
    other = GpuProcess(4242, 70000, "python", "bob", used_bytes=70000 << 20)
    stranger = GpuProcess(5151, 8000, "train.py", "carol", used_bytes=8000 << 20)
    me = GpuProcess(999, 1000, "python", "ann", is_self=True, used_bytes=1000 << 20)
    reports = {"k1": SimpleNamespace(notebook="other.ipynb", host_pid=None, pid=4242)}
    controller = SimpleNamespace(plan=registry.Plan(), environ={"CUDA_VISIBLE_DEVICES": "1",
                                                               "JPY_SESSION_NAME": "/home/ann/mine.ipynb"})
    data = oom_figures.report(error, controller=controller, snapshot=_snapshot((other, stranger, me)), reports=reports,
                      execution_count=7)
    assert (data["kind"], data["physical_index"], data["execution_count"]) == ("gpu", 1, 7)
    assert data["gpu"] == {"name": "NVIDIA H100 80GB HBM3", "total_bytes": 81920 << 20, "free_bytes": 1920 << 20}
    assert [(h["text"], h["bytes"], h["mine"]) for h in data["holders"]] == [
        ("other.ipynb (another kernel, pid 4242)", 70000 << 20, False),
        ("pid 5151 (carol, train.py)", 8000 << 20, False),
        ("this kernel (/home/ann/mine.ipynb)", 1000 << 20, True)]
    assert data["case"] == "others" and "other.ipynb" in data["cause"]
    assert data["tf_memory"] == {"current_bytes": None, "peak_bytes": None}  # no TensorFlow runtime to ask
    assert set(data) >= {"schema", "kind", "error", "message", "asked", "physical_index", "tf_memory", "settings",
                         "gpu", "holders", "cause", "steps", "suggested", "execution_count"}
    assert data["error"] == "ResourceExhaustedError" and data["schema"] == 1


def test_a_report_with_a_learned_host_pid_names_nvmls_number(tf_loaded):
    error = _tf_class("ResourceExhaustedError")(GPU_TEXT)
    other = GpuProcess(70001, 70000, None, None, used_bytes=70000 << 20)  # a container: no name, no user
    snap = _snapshot((other,))
    snap = NvmlSnapshot(available=True, gpus=snap.gpus, pids={"comparable": False, "view": "none", "note": ""})
    reports = {"k1": SimpleNamespace(notebook="lab/other.ipynb", host_pid=70001, pid=12)}
    controller = SimpleNamespace(plan=registry.Plan(), environ={"CUDA_VISIBLE_DEVICES": "1"})
    data = oom_figures.report(error, controller=controller, snapshot=snap, reports=reports)
    assert data["holders"][0]["notebook"] == "lab/other.ipynb" and data["holders"][0]["pid"] == 70001
    data = oom_figures.report(error, controller=controller, snapshot=snap, reports={})
    assert data["holders"][0]["text"] == "pid 70001 (not placeable from here)"


def test_gather_without_nvml_says_why(tf_loaded):
    error = _tf_class("ResourceExhaustedError")(GPU_TEXT)
    snap = NvmlSnapshot(available=False, error=Unavailable("error", "NVML library (libnvidia-ml.so.1) not found"))
    data = oom_figures.report(error, controller=SimpleNamespace(plan=registry.Plan(), environ={}), snapshot=snap)
    assert data["gpu"] is None and data["holders"] == [] and data["physical_index"] is None
    assert "libnvidia-ml.so.1" in data["cause"] and data["case"] == "unknown"


def test_the_cpu_card_has_host_memory_and_no_holders(tf_loaded):
    data = oom_figures.report(_tf_class("ResourceExhaustedError")(CPU_TEXT),
                      controller=SimpleNamespace(plan=registry.Plan(), environ={}))
    assert (data["kind"], data["gpu"], data["holders"], data["physical_index"]) == ("cpu", None, [], None)
    assert data["asked"]["shape"] == [1099511627776] and data["asked"]["bytes"] == 4398046511104
    assert "host memory" in data["cause"] and data["host"]["total_bytes"] > 0


# -- rendering -------------------------------------------------------------------------------------------------------
def _hostile() -> dict:
    f = facts(gpu_total=80 * GIB, gpu_free=1 * GIB, gpu_name="<b>GPU</b>",
              holders=(oom.Holder(pid=1, bytes=70 * GIB, notebook="<img src=x onerror=alert(1)>.ipynb"),),
              settings=(("limit[0]", "<script>"),))
    data = oom.card(f)
    data["message"] = "OOM <script>alert('x')</script>\x1b[2J"
    return data


def test_html_escapes_every_value_and_uses_the_views_classes():
    page = to_html(_hostile())
    assert "<script>" not in page and "<img" not in page and "<b>GPU" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;.ipynb" in page and "&lt;script&gt;" in page
    assert "class='tfgpu-view tfgpu-oom'" in page and "tfgpu-oom-steps" in page and "tfgpu-oom-holders" in page


def test_text_is_printable_and_within_100_columns():
    text = to_text(_hostile())
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert all(len(line) <= 100 for line in text.splitlines() if " " in line.strip()), text
    assert "Held by: <img src=x onerror=alert(1)>.ipynb (another kernel, pid 1): 70.0 GiB" in text
