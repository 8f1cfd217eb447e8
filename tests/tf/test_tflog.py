"""TensorFlow's own log, tamed: recognised line by line, kept per cell, shown as one folded block; and in a
real kernel with TF_CPP_MIN_LOG_LEVEL unset, as a user has it, no raw line reaches the cell."""

from __future__ import annotations

import logging

import pytest

from tfgpu_magic.core.tflog import LogBlock, LogLine, TfLog, classify
from tfgpu_magic.render.placement import log_block_html

LINES_221 = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796027613.340116   13837 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1796027613.386389   13837 cpu_feature_guard.cc:227] This TensorFlow binary is optimized",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow.",
    "W0000 00:00:1796027620.100000   13837 loop_optimizer.cc:933] Skipping loop optimization",
    "E0000 00:00:1796027620.200000   13901 some_kernel.cc:12] something failed",
]
LINES_216 = [
    "2026-11-30 03:29:57.481204: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.",
    "2026-11-30 03:29:58.000001: W tensorflow/core/framework/op_kernel.cc:1827] OP_REQUIRES failed",
]
NOT_LOG = ["my own line", "I0000 looks like a prefix but is not", "To enable the following instructions: mine",
           "2026-11-30 user's timestamp: I did it] ok", "", "E" * 200]


def test_cpp_lines_of_221_and_216_are_recognised_with_severity_and_place():
    previous = None
    found = []
    for line in LINES_221:
        previous = classify(line, previous)
        found.append(previous)
    assert [f.severity for f in found] == ["I", "I", "I", "I", "W", "E"]
    assert found[2].where == "cpu_feature_guard.cc:227" and found[3].where == "cpu_feature_guard.cc:227"
    assert [classify(line).severity for line in LINES_216] == ["I", "W"]
    assert classify(LINES_216[0]).where == "port.cc:113"


def test_other_lines_are_not_taken():
    for line in NOT_LOG:
        assert classify(line) is None, line  # a continuation only counts right after a log line


def test_block_folds_information_and_shows_warnings_escaped():
    block = LogBlock(4, [classify(line) for line in LINES_221[:3]])
    block.lines.append(LogLine("W", "WARNING:tensorflow:<b>careful</b>", "<b>careful</b>", "tensorflow"))
    text = block.to_text()
    assert text.splitlines()[0] == "TensorFlow log, cell 4: 1 warning, 3 info [warning]"
    assert "tensorflow] <b>careful</b>" in text and "3 info lines folded" in text and "oneDNN" not in text
    page = log_block_html(block)
    assert "&lt;b&gt;careful&lt;/b&gt;" in page and "<b>careful</b>" not in page
    assert "<details>" in page and "var(--jp-error-color1" in page  # warnings in the views' alert colour
    block.show_all = True
    assert "oneDNN" in block.to_text() and "folded" not in block.to_text()


def test_the_python_logger_is_kept_during_a_cell_only(capsys):
    log = TfLog()
    log.watch_python_logger()
    logger = logging.getLogger("tensorflow")
    handler = logging.StreamHandler()  # like TensorFlow's own, which writes to stderr
    logger.addHandler(handler)
    try:
        log.begin(7)
        logger.warning("inside %s", "the cell")
        block = log.end()
        logger.warning("outside any cell")
    finally:
        logger.removeHandler(handler)
        log.unwatch_python_logger()
    assert [line.text for line in block.lines] == ["WARNING:tensorflow:inside the cell"]
    err = capsys.readouterr().err
    assert "inside the cell" not in err and "outside any cell" in err
    assert "WARNING:tensorflow:inside the cell" in log.text_of_recent()


def test_a_cell_without_log_lines_shows_no_block_and_a_flood_is_bounded():
    log = TfLog()
    log.begin(1)
    assert log.end() is None
    log.begin(2)
    for _ in range(2500):
        assert log.take_line(LINES_221[1])
    block = log.end()
    assert len(block.lines) == 2000 and block.dropped == 500 and "500 more not kept" in block.to_text()


@pytest.mark.kernel
@pytest.mark.tf
def test_in_a_kernel_tensorflows_log_is_one_block_and_the_users_lines_pass():
    from test_placement_kernel import run_notebook

    cells = run_notebook([
        "%load_ext tfgpu_magic",  # 0
        "%tfgpu cpus 2",  # 1
        "import tensorflow as tf",  # 2
        "import os\nprint('before')\nos.write(2, b'own line 1\\n')\nos.write(2, b'own line 2\\n')\nprint('after')",
        "tf.get_logger().warning('careful: %s', '<b>x</b>')",  # 4
        "%tfgpu log",  # 5
        "%tfgpu log raw",  # 6
        "tf.get_logger().warning('raw again')",  # 7
        "%tfgpu log bogus",  # 8
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
    assert "cpu_feature_guard.cc" in full and "WARNING:tensorflow:careful" in full  # absl's notice: 2.16 on
    assert cells[7]["plain"] == [], cells[7]  # raw: TensorFlow's own handling, no block
    assert cells[8]["stderr"].startswith("UsageError: tfgpu: bad log setting 'bogus'")

