"""The placement parser, records, ring buffer, de-duplication and summaries: no TensorFlow, no kernel.

The sample lines are real: TensorFlow 2.21 (CPU) run on this project's machines with the CPU split in
three, an eager MatMul under ``tf.device('/CPU:2')``, an eager Mul, and a ``tf.function``
(``reduce_sum(x * x) + 1``). The 2.16 lines use that version's prefix (TF_FACTS.md).
"""

# ruff: noqa: E501  (the sample lines are TensorFlow's own, kept whole)
from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from tfgpu_magic.core.placement import (
    CellRecorder,
    CellSummary,
    DeviceSpec,
    Fallback,
    LineFields,
    PlacementLog,
    PlacementRecord,
    RecordTable,
    devices_in_source,
    find_fallbacks,
    maybe_placement_prefix,
    parse_device,
    parse_line,
    records_from_run_metadata,
    short_device,
)
from tfgpu_magic.ipython.placement import parse_show_options
from tfgpu_magic.render.placement import record_table_html, summary_html

DEV0 = "/job:localhost/replica:0/task:0/device:CPU:0"
DEV2 = "/job:localhost/replica:0/task:0/device:CPU:2"

# TensorFlow 2.21, fd 1 (C printf), eager MatMul on CPU:2 then a tf.function on CPU:0
PRINTF_221 = """\
a: (_Arg): /job:localhost/replica:0/task:0/device:CPU:2
b: (_Arg): /job:localhost/replica:0/task:0/device:CPU:2
MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:2
product_RetVal: (_Retval): /job:localhost/replica:0/task:0/device:CPU:2
x: (_Arg): /job:localhost/replica:0/task:0/device:CPU:0
mul: (Mul): /job:localhost/replica:0/task:0/device:CPU:0
Sum: (Sum): /job:localhost/replica:0/task:0/device:CPU:0
add: (AddV2): /job:localhost/replica:0/task:0/device:CPU:0
Identity: (Identity): /job:localhost/replica:0/task:0/device:CPU:0
identity_RetVal: (_Retval): /job:localhost/replica:0/task:0/device:CPU:0
Const: (Const): /job:localhost/replica:0/task:0/device:CPU:0
add/y: (Const): /job:localhost/replica:0/task:0/device:CPU:0
""".splitlines()

# The same facts on fd 2 (absl log prefix), plus the eager lines TensorFlow logs there outside IPython
LOG_221 = """\
I0000 00:00:1796011003.390667    2910 placer.cc:162] a: (_Arg): /job:localhost/replica:0/task:0/device:CPU:2
I0000 00:00:1796011003.390722    2910 placer.cc:162] b: (_Arg): /job:localhost/replica:0/task:0/device:CPU:2
I0000 00:00:1796011003.390736    2910 placer.cc:162] MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:2
I0000 00:00:1796011003.390742    2910 placer.cc:162] product_RetVal: (_Retval): /job:localhost/replica:0/task:0/device:CPU:2
I0000 00:00:1796011003.391623    2910 execute.cc:1775] Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:2
I0000 00:00:1796011003.487956    2910 placer.cc:162] x: (_Arg): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488020    2910 placer.cc:162] mul: (Mul): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488027    2910 placer.cc:162] Sum: (Sum): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488032    2910 placer.cc:162] add: (AddV2): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488039    2910 placer.cc:162] Identity: (Identity): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488044    2910 placer.cc:162] identity_RetVal: (_Retval): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488050    2910 placer.cc:162] Const: (Const): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.488055    2910 placer.cc:162] add/y: (Const): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1796011003.495080    2910 execute.cc:1775] Executing op __inference_f_13 in device /job:localhost/replica:0/task:0/device:CPU:0
""".splitlines()

