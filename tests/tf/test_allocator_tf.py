"""`%tfgpu allocator async|bfc|off` with real TensorFlow in fresh processes: before the runtime starts the variable is
in the process's C environment (where TensorFlow's std::getenv reads it when it builds its GPU allocators), after
`import tensorflow` too; once `tf.constant(1)` started the runtime, a change is refused with the standard too-late
line and the variable stays as TensorFlow read it; a TF_GPU_ALLOCATOR the kernel started with reads as the
notebook's. The CPU build never builds a GPU allocator, so what the variable does to one is the GPU check's
(benchmarks/gpu_check.py); the timing and the refusals are TensorFlow's state, checked here."""

from __future__ import annotations

import json

import pytest
from harness import SHELL_PRELUDE, run_tf, tf_env

pytestmark = pytest.mark.tf

HELPERS = SHELL_PRELUDE + """
import ctypes, json, os
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
_getenv = ctypes.CDLL(None).getenv
_getenv.restype = ctypes.c_char_p
def c_env():
    # What TensorFlow's C++ (std::getenv) reads, not only Python's os.environ.
    value = _getenv(b"TF_GPU_ALLOCATOR")
    return None if value is None else value.decode()
def said(line, lines=False):
    with capture_output() as c:
        try:
            magic(line)
        except UsageError as err:
            return "REFUSED " + str(err)
    return c.stdout.splitlines() if lines else " ".join(c.stdout.split())
def show(key, value):
    print(key, json.dumps(value))
"""

SESSION = HELPERS + """
show("A", [said("allocator async"), c_env()])
show("B", said("export", lines=True))
r = ip.run_cell("import tensorflow as tf")
assert r.success
show("C", c_env())
show("K", bool(ip.user_ns["tf"].sysconfig.get_build_info().get("is_cuda_build")))
show("D", [said("allocator bfc"), c_env()])
show("E", [said("allocator async"), c_env()])
show("F", said("allocator async"))
assert ip.run_cell("x = tf.constant(1)").success
show("G", [said("allocator bfc"), c_env(), os.environ.get("TF_GPU_ALLOCATOR")])
show("H", [said("allocator off"), c_env()])
show("I", said("allocator async"))
show("J", [[r["setting"], r["asked"], r["status"]] for r in magic("status --json")["settings"]])
"""

PRESET = HELPERS + """
assert ip.run_cell("import tensorflow as tf\\nx = tf.constant(1)").success
status = magic("status --json")
show("A", [[r["setting"], r["asked"], r["status"], r["detail"]] for r in status["settings"]])
show("B", said("allocator bfc"))
show("C", said("allocator async"))
show("D", [c_env(), os.environ.get("TF_GPU_ALLOCATOR")])
show("E", said("export", lines=True))
"""

UNKNOWN = HELPERS + """
show("A", magic("status --json")["notes"])
assert ip.run_cell("import tensorflow as tf\\nx = tf.constant(1)").success
show("B", [r["setting"] for r in magic("status --json")["settings"]])
show("C", said("allocator async"))
"""


def shown(out: str) -> dict:
    return {line[0]: json.loads(line[2:]) for line in out.splitlines() if line[:1].isupper() and line[1:2] == " "}


def test_before_the_start_the_variable_is_what_tensorflow_reads_after_it_a_change_is_refused():
    got = shown(run_tf(SESSION).stdout)
    assert got["A"] == ["tfgpu: %tfgpu allocator async: waiting for import (applied when TensorFlow is imported)",
                        "cuda_malloc_async"]
    export, line = got["B"], 'os.environ["TF_GPU_ALLOCATOR"] = "cuda_malloc_async"'
    assert line in export and export.index(line) < export.index("import tensorflow as tf")
    assert got["C"] == "cuda_malloc_async"  # imported, runtime not started: still there for it to read
    # Between import and the start the variable is the whole setting: unset for bfc, set again for async. A CPU-only
    # build builds no GPU allocator: "no GPU to apply to", as growth and limit say, with the variable set all the same.
    cuda = got["K"]
    applied, again = ("applied", "already in force") if cuda else ("no GPU to apply to", "no GPU to apply to")
    reads = ("TensorFlow reads it when its runtime starts" if cuda else
             "this TensorFlow is a CPU-only build, which builds no GPU allocator")
    assert got["D"][1] is None
    # The detail in parentheses, or on a line of its own where the line would pass 120 characters (issue 37).
    assert got["D"][0].startswith(f"tfgpu: %tfgpu allocator bfc: {applied} ") and \
        f"TF_GPU_ALLOCATOR unset; {reads}" in got["D"][0]
    assert got["E"][1] == "cuda_malloc_async" and got["E"][0].startswith(f"tfgpu: %tfgpu allocator async: {applied} ")
    assert got["F"].startswith(f"tfgpu: %tfgpu allocator async: {again}")
    # The runtime started: the change is refused with the standard line, and the variable is left as it was read.
    refusal, c_value, py_value = got["G"]
    assert refusal == ("REFUSED tfgpu: `%tfgpu allocator bfc` is too late: TensorFlow's runtime has started; "
                       "restart the kernel and run it first")
    assert c_value == py_value == "cuda_malloc_async"
    assert got["H"][0].startswith("REFUSED tfgpu: `%tfgpu allocator off` is too late") and got["H"][1] == c_value
    assert got["I"].startswith("tfgpu: %tfgpu allocator async: already in force (TensorFlow started with CUDA's async")
    assert ["allocator", "async", "unchanged"] in got["J"]


def test_a_variable_the_kernel_started_with_reads_as_the_notebooks():
    got = shown(run_tf(PRESET, env=tf_env(TF_GPU_ALLOCATOR="cuda_malloc_async")).stdout)
    assert got["A"] == [["allocator", "async", "notebook",
                         "TF_GPU_ALLOCATOR=cuda_malloc_async: in the kernel's environment, not set by tfgpu"]]
    assert got["B"].startswith("REFUSED tfgpu: `%tfgpu allocator bfc` is too late"), got["B"]
    assert got["C"].startswith("tfgpu: %tfgpu allocator async: already in force"), got["C"]
    assert got["D"] == ["cuda_malloc_async", "cuda_malloc_async"]
    assert 'os.environ["TF_GPU_ALLOCATOR"] = "cuda_malloc_async"' in got["E"]  # the notebook's, exported too


def test_a_word_tensorflow_ignores_is_noted_and_is_its_bfc_allocator():
    got = shown(run_tf(UNKNOWN, env=tf_env(TF_GPU_ALLOCATOR="fast")).stdout)
    assert any(note.startswith("TF_GPU_ALLOCATOR='fast' is ignored by TensorFlow") for note in got["A"]), got["A"]
    assert got["B"] == []  # TensorFlow's default allocator: nothing of the notebook's to show
    assert got["C"].startswith("REFUSED tfgpu: `%tfgpu allocator async` is too late"), got["C"]
