"""Every user mistake is one UsageError that starts with `tfgpu:`, names the bad value and the valid choices, and
changes nothing: no plan change, no environment variable, no TensorFlow import. Its first line keeps within 120
characters and names the bad value; a second line may hold what does not fit (issue 37)."""

import os
import sys

import pytest
from IPython.core.error import UsageError
from message_sweep import one_answer
from messages import problems

CASES = [
    # (setup lines, bad line, text the message must contain)
    ((), "bogus", "'bogus'"),
    ((), "growth maybe", "'maybe'"),
    ((), "growth", "state"),
    ((), "growth on off", "off"),
    ((), "limit 12XB", "'12XB'"),
    ((), "limit 101%", "'101%'"),
    ((), "limit 0", "'0'"),
    ((), "limit 1,5GB", "'1,5GB'"),
    ((), "limit 1GB --gpu 7", "GPU 7 does not exist"),
    ((), "limit 1GB --gpu x", "'x'"),
    ((), "visible 7", "GPU 7 does not exist"),
    ((), "visible 1,1", "'1,1'"),
    ((), "visible one", "'one'"),
    ((), "visible auto:0", "'auto:0'"),
    ((), "visible auto:4", "auto:4"),
    ((), "visible auto --min-free 30GB", "30GiB"),
    ((), "visible 1 --min-free 30GB", "30GiB"),
    ((), "visible all --min-free 1GB", "--min-free goes with auto"),
    ((), "visible 1 --wait 10s", "needs --min-free"),
    ((), "visible auto --wait -1s", "--wait"),
    ((), "visible auto --wait 10 years", "years"),
    ((), "visible auto --wait 1e400s", "'1e400s'"),
    ((), "visible auto --wait 10y", "unknown unit 'y'"),
    ((), "visible auto --wait 30d", "at most 7 days"),
    ((), "visible auto --wait 0", "more than 0 s"),
    ((), "visible auto --wait 1s --wait 2s", "given twice"),
    ((), "visible auto --min-free 10%", "'10%'"),
    ((), "virtual 0x1GB", "'0'"),
    ((), "virtual 2x", "'2x'"),
    ((), "virtual 2xfoo", "'foo'"),
    ((), "virtual 1GB,,2GB", "''"),
    ((), "cpus 0", "'0'"),
    ((), "cpus -2", "'-2'"),
    ((), "cpus two", "'two'"),
    ((), "cpus 3 4", "4"),
    ((), "export --tf2", "--tf2"),
    ((), "memory --peak", "--peak"),
    ((), "status extra", "extra"),
    ((), "reset now", "now"),
    ((), "device /CPU:0", "cell"),
    (("limit 1GB",), "growth on", "limit off"),
    (("growth on",), "limit 1GB", "growth off"),
    (("growth on",), "virtual 2x1GB --gpu 1", "growth off"),
    (("limit 1GB --gpu 1",), "virtual 2x1GB --gpu 1", "limit off"),
    (("virtual 2x1GB",), "limit 1GB --gpu 0", "overlaps"),
]


def _state(ip):
    controller = ip.tfgpu.controller
    return (controller.plan, dict(controller.outcomes), dict(controller.environ), dict(os.environ),
            "tensorflow" in sys.modules, "ipywidgets" in sys.modules)


def test_there_are_at_least_25_distinct_cases():
    assert len({bad for _, bad, _ in CASES}) >= 25


@pytest.mark.parametrize(("setup", "line", "named"), CASES, ids=[c[1] for c in CASES])
def test_bad_input_is_one_usage_error_line_and_changes_nothing(shell, setup, line, named):
    for ok in setup:
        shell.run_line_magic("tfgpu", ok)
    before = _state(shell)
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", line)
    message = str(err.value)
    assert message.startswith("tfgpu:"), message
    assert problems(message) == [], message
    assert message.count("\n") <= 1 and named in message, message
    assert _state(shell) == before


def test_unknown_gpu_names_the_gpus_there_are(shell):
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", "visible 7")
    for name in ("0 (NVIDIA A100-SXM4-40GB)", "1 (NVIDIA L4)", "2 (NVIDIA H100 80GB HBM3)"):
        assert name in str(err.value)


def test_the_shell_shows_one_line_and_no_traceback(shell, capsys):
    result = shell.run_cell("%tfgpu limit 12XB")
    assert isinstance(result.error_in_exec, UsageError)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    assert [line for line in text.splitlines() if line.strip()] == [f"UsageError: {result.error_in_exec}"]


def test_percent_without_nvml_is_refused_with_the_reason(shell):
    import gpu_fakes

    shell.tfgpu.controller._nvml_snapshot = gpu_fakes.no_nvml
    before = _state(shell)
    with pytest.raises(UsageError, match=r"^tfgpu: .*size like 4GB\n  NVML cannot tell it: NVML library not found"):
        shell.run_line_magic("tfgpu", "limit 40%")
    assert _state(shell) == before


@pytest.mark.parametrize("line", ["cpus {n}", "cpus $n", "limit {size}", "visible {__import__('os').getpid()}"])
def test_arguments_are_taken_as_written_never_expanded(shell, line):
    """A first cell written from saved settings runs unseen under papermill: `{expr}` must stay text."""
    shell.user_ns.update(n=2, size="1GB")
    calls: list[str] = []
    shell.user_ns["__import__"] = lambda *a: calls.append("imported")  # were it evaluated, this would be seen
    before = _state(shell)
    result = shell.run_cell(f"%tfgpu {line}")
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    message = str(result.error_in_exec)
    assert message.startswith("tfgpu:") and one_answer(message), message
    assert line.split(" ", 1)[1][:5] in message, message  # the value as written is the one refused
    assert _state(shell) == before and not calls


@pytest.mark.parametrize(("value", "outside", "ended_by"), [
    ("²", 0, "'²'"), ("１", 1, "'１'"), ("٣", 2, "'٣'"), ("0,x,2", 2, "'x'"), ("0,-1,2", 2, "'-1'"),
])
def test_an_odd_cuda_visible_devices_at_start_is_read_as_cuda_reads_it(shell, capsys, value, outside, ended_by):
    """'²' ended `%tfgpu status` and `visible 0` in a bare ValueError; '１' was GPU 1 (CUDA sees no GPU); 'x' or '-1'
    in the middle refused every visible as a UUID no GPU has, where CUDA reads the entries before it."""
    from tfgpu_magic.core.assignment import Assignment

    shell.tfgpu.controller.assignment = Assignment.from_environ({"CUDA_VISIBLE_DEVICES": value})
    shell.run_line_magic("tfgpu", "status")
    out = " ".join(capsys.readouterr().out.split())
    assert f"CUDA stops reading it at {ended_by}" in out, out
    before = _state(shell)
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", f"visible {outside}")
    message = str(err.value)
    assert message.startswith(f"tfgpu: `%tfgpu visible {outside}` refused: GPU {outside} was not given"), message
    assert f"CUDA stops reading it at {ended_by}" in message and one_answer(message), message
    assert _state(shell) == before
