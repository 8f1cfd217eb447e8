"""The OOM card's IPython side in a real shell, without TensorFlow: the post_run_cell watch recognises TensorFlow's
error by its classes' names (a stand-in class in TensorFlow's module), shows the bundle once and keeps only data;
``%tfgpu oom`` and ``%tfgpu free`` route, parse and say what they did. The real error in a real kernel:
tests/kernel/test_oom_card_kernel.py."""

from __future__ import annotations

import gc
import sys
import types
import weakref

import pytest
from IPython.core.error import UsageError

from tfgpu_magic.ipython import oom as face

ERRORS = "tensorflow.python.framework.errors_impl"
TEXT = ("OOM when allocating tensor with shape[1099511627776] and type float on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu [Op:Fill]")


@pytest.fixture
def watched(shell, monkeypatch):
    """The shell with the watch registered as load_extension registers it, TensorFlow's errors module standing in
    (a module with a ResourceExhaustedError class; `tensorflow` itself a bare namespace: nothing of it is used)."""
    errors = types.ModuleType(ERRORS)
    errors.ResourceExhaustedError = type("ResourceExhaustedError", (Exception,), {"__module__": ERRORS})
    monkeypatch.setitem(sys.modules, ERRORS, errors)
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(__name__="tensorflow"))
    shown = []
    monkeypatch.setattr(face, "show", shown.append)
    watch = shell.tfgpu.oom_watch = face.OomWatch(shell.tfgpu)
    shell.events.register("post_run_cell", watch.post_run_cell)
    shell.user_ns["ResourceExhaustedError"] = errors.ResourceExhaustedError
    yield shell, watch, shown
    shell.events.unregister("post_run_cell", watch.post_run_cell)


def test_an_oom_shows_one_card_and_keeps_only_its_data(watched):
    shell, watch, shown = watched
    shell.run_cell(f"raise ResourceExhaustedError({TEXT!r})")
    assert len(shown) == 1 and shown[0] is watch.last
    data = watch.last
    assert data["kind"] == "cpu" and data["asked"]["bytes"] == 4398046511104
    assert data["execution_count"] == shell.execution_count  # the failing cell's (run_cell stores no history here)
    assert all(not isinstance(v, BaseException) for v in data.values())
    bundle = face.bundle(data)
    assert set(bundle) == {face.MIME, "text/plain", "text/html"} and bundle[face.MIME] is data


def test_a_wrapped_oom_is_found_and_other_failures_and_successes_show_nothing(watched):
    shell, _, shown = watched
    shell.run_cell(f"try:\n    raise ResourceExhaustedError({TEXT!r})\nexcept Exception as e:\n"
                   "    raise RuntimeError('Exception encountered when calling layer') from None")
    assert len(shown) == 1
    shell.run_cell("raise ValueError('on purpose')")
    shell.run_cell("x = 1")
    assert len(shown) == 1


def test_oom_again_and_none_yet(watched, capsys):
    shell, _, shown = watched
    shell.run_line_magic("tfgpu", "oom")
    assert capsys.readouterr().out.strip() == face.NONE_YET and shown == []
    shell.run_cell(f"raise ResourceExhaustedError({TEXT!r})")
    shell.run_line_magic("tfgpu", "oom")
    assert len(shown) == 2 and shown[1] is shown[0]


def test_a_card_that_cannot_be_made_is_one_line_not_a_traceback(watched, capsys, monkeypatch):
    shell, _, shown = watched
    monkeypatch.setattr(face.OomWatch, "card", lambda self, error, count=None: 1 / 0)
    shell.run_cell(f"raise ResourceExhaustedError({TEXT!r})")
    err = capsys.readouterr().err
    assert "tfgpu: the out-of-memory card could not be made: ZeroDivisionError" in err and shown == []


def test_free_lets_go_of_what_the_failed_frame_holds(shell, capsys):
    shell.run_cell("import weakref\nclass Big:\n    pass\n"
                   "def work():\n    big = Big()\n    global ref\n    ref = weakref.ref(big)\n    raise KeyError('x')\n"
                   "work()")
    gc.collect()
    assert shell.user_ns["ref"]() is not None  # the traceback's frame holds it
    assert shell.last_execution_result.error_in_exec is not None
    capsys.readouterr()
    shell.run_line_magic("tfgpu", "free")
    out = capsys.readouterr().out
    assert shell.user_ns["ref"]() is None, out
    assert out.startswith("tfgpu: free: dropped the last error (KeyError) and cleared ")
    assert not hasattr(sys, "last_value") and not hasattr(sys, "last_traceback")
    assert "host: this process's resident memory" in out  # before and after
    shell.run_line_magic("tfgpu", "free")
    assert capsys.readouterr().out.startswith("tfgpu: free: no error was kept")


def test_free_keras_without_keras_says_so(shell, capsys, monkeypatch):
    monkeypatch.delitem(sys.modules, "keras", raising=False)
    shell.run_line_magic("tfgpu", "free --keras")
    assert "Keras is not loaded: no session to clear" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("line", "message"), [
    ("oom now", "tfgpu: oom: unrecognized arguments: now; usage: %tfgpu oom"),
    ("free --bogus", "tfgpu: free: unrecognized arguments: --bogus; usage: %tfgpu free [--keras]"),
])
def test_bad_arguments_are_one_line(shell, line, message):
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", line)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_weakref_sanity():
    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing)
    del thing
    assert ref() is None
