"""Tab completion and per-subcommand help, through IPython's own completer (the calls ipykernel makes), and
across %load_ext / %unload_ext in a fresh process (no TensorFlow). In a real kernel:
tests/kernel/test_completion_kernel.py."""

from __future__ import annotations

import keyword
import os
import re
import sys
import warnings

import pytest
from harness import SHELL_PRELUDE, run_tf
from IPython.core.completer import provisionalcompleter, rectify_completions
from IPython.core.error import UsageError
from message_sweep import one_answer

from tfgpu_magic.ipython import completion
from tfgpu_magic.ipython.syntax import SUBCOMMANDS

LINE_SUBCOMMANDS = [s for s in SUBCOMMANDS if s != "device"]


@pytest.fixture
def ip(shell, tmp_path, monkeypatch):
    """The shell fixture with the completer registered (load_extension's job, which it does not call),
    in a folder whose file names a file completer would offer."""
    for name in ("growth.txt", "visible_notes.txt", "notes.py"):
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    completion.register(shell)
    yield shell
    completion.unregister(shell)


def texts(ip, code: str, offset: int | None = None) -> list[str]:
    """What JupyterLab would list: ipykernel 7's _experimental_do_complete makes exactly these calls."""
    offset = len(code) if offset is None else offset
    with provisionalcompleter():
        return [c.text for c in rectify_completions(code, ip.Completer.completions(code, offset))]


def ours(ip, code: str) -> list[str]:
    with provisionalcompleter():
        return [c.text for c in ip.Completer.completions(code, len(code))
                if c._origin == "tfgpu_magic.completion"]


@pytest.mark.parametrize(("code", "expected"), [
    ("%tfgpu vi", ["visible", "virtual"]),
    ("%tfgpu VIS", ["visible"]),
    ("%tfgpu de", ["devices"]),  # device alone runs a cell
    ("%%tfgpu d", ["device"]),
    ("%%tfgpu ", ["device"]),
    ("%tfgpu growth ", ["on", "off"]),
    ("%tfgpu growth o", ["on", "off"]),
    ("%tfgpu growth of", ["off"]),
    ("%tfgpu placement ", ["on", "off", "show", "clear", "status"]),
    ("%tfgpu placement show ", ["--device", "--op", "--cell", "--limit", "--all"]),
    ("%tfgpu placement show --op MatMul --", ["--device", "--cell", "--limit", "--all"]),
    ("%tfgpu placement show --device ", ["CPU:0", "GPU:0", "GPU:1", "GPU:2"]),
    ("%tfgpu placement show --device /G", ["/GPU:0", "/GPU:1", "/GPU:2"]),
    ("%tfgpu limit ", ["off", "--gpu"]),
    ("%tfgpu limit 1GB ", ["--gpu"]),
    ("%tfgpu limit 1GB --gpu ", ["0", "1", "2"]),
    ("%tfgpu limit --gpu 1 ", ["off"]),
    ("%tfgpu virtual 2x1GB --gpu ", ["0", "1", "2"]),
    ("%tfgpu virtual ", ["off", "--gpu"]),
    ("%tfgpu visible ", ["all", "none", "auto", "auto:", "0", "1", "2", "--min-free", "--wait"]),
    ("%tfgpu visible a", ["all", "auto", "auto:"]),
    ("%tfgpu visible auto:", ["auto:1", "auto:2", "auto:3"]),
    ("%tfgpu visible 0,", ["0,1", "0,2"]),
    ("%tfgpu visible 0,2,", ["0,2,1"]),
    ("%tfgpu visible auto ", ["--min-free", "--wait"]),
    ("%tfgpu cpus ", ["off", "1", "2", "3", "4", "5", "6", "7", "8"]),
    ("%tfgpu status ", ["--json"]),
    ("%tfgpu devices --", ["--json"]),
    ("%tfgpu memory ", ["--reset"]),
    ("%tfgpu export ", ["--tf1"]),
    ("%tfgpu help ", list(SUBCOMMANDS)),
    ("%tfgpu help li", ["limit"]),
    ("strategy = %tfgpu str", ["strategy"]),
    ("import os\n%tfgpu gr", ["growth"]),
    ("%%tfgpu device ", ["/CPU:0", "/GPU:0", "/GPU:1", "/GPU:2"]),
    ("%%tfgpu device /C", ["/CPU:0"]),
    ("%%tfgpu device C", ["CPU:0"]),
])
def test_completes_through_ipythons_completer(ip, code, expected):
    assert texts(ip, code) == expected


