"""TensorFlow's own log, tamed: recognised line by line, kept per cell, shown as one folded block (on sample lines:
no TensorFlow runs here). In a real kernel with TF_CPP_MIN_LOG_LEVEL unset, as a user has it, no raw line reaches
the cell: tests/kernel/test_tflog_kernel.py."""

from __future__ import annotations

import logging

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


def _tensorflows_record(logger, message: str, root: str) -> logging.LogRecord:
    """A record as TensorFlow's own code logs it: its caller lies in TensorFlow's package."""
    return logger.makeRecord("tensorflow", logging.WARNING, f"{root}python/util/deprecation.py", 1, message, (), None)


def test_tensorflows_own_records_of_a_cell_are_kept_and_every_handler_of_the_user_gets_every_record(
        capsys, monkeypatch, tmp_path):
    from tfgpu_magic.core import tflog

    root = str(tmp_path / "site-packages" / "tensorflow") + "/"
    monkeypatch.setattr(tflog, "_package_roots", lambda: (root,))
    log = TfLog()
    logger = logging.getLogger("tensorflow")
    tensorflows = logging.StreamHandler()  # as tf.get_logger() makes it: stderr, logging's basic format
    tensorflows.setFormatter(logging.Formatter(logging.BASIC_FORMAT, None))
    seen: list[str] = []
    users = logging.Handler()  # a notebook's own handler on tf.get_logger()
    users.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(tensorflows)
    logger.addHandler(users)
    log.watch_python_logger()
    try:
        log.begin(7)
        logger.handle(_tensorflows_record(logger, "inside the cell", root))
        logger.warning("the user's own %s", "line")  # logged by the notebook's code: its own, never folded
        block = log.end()
        logger.handle(_tensorflows_record(logger, "outside any cell", root))
    finally:
        log.unwatch_python_logger()
        logger.removeHandler(tensorflows)
        logger.removeHandler(users)
    assert not tensorflows.filters
    assert [line.text for line in block.lines] == ["WARNING:tensorflow:inside the cell"]
    err = capsys.readouterr().err
    assert "inside the cell" not in err and "outside any cell" in err and "the user's own line" in err
    assert seen == ["inside the cell", "the user's own line", "outside any cell"]
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


HARMLESS = [
    # 2.21: oneDNN's and the CPU features' notices (information already)
    "I0000 00:00:1796338294.188753   31434 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "I0000 00:00:1796338289.541847   31434 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    # 2.15/2.16 CUDA builds: the plugins' double registration, logged as errors at every import (tensorflow#62075)
    "2024-03-05 10:11:12.123456: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register "
    "cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered",
    "2024-03-05 10:11:12.123457: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:607] Unable to register "
    "cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered",
    "2024-03-05 10:11:12.123458: E external/local_xla/xla/stream_executor/cuda/cuda_blas.cc:1515] Unable to register "
    "cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered",
    "2024-03-05 10:11:13.000001: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not "
    "find TensorRT",
]


def test_harmless_notices_are_information_never_an_error():
    """Issue 37: the folded log never labels oneDNN's or the CPU features' notice (or 2.16's CUDA plugin
    registrations) as an error or a warning; a real error beside them keeps its label."""
    lines = [classify(text) for text in HARMLESS]
    assert all(line is not None and line.severity == "I" for line in lines), lines
    block = LogBlock(3, lines=[*lines, classify("E0000 00:00:1.0 1 gpu_device.cc:2341] Cannot dlopen some GPU "
                                                "libraries.")])
    text = block.to_text()
    assert text.startswith("TensorFlow log, cell 3: 1 error, 6 info [error]") and "Cannot dlopen" in text
    assert "oneDNN" not in text and "Unable to register" not in text and "(6 info lines folded" in text
    only = LogBlock(4, lines=lines)
    assert only.to_text().startswith("TensorFlow log, cell 4: 6 info [info]") and only.shown_lines() == []


def test_the_lines_tensorflows_guides_point_at_stay_visible():
    """"Using MirroredStrategy with devices ..." (tf.distribute's INFO record, which the distributed training guide
    tells the reader to look for) is shown under the cell, not folded with the rest of the information."""
    record = logging.LogRecord("tensorflow", logging.INFO, "/x/tensorflow/python/distribute/mirrored_strategy.py", 1,
                               "Using MirroredStrategy with devices %s", (("/job:localhost/replica:0/task:0/device:"
                                                                           "CPU:0",),), None)
    from tfgpu_magic.core.tflog import from_record

    using = from_record(record)
    block = LogBlock(5, lines=[classify(HARMLESS[0]), using])
    assert block.shown_lines() == [using]
    text = block.to_text()
    assert "I tensorflow] Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/device:CPU:0',)" in text
    assert "(1 info line folded" in text and "oneDNN" not in text
    assert "Using MirroredStrategy with devices" in log_block_html(block)