# TensorFlow 2.16's prefix (tsl logging)
LOG_216 = """\
2026-11-30 03:29:57.481204: I tensorflow/core/common_runtime/placer.cc:125] input: (_Arg): /job:localhost/replica:0/task:0/device:CPU:0
2026-11-30 03:29:57.481260: I tensorflow/core/common_runtime/placer.cc:125] _EagerConst: (_EagerConst): /job:localhost/replica:0/task:0/device:CPU:0
2026-11-30 03:29:57.481277: I tensorflow/core/common_runtime/placer.cc:125] output_RetVal: (_Retval): /job:localhost/replica:0/task:0/device:CPU:0
2026-11-30 03:29:57.483912: I tensorflow/core/common_runtime/eager/execute.cc:1678] Executing op _EagerConst in device /job:localhost/replica:0/task:0/device:CPU:0
2026-11-30 03:29:57.490127: I tensorflow/core/common_runtime/placer.cc:125] MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:2
2026-11-30 03:29:57.490410: I tensorflow/core/common_runtime/eager/execute.cc:1678] Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:2
""".splitlines()

# What TensorFlow's IPython log listener writes to sys.stdout (one write per line, newline included)
LISTENER_221 = [
    "Executing op _EagerConst in device /job:localhost/replica:0/task:0/device:CPU:0\n",
    "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:2\n",
    "Executing op __inference_f_6 in device /job:localhost/replica:0/task:0/device:CPU:0\n",
]

NOT_PLACEMENT = [
    "",
    "hello",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796010998.212049    2910 cpu_feature_guard.cc:227] This TensorFlow binary is optimized "
    "to use available CPU instructions in performance-critical operations.",
    "tf.Tensor on /job:localhost/replica:0/task:0/device:CPU:0",
    "x: (Mul) /job:localhost/replica:0/task:0/device:CPU:0",  # no colon after the type
    "d /job:localhost/replica:0/task:0/device:CPU:0",
    "Executing op MatMul on device /job:localhost/replica:0/task:0/device:CPU:0",
    "mul: (Mul): /job:localhost/replica:0/task:0/device:CPU:0 and more",
]


def test_printf_lines_221():
    fields = [parse_line(line) for line in PRINTF_221]
    assert all(f is not None and f.channel == "placer" and not f.logged for f in fields)
    assert fields[2] == LineFields("placer", "MatMul", "MatMul", DEV2, False)
    assert fields[5] == LineFields("placer", "mul", "Mul", DEV0, False)
    assert fields[11] == LineFields("placer", "add/y", "Const", DEV0, False)


def test_log_lines_221_graph_and_eager():
    fields = [parse_line(line) for line in LOG_221]
    assert all(f is not None and f.logged for f in fields)
    assert [f.channel for f in fields].count("eager") == 2
    assert fields[2] == LineFields("placer", "MatMul", "MatMul", DEV2, True)
    assert fields[4] == LineFields("eager", "MatMul", "MatMul", DEV2, True)
    assert fields[-1] == LineFields("eager", "__inference_f_13", "__inference_f_13", DEV0, True)
    # the log form carries the same facts as the printf form
    placer = [(f.op, f.op_type, f.device) for f in fields if f.channel == "placer"]
    printf = [(f.op, f.op_type, f.device) for f in map(parse_line, PRINTF_221)]
    assert placer == printf


def test_log_lines_216():
    fields = [parse_line(line) for line in LOG_216]
    assert all(f is not None and f.logged for f in fields)
    assert fields[0] == LineFields("placer", "input", "_Arg", DEV0, True)
    assert fields[3] == LineFields("eager", "_EagerConst", "_EagerConst", DEV0, True)
    assert fields[4] == LineFields("placer", "MatMul", "MatMul", DEV2, True)


def test_listener_lines():
    fields = [parse_line(line.rstrip("\n")) for line in LISTENER_221]
    assert [f.channel for f in fields] == ["eager"] * 3
    assert fields[1] == LineFields("eager", "MatMul", "MatMul", DEV2, False)


