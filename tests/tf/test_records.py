"""The kernel's record of a setting is what TensorFlow has: a CPU split the notebook made with its own
`tf.config.set_logical_device_configuration` is read back after its cell and shown as the notebook's (status,
export, the live model), a `%tfgpu cpus` after it says it replaces the notebook's own, and a late `visible` is
refused as too late on a CPU-only build as on any other (it was recorded as 'no GPU to apply to', and status and
export then showed a visible set the process did not have)."""

from __future__ import annotations

import json

import pytest
from fakenvml import three_gpus
from harness import SHELL_PRELUDE, run_tf, tf_env

pytestmark = pytest.mark.tf

RECORD = """
import json
from tfgpu_magic.core.export import render_tf2
from tfgpu_magic.ipython.context import LOADED
def record(tag, devices=False):
    m = LOADED[id(ip)]
    tf = ip.user_ns.get("tf")  # listing logical devices starts the runtime: only where the test has started it
    print(json.dumps({"tag": tag, "settings": m.controller.settings(), "export": render_tf2(m.controller.plan),
                      "tf": len(tf.config.list_logical_devices("CPU")) if devices else None}))
"""


def _records(out: str) -> dict[str, dict]:
    return {r["tag"]: r for r in (json.loads(line) for line in out.splitlines() if line.startswith('{"tag"'))}


def test_a_split_the_notebook_made_after_tfgpus_is_read_back_as_the_notebooks():
    out = run_tf(SHELL_PRELUDE + RECORD + """
magic("cpus 2")
cell("import tensorflow as tf")
cell("cpu = tf.config.list_physical_devices('CPU')[0]\\n"
     "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)")
record("after")
cell("x = tf.constant(1)")
record("started", devices=True)
print("STATUS")
magic("status")
""").stdout
    records = _records(out)
    for tag in ("after", "started"):
        (row,) = records[tag]["settings"]
        assert (row["setting"], row["asked"], row["status"]) == ("cpus", "4", "notebook"), records[tag]
        assert "the notebook's own tf.config.set_logical_device_configuration" in row["detail"]
        assert "* 4)" in records[tag]["export"] and "* 2)" not in records[tag]["export"], records[tag]["export"]
    assert records["started"]["tf"] == 4
    status = out.split("STATUS\n", 1)[1]
    (line,) = [line for line in status.splitlines() if "cpus" in line]
    assert "set by the notebook" in line and "4" in line, status


@pytest.mark.parametrize("split", [3, 5])
def test_a_split_the_notebook_made_itself_is_shown_and_a_later_cpus_says_it_replaces_it(split):
    out = run_tf(SHELL_PRELUDE + RECORD + f"""
cell("import tensorflow as tf")
cell("cpu = tf.config.list_physical_devices('CPU')[0]\\n"
     "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * {split})")
record("own")
magic("cpus 2")
print("OUTCOME", json.dumps(LOADED[id(ip)].controller.outcomes["cpus"].detail))
cell("x = tf.constant(1)")
record("replaced", devices=True)
""").stdout
    records = _records(out)
    (row,) = records["own"]["settings"]
    assert (row["asked"], row["status"]) == (str(split), "notebook"), row
    assert f"* {split})" in records["own"]["export"]
    detail = json.loads(out.split("OUTCOME ", 1)[1].splitlines()[0])
    assert f"replacing the notebook's own {split} logical CPUs" in detail, detail  # never silently
    (row,) = records["replaced"]["settings"]
    assert (row["asked"], row["status"], records["replaced"]["tf"]) == ("2", "applied", 2), records["replaced"]


def test_a_late_visible_on_a_cpu_only_build_is_refused_as_too_late_and_changes_no_record(fake_nvml):
    fake_nvml.write(three_gpus())
    out = run_tf(SHELL_PRELUDE + RECORD + """
magic("visible 0")
cell("import tensorflow as tf\\nx = tf.constant(1)")
for line in ("visible 2", "visible all", "visible 1,2"):
    r = cell("%tfgpu " + line)
    print("REFUSED", json.dumps(str(r.error_in_exec)))
record("after")
magic("visible 0")
print("SAME", json.dumps(LOADED[id(ip)].controller.outcomes["visible"].status.value))
""", env={**tf_env(), **fake_nvml.env}).stdout
    refusals = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("REFUSED ")]
    assert len(refusals) == 3
    for message, line in zip(refusals, ("visible 2", "visible all", "visible 1,2"), strict=True):
        assert message.startswith(f"tfgpu: `%tfgpu {line}` is too late: TensorFlow has listed its devices"), message
        assert message.endswith("; restart the kernel and run it first") and len(message) <= 120, message
    (row,) = _records(out)["after"]["settings"]
    assert (row["setting"], row["asked"]) == ("visible", "0"), row
    assert 'os.environ["CUDA_VISIBLE_DEVICES"] = "0"' in _records(out)["after"]["export"]
    assert json.loads(out.split("SAME ", 1)[1].splitlines()[0]) == "no GPU to apply to"  # the value in force: fine