def test_log_words_once_the_log_subcommand_exists(ip):
    if "log" not in SUBCOMMANDS:
        pytest.skip("this tfgpu_magic has no log subcommand")
    from tfgpu_magic.core.tflog import MODES

    assert "log" in texts(ip, "%tfgpu l")
    assert texts(ip, "%tfgpu log ") == list(MODES)


def test_after_tfgpu_only_subcommands_no_keyword_no_file(ip):
    got = texts(ip, "%tfgpu ")
    assert got == LINE_SUBCOMMANDS
    assert not set(got) & set(keyword.kwlist)
    assert not set(got) & set(os.listdir("."))
    assert not set(texts(ip, "%tfgpu growth ")) & {"growth.txt", "and", "if"}


def test_replaces_the_whole_word_even_across_ipythons_delimiters(ip):
    code = "%%tfgpu device /C"
    with provisionalcompleter():
        (only,) = list(rectify_completions(code, ip.Completer.completions(code, len(code))))
    assert (only.start, only.end, only.text) == (len("%%tfgpu device "), len(code), "/CPU:0")


def test_cursor_on_the_first_line_of_a_device_cell(ip):
    code = "%%tfgpu device /G\nx = 1\n"
    assert texts(ip, code, offset=len("%%tfgpu device /G")) == ["/GPU:0", "/GPU:1", "/GPU:2"]


def test_device_names_follow_the_planned_cpus(ip):
    ip.run_line_magic("tfgpu", "cpus 3")
    assert texts(ip, "%%tfgpu device /C") == ["/CPU:0", "/CPU:1", "/CPU:2"]


def test_the_line_based_call_of_older_frontends(ip):
    # ipykernel with use_experimental_completions=False, and terminal frontends of the readline kind.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        assert ip.complete("", "%tfgpu vi", 9) == ("vi", ["visible", "virtual"])
        assert ip.Completer.complete(line_buffer="%%tfgpu device /C", cursor_pos=17) == ("/C", ["/CPU:0"])


@pytest.mark.parametrize("code", [
    "%tfgpu zzz ",
    "%tfgpu zzz",
    "%tfgpu limit --gpu --gpu ",
    "%tfgpu growth on off ",
    "%tfgpu growth --json ",
    "%tfgpu device ",  # a line: device only runs a cell
    "x = %%tfgpu device ",
    # Past the longest line the completer reads, as many items as it reads characters: at 5,000 items IPython's
    # own jedi matcher (not ours, which stops at the length) took 4 to 15 seconds of this test.
    "%tfgpu visible " + "0," * completion.MAX_LINE,
    "%tfgpu " + "z" * 10_000,
    "%tfgpu placement show --device --op ",
    "%tfgpu help bogus ",
])
def test_nonsense_gets_nothing_and_raises_nothing(ip, monkeypatch, code):
    hooked = []
    # IPython reports an exception inside a matcher through sys.excepthook and carries on.
    monkeypatch.setattr(sys, "excepthook", lambda *exc: hooked.append(exc))
    assert ours(ip, "%tfgpu limit 1GB --gpu ") == ["0", "1", "2"]  # the completer is there
    assert ours(ip, code) == []
    assert completion.TfgpuCompleter(ip).complete(code) in (None, (code.split()[-1], []), ("", []))
    assert hooked == []


def test_a_failing_part_gives_no_completion_and_no_traceback(ip, monkeypatch):
    hooked = []
    monkeypatch.setattr(sys, "excepthook", lambda *exc: hooked.append(exc))
    assert ours(ip, "%tfgpu limit 1GB --gpu ") == ["0", "1", "2"]
    monkeypatch.setattr(completion, "GPU_CACHE_S", 0)
    monkeypatch.setattr(ip.tfgpu.controller, "nvml", lambda: 1 / 0)
    assert ours(ip, "%tfgpu limit 1GB --gpu ") == []
    assert hooked == []