@pytest.mark.parametrize("line", NOT_PLACEMENT)
def test_other_lines_are_not_placement(line):
    assert parse_line(line) is None


def test_line_with_carriage_return_or_trailing_space():
    assert parse_line(PRINTF_221[2] + "\r") is not None
    assert parse_line(PRINTF_221[2] + " ") is not None


@pytest.mark.parametrize(
    ("tail", "maybe"),
    [
        (b"MatMul", True),
        (b"MatMul: (Mat", True),
        (b"MatMul: (MatMul): /job:localhost/rep", True),
        (b"I0000 00:00:1796011003.390667    2910 placer.cc:1", True),
        (b"2026-11-30 03:29", True),
        (b"Executing op Mat", True),
        (b"Exec", True),
        (b"Enter a value: ", False),
        (b"progress 50% ", False),
        (b"x" * 5000, False),
    ],
)
def test_partial_line_may_be_placement(tail, maybe):
    assert maybe_placement_prefix(tail) is maybe


# --- devices ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("/CPU:1", DeviceSpec("CPU", 1)),
        ("CPU:0", DeviceSpec("CPU", 0)),
        ("/gpu:0", DeviceSpec("GPU", 0)),
        ("/device:GPU:1", DeviceSpec("GPU", 1)),
        ("/job:localhost/replica:0/task:0/device:CPU:0", DeviceSpec("CPU", 0)),
        ("/job:worker/replica:0/task:3/device:GPU:2", DeviceSpec("GPU", 2)),
        ("/GPU", None),
        ("GPU0", None),
        ("/XPU:0", None),
        ("/CPU:-1", None),
        ("", None),
        ("/CPU:1; import os", None),
    ],
)
def test_parse_device(spec, expected):
    assert parse_device(spec) == expected


def test_short_device():
    assert short_device(DEV2) == "CPU:2"
    assert short_device("CPU:2") == "CPU:2"


def test_devices_in_source():
    src = "with tf.device('/CPU:2'):\n  x = 1\nwith tf.device(\"/GPU:1\"):\n  pass\ndevice = 3\ntf.device(name)\n"
    assert devices_in_source(src) == ["/CPU:2", "/GPU:1"]


# --- records, de-duplication, ring buffer ---------------------------------------------------------------


def record(op="MatMul", op_type="MatMul", device=DEV2, channel="placer", cell=1, requested=None):
    return PlacementRecord(cell, op, op_type, requested, device, channel, 0.0)


def test_record_to_dict_and_short_device():
    r = record()
    assert r.short_device == "CPU:2"
    d = r.to_dict()
    assert d == {"cell": 1, "op": "MatMul", "op_type": "MatMul", "requested": None, "device": DEV2,
                 "channel": "placer", "time": 0.0, "short_device": "CPU:2"}
    with pytest.raises(AttributeError):
        r.op = "x"  # frozen


def test_printf_and_log_copies_make_one_record_each():
    rec = CellRecorder(cell=3)
    # the log copy (fd 2, unbuffered) arrives before the printf copy (fd 1, block-buffered)
    for line in LOG_221:
        rec.add(parse_line(line))
    for line in PRINTF_221:
        rec.add(parse_line(line))
    records = rec.records()
    placer = [r for r in records if r.channel == "placer"]
    assert len(placer) == len(PRINTF_221)
    assert len([r for r in records if r.channel == "eager"]) == 2
    assert {r.cell for r in records} == {3}


def test_each_copy_alone_counts():
    only_printf = CellRecorder()
    for line in PRINTF_221:
        only_printf.add(parse_line(line))
    assert len(only_printf.records()) == len(PRINTF_221)  # TF_CPP_MIN_LOG_LEVEL>=1 hides the log copy


def test_genuine_repeats_are_kept():
    rec = CellRecorder()
    line = PRINTF_221[2]
    logged = LOG_221[2]
    for _ in range(3):  # the same node placed three times (three traces), both copies each time
        rec.add(parse_line(line))
    for _ in range(3):
        rec.add(parse_line(logged))
    assert len(rec.records()) == 3


