"""``%tfgpu placement WORD``, ``log`` and ``%%tfgpu device`` go through the one router: each placement word's handler
in commands.PLACEMENT_ROUTES, every argument parsed by the word's parser in syntax.parsers(). Each mistake is one
`tfgpu:` line, pinned here word for word, and changes nothing. A real shell, no TensorFlow."""

import re

import pytest
from IPython.core.error import UsageError

from tfgpu_magic.ipython import syntax
from tfgpu_magic.ipython.commands import PLACEMENT_ROUTES, ROUTES

SHOW_VALID = "valid: --device, --op, --cell, --limit, --all"
LOG_VALID = "valid: quiet, all, raw (or nothing, to show the recent cells' full TensorFlow log)"


@pytest.fixture
def placed(shell):
    """The shell with a placement capture (not registered: no hooks to undo but the import hook `on` adds)."""
    from tfgpu_magic.ipython.placement import PlacementController

    shell.tfgpu.placement = PlacementController(shell)
    yield shell
    shell.tfgpu.placement.unregister()
    shell.tfgpu.placement = None


def _state(ip):
    capture = ip.tfgpu.placement
    return capture.mode, capture.tflog.mode, len(capture.log), ip.tfgpu.controller.plan


def test_each_placement_word_has_its_route_and_its_parser():
    assert ROUTES["placement"] is PLACEMENT_ROUTES
    assert tuple(PLACEMENT_ROUTES) == syntax.PLACEMENT_WORDS  # the order the unknown-word message lists them in
    parsers = syntax.parsers()
    assert {f"placement {word}" for word in syntax.PLACEMENT_WORDS} | {"log", "device"} <= set(parsers)
    show = parsers["placement show"]
    assert tuple(o for a in show._actions for o in a.option_strings) == syntax.SHOW_OPTIONS  # what Tab offers


@pytest.mark.parametrize(("line", "message"), [
    ("placement bogus", "tfgpu: unknown placement subcommand 'bogus'; valid: on, off, show, clear, status"),
    ("placement on now", "tfgpu: placement on takes no arguments, got 'now'"),
    ("placement status --json", "tfgpu: placement status takes no arguments, got '--json'"),
    ("placement clear all of it", "tfgpu: placement clear takes no arguments, got 'all of it'"),
    ("placement show --bogus 1", f"tfgpu: unknown option '--bogus' for placement show; {SHOW_VALID}"),
    ("placement show MatMul", f"tfgpu: unknown option 'MatMul' for placement show; {SHOW_VALID}"),
    ("placement show --dev GPU", f"tfgpu: unknown option '--dev' for placement show; {SHOW_VALID}"),  # no prefixes
    ("placement show --op", "tfgpu: placement show --op needs a value"),
    ("placement show --all=yes", "tfgpu: placement show --all takes no value, got '--all=yes'"),
    ("placement show --all --all", "tfgpu: placement show --all given twice; give it once"),
    ("placement show --cell 1 --cell=2", "tfgpu: placement show --cell given twice; give it once"),
    ("placement show --device XPU:1", "tfgpu: bad --device 'XPU:1'; use a device like /CPU:1, /GPU:0, CPU:0 or "
                                      "/job:localhost/replica:0/task:0/device:CPU:0, or CPU / GPU for all of a kind"),
    ("placement show --cell -1", "tfgpu: bad --cell '-1'; use a whole number >= 0"),
    ("placement show --limit 0", "tfgpu: bad --limit '0'; use a whole number >= 1"),
    ("log bogus", f"tfgpu: bad log setting 'bogus'; {LOG_VALID}"),
    ("log all raw", f"tfgpu: bad log setting 'all raw'; {LOG_VALID}"),
    ("log --all", f"tfgpu: bad log setting '--all'; {LOG_VALID}"),
    ("device /GPU:0", "tfgpu: device runs a cell: write `%%tfgpu device /GPU:0` as the cell's first line"),
])
def test_a_mistake_is_one_line_that_changes_nothing(placed, line, message):
    before = _state(placed)
    with pytest.raises(UsageError) as err:
        placed.run_line_magic("tfgpu", line)
    assert str(err.value) == message
    assert _state(placed) == before


