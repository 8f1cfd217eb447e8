"""`%tfgpu cpumem on|off`: TensorFlow's CPU allocator figures (TF_CPU_ALLOCATOR_USE_BFC), a setting like the others:
it waits for import, is set before the runtime starts, is refused after when it would change something, and
comes back out of `%tfgpu export` and `%tfgpu reset`. Real TensorFlow in fresh processes."""

from __future__ import annotations

import pytest
from harness import SHELL_PRELUDE, run_tf, tf_env

pytestmark = pytest.mark.tf

SESSION = SHELL_PRELUDE + """
import os
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
def said(line):
    with capture_output() as c:
        try:
            magic(line)
        except UsageError as err:
            return "REFUSED " + str(err)
    return c.stdout.strip()
print("A", said("cpumem on"), os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))
print("B", said("reset"), os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))
print("C", said("cpumem on"))
print("D", said("export").replace(chr(10), " | "))
assert cell("import tensorflow as tf").success
print("E", said("cpumem on"))
assert cell("x = tf.ones((512, 512))").success
assert cell("print('F', tf.config.experimental.get_memory_info('CPU:0')['current'] > 0)").success
print("G", said("cpumem on"))
print("H", said("cpumem off"))
"""

LATE = SHELL_PRELUDE + """
from IPython.core.error import UsageError
assert cell("import tensorflow as tf\\nx = tf.ones((4, 4))").success
try:
    magic("cpumem on")
except UsageError as err:
    print("REFUSED", err)
"""


def lines(out: str) -> dict[str, str]:
    return {line[0]: line[2:] for line in out.splitlines() if line[:2] in {f"{k} " for k in "ABCDEFGH"}}


def test_cpumem_waits_for_import_is_reset_exported_and_gives_figures():
    got = lines(run_tf(SESSION, env=tf_env(TF_ENABLE_ONEDNN_OPTS="0")).stdout)
    assert got["A"] == "tfgpu: %tfgpu cpumem on: waiting for import (applied when TensorFlow is imported) true"
    assert got["B"] == "tfgpu: reset: dropped cpumem None"  # the variable is put back as it was
    assert 'os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"' in got["D"]
    assert got["D"].index("TF_CPU_ALLOCATOR_USE_BFC") < got["D"].index("import tensorflow")
    # Applied at import; asked again before the runtime starts, the variable is simply set again.
    assert got["E"].startswith("tfgpu: %tfgpu cpumem on: applied (TF_CPU_ALLOCATOR_USE_BFC=true"), got["E"]
    assert got["F"] == "True"  # the plain allocator (oneDNN off) keeps figures only because of the setting
    assert got["G"].startswith("tfgpu: %tfgpu cpumem on: already in force")
    assert got["H"].startswith("REFUSED tfgpu: `%tfgpu cpumem off` is too late"), got["H"]


def test_cpumem_after_the_runtime_started_is_refused_in_one_line_with_the_fix():
    out = run_tf(LATE, env=tf_env(TF_ENABLE_ONEDNN_OPTS="0")).stdout
    (line,) = [x for x in out.splitlines() if x.startswith("REFUSED")]
    assert line == ("REFUSED tfgpu: `%tfgpu cpumem on` is too late: TensorFlow's runtime has started; restart the "
                    "kernel and run it first")