def test_recorder_sets_cell_and_requested_later():
    rec = CellRecorder(cell=None)
    rec.add(parse_line(PRINTF_221[2]))
    rec.cell, rec.requested = 7, "/CPU:2"
    assert rec.records()[0].cell == 7
    assert rec.records()[0].requested == "/CPU:2"


def test_ring_buffer_bound_and_dropped():
    log = PlacementLog(maxlen=5)
    for i in range(12):
        log.append(record(op=f"op{i}", cell=i))
    assert len(log) == 5
    assert log.dropped == 7
    assert [r.op for r in log.records()] == ["op7", "op8", "op9", "op10", "op11"]
    log.clear()
    assert len(log) == 0 and log.dropped == 0
    with pytest.raises(ValueError):
        PlacementLog(maxlen=0)


def test_log_filters():
    log = PlacementLog()
    log.append(record(op="MatMul", op_type="MatMul", device=DEV2, cell=1))
    log.append(record(op="mul", op_type="Mul", device=DEV0, cell=2))
    log.append(record(op="MatMul", op_type="MatMul", device=DEV0, cell=2, channel="eager"))
    log.append(record(op="x", op_type="Sin", device="/job:localhost/replica:0/task:0/device:GPU:0", cell=3))
    assert len(log.records(device="CPU:2")) == 1
    assert len(log.records(device="/CPU:0")) == 2
    assert len(log.records(device=DEV0)) == 2
    assert len(log.records(device="CPU")) == 3
    assert len(log.records(device="gpu")) == 1
    assert len(log.records(op="matmul")) == 2
    assert len(log.records(op="mul")) == 1  # op name or type
    assert len(log.records(cell=2)) == 2
    assert len(log.records(device="CPU:0", op="MatMul", cell=2)) == 1
    with pytest.raises(ValueError):
        log.records(device="nonsense")


def test_run_metadata_records():
    class Node:
        def __init__(self, name, op, device):
            self.name, self.op, self.device = name, op, device

    class Graph:
        def __init__(self, nodes):
            self.node = nodes

    class FunctionGraph:
        def __init__(self, graphs):
            self.partition_graphs = graphs

    class Metadata:
        function_graphs = (FunctionGraph([Graph([Node("x", "_Arg", DEV0), Node("Sin", "Sin", DEV2),
                                                 Node("y", "NoDevice", "")])]),)

    records = records_from_run_metadata(Metadata(), cell=4, requested="/CPU:2", now=1.0)
    assert [(r.op_type, r.short_device, r.channel, r.cell, r.requested) for r in records] == [
        ("_Arg", "CPU:0", "run_metadata", 4, "/CPU:2"),
        ("Sin", "CPU:2", "run_metadata", 4, "/CPU:2"),
    ]


# --- summaries ---------------------------------------------------------------------------------------------


def test_summary_counts_per_device_and_hides_plumbing():
    rec = CellRecorder(cell=5)
    for line in LOG_221 + PRINTF_221:
        rec.add(parse_line(line))
    summary = CellSummary.from_records(rec.records(), cell=5)
    rows = {(r.device, r.op_type): (r.executed, r.placed) for r in summary.rows}
    assert rows[("CPU:2", "MatMul")] == (1, 1)
    assert rows[("CPU:0", "Mul")] == (0, 1)
    assert rows[("CPU:0", "__inference_f_13")] == (1, 0)
    assert not any(t in ("_Arg", "_Retval") for _, t in rows)
    text = repr(summary)
    assert "cell 5" in text and "MatMul" in text and "CPU:2" in text
    html = summary_html(summary)
    assert "<table>" in html and "MatMul" in html


def test_summary_escapes_html():
    summary = CellSummary.from_records([record(op_type="<script>")], cell=1)
    assert "<script>" not in summary_html(summary)