def test_nvml_is_read_at_most_every_few_seconds(ip, monkeypatch):
    calls = []
    nvml = ip.tfgpu.controller.nvml
    monkeypatch.setattr(ip.tfgpu.controller, "nvml", lambda: calls.append(1) or nvml())
    for _ in range(5):
        assert texts(ip, "%tfgpu limit 1GB --gpu ") == ["0", "1", "2"]
    assert len(calls) == 1


def test_other_lines_are_left_to_ipython(ip):
    assert ours(ip, "%tfgpu gr") == ["growth"]
    assert "import" in texts(ip, "imp")
    assert "%tfgpu" in texts(ip, "%tfg")
    assert ours(ip, "tfgpu = 1; tfgpu") == []


# -- help ------------------------------------------------------------------------------------------
def test_help_for_one_subcommand(ip, capsys):
    ip.run_line_magic("tfgpu", "help visible")
    out = capsys.readouterr().out
    assert out.startswith("%tfgpu visible SPEC [--min-free SIZE] [--wait TIME]")
    assert "--min-free" in out and "examples:" in out and "%tfgpu visible auto:2 --min-free 10GB" in out
    assert "%tfgpu growth" not in out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(ip, capsys, name):
    ip.run_line_magic("tfgpu", f"help {name}")
    out = capsys.readouterr().out
    assert re.search(rf"%%?tfgpu \[?{name}\b", out.splitlines()[0]) and "examples:" in out


def test_help_alone_is_the_table(ip, capsys):
    ip.run_line_magic("tfgpu", "help")
    assert "%tfgpu help [SUBCOMMAND]" in capsys.readouterr().out


def test_help_for_an_unknown_subcommand_is_one_usage_line(ip):
    with pytest.raises(UsageError) as err:
        ip.run_line_magic("tfgpu", "help bogus")
    message = str(err.value)
    assert message.startswith("tfgpu: ") and one_answer(message)
    assert "'bogus'" in message and "visible" in message and "placement" in message


def test_question_mark_after_a_subcommand_is_its_help(ip, capsys):
    ip.run_cell("%tfgpu visible?")
    out = capsys.readouterr().out
    assert out.startswith("%tfgpu visible SPEC") and "Object `visible` not found" not in out


def test_magic_help_has_no_stray_rst_marker(ip, capsys):
    ip.run_line_magic("pinfo", "%tfgpu")
    out = capsys.readouterr().out
    assert "%tfgpu limit SIZE|off [--gpu I]" in out
    assert "::" not in [line.strip() for line in out.splitlines()]


# -- the extension's life --------------------------------------------------------------------------
def test_load_ext_registers_and_unload_ext_removes_everything():
    proc = run_tf(SHELL_PRELUDE + """
from IPython.core.completer import provisionalcompleter
def texts(code):
    with provisionalcompleter():
        return [c.text for c in ip.Completer.completions(code, len(code))]
matchers, transformers = list(ip.Completer.custom_matchers), list(ip.input_transformers_cleanup)
assert "tfgpu_magic.core.control" not in sys.modules  # the completer's registration imports no core
assert texts("%tfgpu vi") == ["visible", "virtual"], texts("%tfgpu vi")
assert "tensorflow" not in sys.modules
cell("%tfgpu growth?")
ip.run_line_magic("unload_ext", "tfgpu_magic")
assert "visible" not in texts("%tfgpu vi")
assert not [m for m in ip.Completer.custom_matchers if "tfgpu" in getattr(m, "matcher_identifier", "")]
assert len(ip.Completer.custom_matchers) == len(matchers) - 1
assert len(ip.input_transformers_cleanup) == len(transformers) - 1
assert ip.transform_cell("%tfgpu growth?") != "get_ipython().run_line_magic('tfgpu', 'help growth')\\n"
ip.run_line_magic("load_ext", "tfgpu_magic")
assert texts("%tfgpu gr") == ["growth"]
print("OK")
""")
    assert "%tfgpu growth on|off" in proc.stdout  # the help cell
    assert proc.stdout.strip().endswith("OK")
