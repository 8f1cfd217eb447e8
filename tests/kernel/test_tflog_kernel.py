"""TensorFlow's own log in a real kernel with TF_CPP_MIN_LOG_LEVEL unset, as a user has it: one folded block, no raw
line reaches the cell, the user's own lines and handlers pass (the log's pieces, on sample lines:
tests/core/test_tflog.py)."""

from __future__ import annotations

import pytest
from test_placement_kernel import run_notebook


@pytest.mark.tf
def test_in_a_kernel_tensorflows_log_is_one_block_and_the_users_lines_pass():
    cells = run_notebook([
        "%load_ext tfgpu_magic",  # 0
        "%tfgpu cpus 2",  # 1
        "import tensorflow as tf",  # 2
        "import os\nprint('before')\nos.write(2, b'own line 1\\n')\nos.write(2, b'own line 2\\n')\nprint('after')",
        "from tensorflow.python.util import deprecation\n"  # 4: TensorFlow's own warning, from its package
        "_ = deprecation.deprecated(None, 'careful: <b>x</b>')(lambda: 1)()",
        "%tfgpu log",  # 5
        "%tfgpu log raw",  # 6
        "tf.get_logger().warning('raw again')",  # 7
        "%tfgpu log bogus",  # 8
        "%tfgpu log quiet",  # 9
        # 10: a notebook's own handler on tf.get_logger() gets TensorFlow's records and the notebook's own
        "import logging\nseen = []\nh = logging.Handler()\nh.emit = lambda r: seen.append(r.getMessage())"
        "\ntf.get_logger().addHandler(h)\ndeprecation.deprecated(None, 'again')(lambda: 2)()\n"
        "tf.get_logger().warning('mine: %s', 42)\nprint(seen)",
    ], env_extra={"TF_CPP_MIN_LOG_LEVEL": "0"})
    imported = cells[2]
    assert "absl::InitializeLog" not in imported["stderr"] + imported["stdout"], imported
    assert "cpu_feature_guard" not in imported["stderr"] + imported["stdout"], imported
    assert "tfgpu: at `import tensorflow`: cpus 2: applied (2 logical CPUs)" in imported["stdout"]
    (block,) = [p for p in imported["plain"] if p.startswith("TensorFlow log, cell")]
    assert "info lines folded" in block
    assert cells[3]["stderr"] == "own line 1\nown line 2\n" and cells[3]["stdout"] == "before\nafter\n"
    warned = cells[4]
    assert "careful" not in warned["stderr"], warned
    assert "[warning]" in warned["plain"][0] and "careful: <b>x</b>" in warned["plain"][0]
    assert "&lt;b&gt;x&lt;/b&gt;" in warned["html"][0]
    full = cells[5]["stdout"]
    assert "cpu_feature_guard.cc" in full and "WARNING:tensorflow:From " in full and "careful: <b>x</b>" in full
    assert cells[7]["plain"] == [], cells[7]  # raw: TensorFlow's own handling, no block
    assert cells[8]["stderr"].startswith("UsageError: tfgpu: bad log setting 'bogus'")
    own = cells[10]
    seen = own["stdout"].strip().splitlines()[-1]
    assert "is deprecated" in seen and "again" in seen and "'mine: 42'" in seen, own  # the handler got both
    assert "mine: 42" in own["stderr"] + own["stdout"].replace(seen, ""), own  # printed as TensorFlow prints it
    (folded,) = [p for p in own["plain"] if p.startswith("TensorFlow log, cell")]
    assert "again" in folded and "mine" not in folded, folded



@pytest.mark.tf
def test_harmless_notices_fold_as_information_and_the_strategy_line_stays_visible():
    """Issue 37: oneDNN's and the CPU features' notices at import are folded information, never labelled an error or a
    warning; "Using MirroredStrategy with devices ...", which TensorFlow's distributed training guide tells the reader
    to look for, is shown under its cell (it is an INFO record of tf.distribute's logger, folded before)."""
    cells = run_notebook([
        "%load_ext tfgpu_magic",  # 0
        "import tensorflow as tf",  # 1
        "strategy = tf.distribute.MirroredStrategy()\nprint('replicas', strategy.num_replicas_in_sync)",  # 2
        "%tfgpu log",  # 3
    ], env_extra={"TF_CPP_MIN_LOG_LEVEL": "0"})
    (block,) = [p for p in cells[1]["plain"] if p.startswith("TensorFlow log, cell")]
    assert block.split("\n")[0].endswith("[info]") and "oneDNN" not in block, block
    assert "port.cc" in cells[3]["stdout"] and "cpu_feature_guard.cc" in cells[3]["stdout"]  # kept, in the full log
    made = cells[2]
    (shown,) = [p for p in made["plain"] if p.startswith("TensorFlow log, cell")]
    assert "Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/device:CPU:0',)" in shown, made
    assert "Using MirroredStrategy" not in made["stderr"] and "replicas 1" in made["stdout"], made