def test_fallback_for_requested_device():
    records = [record(device=DEV0, channel="eager"), record(op="x", op_type="_Arg", device=DEV0)]
    (fallback,) = find_fallbacks(records, requested="/GPU:1", existing=["CPU:0", "CPU:1"])
    assert fallback == Fallback("/GPU:1", ("CPU:0",), ("MatMul",), "there is no GPU:1")
    assert fallback.text().startswith("fallback: asked /GPU:1, ran on CPU:0")
    summary = CellSummary.from_records(records, 1, "/GPU:1", (fallback,))
    assert "!! fallback: asked /GPU:1, ran on CPU:0" in repr(summary)
    assert "fallback: asked /GPU:1" in summary_html(summary)


def test_no_fallback_when_ops_ran_where_asked():
    assert find_fallbacks([record(device=DEV2)], requested="/CPU:2", existing=["CPU:0", "CPU:2"]) == ()
    assert find_fallbacks([record(device=DEV2)], requested="CPU:2") == ()


def test_missing_requested_device_is_flagged_even_without_records():
    (fallback,) = find_fallbacks([], requested="/CPU:7", existing=["CPU:0"])
    assert "there is no CPU:7" in fallback.text()


def test_fallback_from_source_literal_only_when_missing():
    records = [record(device=DEV0)]
    assert find_fallbacks(records, asked_in_source=["/CPU:0"], existing=["CPU:0"]) == ()
    assert find_fallbacks(records, asked_in_source=["/CPU:7"], existing=None) == ()  # unknown: silent
    (fallback,) = find_fallbacks(records, asked_in_source=["/CPU:7"], existing=["CPU:0"])
    assert fallback.asked == "/CPU:7" and fallback.ran_on == ("CPU:0",)


def test_record_table_rendering():
    table = RecordTable((record(),), matched=3, total=10, dropped=2, maxlen=5)
    text = repr(table)
    assert "showing the last 1 of 3" in text and "2 dropped" in text and "MatMul" in text
    assert "<table>" in record_table_html(table)


# --- show options ---------------------------------------------------------------------------------------


def test_show_options():
    assert parse_show_options([]) == {"device": None, "op": None, "cell": None, "rows": 50, "all": False}
    assert parse_show_options(["--device", "CPU:1", "--op=MatMul", "--cell", "3", "--limit", "5", "--all"]) == {
        "device": "CPU:1", "op": "MatMul", "cell": 3, "rows": 5, "all": True}


def _record(cell, op, op_type, channel, device="/job:localhost/replica:0/task:0/device:CPU:0"):
    from tfgpu_magic.core.placement import PlacementRecord

    return PlacementRecord(cell, op, op_type, None, device, channel, 0.0)


