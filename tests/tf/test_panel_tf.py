"""The live panel in a scripted session: the fake NVML library, real TensorFlow in a subprocess and a placement
cell fill every part of it (the panel without TensorFlow is tests/ipython/test_panel.py). What a front end would
get is read from the widgets' state."""

from __future__ import annotations

import json
import re

import pytest
from fakenvml import three_gpus
from harness import SHELL_PRELUDE

# -- a scripted session: the fake NVML library, real TensorFlow, a placement cell ----
SESSION = SHELL_PRELUDE + """
import json, re, ipywidgets
from tfgpu_magic import Panel
def dump(p):
    out, stack = [], [p]
    while stack:
        w = stack.pop()
        out.append({"model": w.get_state()["_model_name"], "value": getattr(w, "value", None),
                    "disabled": getattr(w, "disabled", None), "description": getattr(w, "description", None)})
        stack.extend(getattr(w, "children", ()))
    return out
magic("visible 1")
p = Panel()
before = dump(p)
magic("visible all")
magic("cpus 2")
magic("cpumem on")
magic("placement on")
assert cell("import tensorflow as tf").success
assert cell("x = tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))").success
assert cell("y = tf.ones((1024, 1024)) * 3.0").success
after = dump(p)
p.close()
print(json.dumps({"before": before, "after": after}))
"""


def plain(states: list[dict]) -> str:
    values = [s["value"] for s in states if s["model"] == "HTMLModel" and isinstance(s["value"], str)]
    return " ".join(re.sub(r"<[^>]+>", " ", " ".join(values)).replace("&#x27;", "'").split())


@pytest.mark.tf
def test_a_scripted_session_fills_every_part_of_the_panel(fake_nvml):
    fake_nvml.write(three_gpus())
    proc = fake_nvml.run_python(SESSION, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = plain(data["before"]), plain(data["after"])
    # Before import: the fake GPUs, and no TensorFlow number for them: this venv's tensorflow-cpu will list none, which
    # its installed build says before the import (issue 37).
    assert "GPU 1 · NVIDIA H100 80GB HBM3" in before and "TensorFlow GPU:0" not in before, before
    assert "TensorFlow will list none of the 3 GPUs NVML lists: tensorflow-cpu " in before, before
    assert "30,000 / 40,960 MiB used (73%)" in before
    assert "this kernel reserved" in before  # the fake lists this process on GPU 1
    # After: both logical CPUs, memory figures, per-cell rows and the MatMul's placement.
    assert "logical CPU:0 CPU" in after and "logical CPU:1 CPU" in after
    assert "TensorFlow sees none of the 3 GPUs NVML lists: tensorflow-cpu " in after
    assert re.search(r"TensorFlow CPU allocator in use [\d.]+ MiB, peak [\d.]+ MiB", after), after
    # Cells before the runtime started are not recorded: the MatMul's cell started it, then one more.
    assert "Recent cells (the last 2, latest first)" in after and "(started TensorFlow)" in after, after
    assert re.search(r"MatMul", after) and "records match" in after
    # The settings TensorFlow fixed at its start are disabled, with the reason; placement still switches.
    controls = {s["description"]: s for s in data["after"] if s["model"] == "ButtonModel"}
    assert controls["Apply"]["disabled"] in (True, False)
    disabled = [s for s in data["after"] if s["model"] in ("TextModel", "DropdownModel") and s["disabled"]]
    assert len(disabled) == 6, disabled  # visible, cpus, cpumem, allocator, growth, limit
    assert after.count("TensorFlow's runtime has started, so") == 1  # the reason once, for the whole tab