@pytest.mark.parametrize(("line", "got"), [("device", "''"), ("device /GPU:0 /CPU:0", "'/GPU:0 /CPU:0'")])
def test_a_device_cell_takes_one_device(placed, line, got):
    with pytest.raises(UsageError) as err:
        placed.run_cell_magic("tfgpu", line, "x = 1")
    assert str(err.value) == f"tfgpu: device takes one device like /GPU:0 or /CPU:1, got {got}"
    assert "x" not in placed.user_ns


def test_the_words_do_what_they_say(placed, capsys):
    placed.run_line_magic("tfgpu", "placement ON")  # a word in any case, as before
    assert capsys.readouterr().out == ("tfgpu: placement capture on; TensorFlow's placement log starts when it is "
                                       "imported.\n")
    assert placed.tfgpu.placement.mode == "on"
    placed.run_line_magic("tfgpu", "placement status")
    status = capsys.readouterr().out
    assert status.startswith("tfgpu: Placement capture is on")
    placed.run_line_magic("tfgpu", "placement")  # no word: status, as `%tfgpu` alone is
    assert capsys.readouterr().out == status
    placed.run_line_magic("tfgpu", "placement show --device GPU --op=MatMul --cell 3 --limit 5")
    assert capsys.readouterr().out.startswith("tfgpu placement ops: 0 matching, 0 records kept")
    placed.run_line_magic("tfgpu", "placement show --all")
    assert capsys.readouterr().out.startswith("tfgpu placement records: 0 matching")
    placed.run_line_magic("tfgpu", "placement clear")
    assert capsys.readouterr().out == "tfgpu: placement records cleared (0 removed).\n"
    placed.run_line_magic("tfgpu", "placement off")
    assert capsys.readouterr().out == "tfgpu: placement capture off.\n"
    assert placed.tfgpu.placement.mode == "off"


def test_log_sets_the_mode_in_any_case_or_shows_the_recent_log(placed, capsys):
    placed.run_line_magic("tfgpu", "log ALL")
    assert capsys.readouterr().out == ("tfgpu: TensorFlow's log: all (every line shown under each cell, in one "
                                       "block); takes effect from the next cell\n")
    assert placed.tfgpu.placement.tflog.mode == "all"
    placed.run_line_magic("tfgpu", "log")
    assert capsys.readouterr().out == placed.tfgpu.placement.tflog.text_of_recent() + "\n"


def test_the_captures_own_command_takes_the_same_route(placed, capsys):
    """The panel's placement control and saved settings hold the capture, not the extension: same words, same
    parsers, same messages."""
    capture = placed.tfgpu.placement
    with pytest.raises(UsageError, match=r"^tfgpu: placement show --op needs a value$"):
        capture.command(["show", "--op"])
    with pytest.raises(UsageError, match=r"^tfgpu: unknown placement subcommand 'bogus'; valid: on, off, show, "):
        capture.command(["bogus"])
    capture.command(["on"])
    assert capture.mode == "on" and "placement capture on" in capsys.readouterr().out


def test_without_a_capture_each_word_says_so(shell):
    for line in ("placement on", "placement show --op MatMul", "log all"):
        with pytest.raises(UsageError) as err:
            shell.run_line_magic("tfgpu", line)
        assert str(err.value).startswith("tfgpu: ") and "not available" in str(err.value)


def test_help_shows_the_words_and_their_usage(shell, capsys):
    shell.run_line_magic("tfgpu", "help placement")
    out = capsys.readouterr().out
    assert out.startswith("%tfgpu placement on|off|show|clear")
    assert all(re.search(rf"\b{word}\b", out) for word in syntax.PLACEMENT_WORDS), out
    shell.run_line_magic("tfgpu", "help log")
    assert "usage: %tfgpu log [quiet|all|raw]" in capsys.readouterr().out
    shell.run_line_magic("tfgpu", "help device")
    assert "usage: %tfgpu device DEVICE" in capsys.readouterr().out