def test_show_leaves_out_tensorflows_internal_records_and_folds_each_op_into_one_row():
    from tfgpu_magic.core.placement import RecordTable, fold_internal

    records = [_record(3, "a", "_Arg", "placer"), _record(3, "MatMul", "MatMul", "eager"),
               _record(3, "MatMul", "_MklMatMul", "placer"), _record(3, "out", "_Retval", "placer"),
               _record(3, "MatMul", "MatMul", "eager"),  # run again
               _record(4, "MatMul", "_MklMatMul", "placer"),
               _record(4, "MatMul", "_MklMatMul", "placer", device="/device:CPU:1")]
    ops, merged, left_out = fold_internal(records)
    assert [(r.cell, r.op_type, r.short_device) for r in ops] == [
        (3, "_MklMatMul", "CPU:0"), (4, "_MklMatMul", "CPU:0"), (4, "_MklMatMul", "CPU:1")]
    assert merged == [("eager+placer", 3), ("placer", 1), ("placer", 1)] and left_out == 2
    table = RecordTable(tuple(ops), len(ops), len(records), 0, 10000, left_out, tuple(merged))
    assert table.HEADER == ("cell", "device", "op type", "op", "channels", "lines", "asked")
    assert table.table_rows()[0] == (3, "CPU:0", "MatMul (oneDNN: _MklMatMul)", "MatMul", "eager+placer", 3, "")
    assert table.heading() == "tfgpu placement ops: 3 matching, 7 records kept, 0 dropped by the ring buffer (size 10000)"
    assert table.footnote() == ("2 of TensorFlow's internal records left out: `%tfgpu placement show --all` lists every "
                                "record")
    assert table.to_text().splitlines()[1] == f"  {table.footnote()}"
    every = RecordTable(tuple(records), 7, 7, 0, 10000)
    assert len(every.table_rows()) == 7 and every.footnote() == "" and every.HEADER[4] == "channel"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus", "1"], "tfgpu: unknown option '--bogus' for placement show; valid: --device, --op, --cell, --limit, "
                           "--all"),
        (["--all=yes"], "tfgpu: placement show --all takes no value, got '--all=yes'"),
        (["--all", "--all"], "tfgpu: placement show --all given twice; give it once"),
        (["--device", "XPU:1"], "tfgpu: bad --device 'XPU:1'; use a device like /CPU:1"),
        (["--cell", "x"], "tfgpu: bad --cell 'x'; use a whole number >= 0"),
        (["--limit", "0"], "tfgpu: bad --limit '0'; use a whole number >= 1"),
        (["--op"], "tfgpu: placement show --op needs a value"),
    ],
)
def test_show_option_errors(argv, message):
    with pytest.raises(UsageError) as info:
        parse_show_options(argv)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_the_eager_record_of_a_onednn_rewrite_folds_into_the_placers_node():
    """As TensorFlow with oneDNN logs one matmul: the placer's node MatMul (type MatMul), the placer's and the eager
    listener's _MklMatMul (named by its type): one row, its channels in one order whichever came first."""
    from tfgpu_magic.core.placement import fold_internal

    records = [_record(6, "MatMul", "MatMul", "placer"), _record(6, "_MklMatMul", "_MklMatMul", "placer"),
               _record(6, "_MklMatMul", "_MklMatMul", "eager")]
    ops, merged, _ = fold_internal(records)
    assert [(r.op, r.op_type) for r in ops] == [("_MklMatMul", "_MklMatMul")] and merged == [("eager+placer", 3)]
    ops, merged, _ = fold_internal(records[::-1])
    assert len(ops) == 1 and merged == [("eager+placer", 3)]


def test_core_imports_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys, threading, tfgpu_magic.core.placement\n"
            "bad = [m for m in ('tensorflow', 'IPython', 'ipywidgets', 'tornado') if m in sys.modules]\n"
            "assert not bad, bad\nassert threading.active_count() == 1\n")
    subprocess.run([sys.executable, "-c", code], check=True)



def test_parse_line_agrees_with_the_one_piece_grammar():
    from tfgpu_magic.core.placement import EAGER_RE, PLACER_RE

    lines = [*PRINTF_221, *LOG_221, *LOG_216, *LISTENER_221, *NOT_PLACEMENT,
             "x y: (Mul): " + DEV0, "] mul: (Mul): " + DEV0, "junk] mul: (Mul): " + DEV0,
             "Identity: (Identity): " + DEV0, "2: (Const): " + DEV0, "I0000 nonsense] mul: (Mul): " + DEV0,
             "Executing op  in device " + DEV0, "Executing op a b in device " + DEV0,
             "prefix Executing op MatMul in device " + DEV0, "mul: (Mul): " + DEV0 + "/extra"]
    for line in lines * 2:  # twice: the second answer comes from the cache
        m = EAGER_RE.match(line) or PLACER_RE.match(line)
        expected = None if m is None else (m["op"], m["device"], m["prefix"] is not None)
        got = parse_line(line)
        assert (None if got is None else (got.op, got.device, got.logged)) == expected, line
