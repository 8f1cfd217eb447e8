"""`%tfgpu memory` against real TensorFlow in fresh processes: every logical CPU shown, no made-up figures (the
views themselves, without TensorFlow, are tests/render/test_views.py)."""

from __future__ import annotations

import json

import pytest
from harness import SHELL_PRELUDE, run_tf, tf_env

# -- %tfgpu memory against real TensorFlow -------------------------------------------------------------
MEMORY_SESSION = SHELL_PRELUDE + """
import json
from IPython.utils.capture import capture_output
import tfgpu_magic
magic("cpus 2")
assert cell("import tensorflow as tf\\nx = tf.matmul(tf.ones((256, 256)), tf.ones((256, 256)))").success
with capture_output() as captured:
    magic("memory")
(output,) = captured.outputs
print("TEXT"); print(output.data["text/plain"])
print("HTML"); print(output.data["text/html"])
print("JSON", json.dumps(tfgpu_magic.snapshot().to_dict()["tensorflow"]["memory"]))
"""


def memory_session(**env: str) -> tuple[str, str, list[dict]]:
    out = run_tf(MEMORY_SESSION, env=tf_env(**env)).stdout
    text, rest = out.split("TEXT\n", 1)[1].split("\nHTML\n", 1)
    page, data = rest.split("\nJSON ", 1)
    return text, page, json.loads(data)


@pytest.mark.tf
def test_memory_without_cpu_figures_says_why_and_how_to_get_them():
    # oneDNN's CPU allocator (on by default in x86 builds) keeps figures; TensorFlow's plain one does not.
    text, page, data = memory_session(TF_ENABLE_ONEDNN_OPTS="0")
    assert [m["device"] for m in data] == ["CPU:0", "CPU:1"]
    assert all(m["current_mib"] is None and m["peak_mib"] is None for m in data), data
    assert data[1]["shared_with"] == "CPU:0"
    for view in (text, page):
        assert "CPU:0" in view and "CPU:1" in view
        assert "TF_CPU_ALLOCATOR_USE_BFC=true" in view
        assert "0.0" not in view, view


@pytest.mark.tf
def test_memory_with_the_bfc_cpu_allocator_has_real_figures_shared_by_every_cpu():
    text, page, data = memory_session(TF_ENABLE_ONEDNN_OPTS="0", TF_CPU_ALLOCATOR_USE_BFC="true")
    cpu0, cpu1 = data
    assert cpu0["device"] == "CPU:0" and cpu0["peak_mib"] > 0 and cpu0["current_mib"] is not None
    assert cpu1["device"] == "CPU:1" and cpu1["shared_with"] == "CPU:0"
    assert f"{cpu0['peak_mib']:.1f}" in text and f"{cpu0['peak_mib']:.1f}" in page
    assert "CPU:1" in text and "CPU:0's allocator" in text
