"""`%tfgpu allocator async|bfc|off`: TensorFlow's GPU allocator through TF_GPU_ALLOCATOR, which TensorFlow reads when
its runtime starts. Before that the setting is the variable (async sets cuda_malloc_async, bfc unsets it, off puts
back what the kernel's environment had); after, a change is refused with the standard too-late line and the
variable is left alone; what is already in force is "unchanged". Every face reads it from the registry. Fast: a
recording stand-in for TensorFlow in a chosen state (real TensorFlow: tests/tf/test_allocator_tf.py)."""

from __future__ import annotations

from types import SimpleNamespace

import gpu_fakes
import pytest
from IPython.core.completer import provisionalcompleter, rectify_completions
from IPython.core.error import UsageError

from tfgpu_magic.core import export, saved, settings
from tfgpu_magic.core.changes import from_keywords
from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.plan import Plan, PlanError
from tfgpu_magic.core.runtime import Probe, Status, TFState
from tfgpu_magic.core.settings.allocator import ALLOCATOR, ALLOCATOR_VAR
from tfgpu_magic.core.settings.base import Change, RefusedError
from tfgpu_magic.ipython import completion, panel
from tfgpu_magic.ipython.panel import Panel

ASYNC = "cuda_malloc_async"
# One line within 120 characters (issue 37): the fix, not the call it would have needed.
TOO_LATE = "tfgpu: `{command}` is too late: TensorFlow's runtime has started; restart the kernel and run it first"


def controller(environ: dict, state: TFState = TFState.NOT_IMPORTED):
    """A controller over a recording TensorFlow in ``state`` (``now["state"]`` moves it) and a private environment."""
    now = {"state": state}
    tf = gpu_fakes.RecordingTF(1)
    ctl = Controller(environ=environ, nvml_snapshot=gpu_fakes.three_gpus, tensorflow=lambda: tf,
                     prober=lambda: Probe(now["state"], "2.21.0"), hooks_import=False)
    return ctl, now, tf


def ask(ctl: Controller, text: str):
    return ctl.change(Change(ALLOCATOR.name, ALLOCATOR.parse(text), command=f"%tfgpu allocator {text}"))


# -- words and parsing ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, value", [("async", "async"), ("bfc", "bfc"), ("off", None), (" ASYNC ", "async")])
def test_the_three_words(text, value):
    assert ALLOCATOR.parse(text) == value


@pytest.mark.parametrize("text", ["fast", "cuda_malloc_async", "", "on"])
def test_a_bad_value_is_one_line_naming_it_and_the_choices(text):
    with pytest.raises(PlanError) as err:
        ALLOCATOR.parse(text)
    message = str(err.value)
    assert message.startswith(f"tfgpu: bad value {text!r} for allocator: expected async") and "\n" not in message
    assert "bfc" in message and message.endswith("or off")


def test_the_magic_refuses_a_bad_value_and_changes_nothing(shell):
    environ = shell.tfgpu.controller.environ
    with pytest.raises(UsageError, match=r"^tfgpu: bad value 'fast' for allocator: expected async \(CUDA's "
                                         r"cuda_malloc_async\), bfc \(TensorFlow's default\) or off$"):
        shell.run_line_magic("tfgpu", "allocator fast")
    assert shell.tfgpu.controller.plan == Plan() and ALLOCATOR_VAR not in environ


# -- before the runtime starts: the variable is the setting -------------------------------------------------------
def test_async_sets_the_variable_bfc_unsets_it_off_puts_back_the_environments():
    environ = {ALLOCATOR_VAR: "memory_guard"}  # the image's
    ctl, _, _ = controller(environ)
    outcome = ask(ctl, "async")
    assert outcome.status is Status.PENDING and environ[ALLOCATOR_VAR] == ASYNC
    assert ctl.settings() == [{"setting": "allocator", "asked": "async", "status": "pending",
                               "detail": "applied when TensorFlow is imported"}]
    ask(ctl, "bfc")
    assert ALLOCATOR_VAR not in environ and ctl.plan.allocator == "bfc"
    ask(ctl, "off")
    assert environ == {ALLOCATOR_VAR: "memory_guard"} and ctl.plan == Plan() and ctl.settings() == []


def test_reset_puts_the_variable_back():
    environ: dict[str, str] = {}
    ctl, _, _ = controller(environ)
    ask(ctl, "async")
    assert ctl.reset() == ["allocator"]
    assert environ == {} and ctl.plan == Plan()


def test_applied_at_import_through_the_variable():
    ctl, now, tf = controller({})
    ask(ctl, "async")
    now["state"] = TFState.IMPORTED
    ctl._on_import(tf)
    outcome = ctl.outcomes["allocator"]
    assert outcome.status is Status.APPLIED and tf.calls == []
    assert outcome.detail == f"{ALLOCATOR_VAR}={ASYNC}; TensorFlow reads it when its runtime starts"
    summary = ctl.import_summary(ctl.plan)  # over 120 characters in one line: a head, then a line per setting
    assert summary.startswith("tfgpu: at `import tensorflow`:\n  allocator async: applied (")


def test_after_import_before_the_start_it_is_applied_then_already_in_force():
    environ: dict[str, str] = {}
    ctl, _, _ = controller(environ, TFState.IMPORTED)
    assert ask(ctl, "async").status is Status.APPLIED and environ == {ALLOCATOR_VAR: ASYNC}
    assert ask(ctl, "async").status is Status.UNCHANGED
    assert ask(ctl, "off").status is Status.APPLIED and environ == {}
    assert ask(ctl, "bfc").status is Status.UNCHANGED  # TensorFlow's default, with the variable unset
    ctl2, _, _ = controller({}, TFState.ENUMERATED)  # devices listed: the variable is read later still
    assert ask(ctl2, "async").status is Status.APPLIED and ctl2.environ == {ALLOCATOR_VAR: ASYNC}


def test_a_cpu_only_build_has_no_gpu_to_apply_it_to_and_the_variable_is_set_all_the_same():
    ctl, now, tf = controller({})
    tf.sysconfig = SimpleNamespace(get_build_info=lambda: {"is_cuda_build": False, "is_rocm_build": False})
    ask(ctl, "async")
    now["state"] = TFState.IMPORTED
    ctl._on_import(tf)
    assert ctl.outcomes["allocator"].status is Status.NO_GPU and ctl.environ == {ALLOCATOR_VAR: ASYNC}
    assert "allocator async: no GPU to apply to" in ctl.import_summary(ctl.plan)  # as growth and limit say it
    outcome = ask(ctl, "bfc")
    assert outcome.status is Status.NO_GPU and ctl.environ == {}
    assert outcome.detail.startswith(f"{ALLOCATOR_VAR} unset; this TensorFlow is a CPU-only build")


# -- after the runtime started: refused when it would change, unchanged when it would not ---------------------
@pytest.mark.parametrize("had, text, need", [
    (None, "async", f"{ALLOCATOR_VAR}={ASYNC}"),
    (ASYNC, "bfc", f"{ALLOCATOR_VAR} unset"),
    ("cuda_malloc", "bfc", f"{ALLOCATOR_VAR} unset"),  # a debugging allocator is not the BFC one
])
def test_a_change_after_the_start_is_too_late_and_leaves_the_variable(had, text, need):
    environ = {} if had is None else {ALLOCATOR_VAR: had}
    ctl, _, tf = controller(dict(environ), TFState.INITIALIZED)
    command = f"%tfgpu allocator {text}"
    with pytest.raises(RefusedError) as err:
        ask(ctl, text)
    assert str(err.value) == TOO_LATE.format(command=command, need=need)
    assert ctl.environ == environ and ctl.plan == Plan() and tf.calls == []
    assert ctl.refused["allocator"].asked == text  # the sidebar and the panel offer the restart


@pytest.mark.parametrize("had, text", [(None, "bfc"), ("whatever", "bfc"), (ASYNC, "async"), (None, "off")])
def test_what_is_in_force_after_the_start_is_unchanged(had, text):
    environ = {} if had is None else {ALLOCATOR_VAR: had}
    ctl, _, _ = controller(dict(environ), TFState.INITIALIZED)
    outcome = ask(ctl, text)
    assert outcome.status is Status.UNCHANGED and outcome.detail.startswith("TensorFlow started with ")
    assert ctl.environ == environ


def test_off_after_the_start_is_refused_where_it_would_go_back_to_another_allocator():
    environ: dict[str, str] = {}
    ctl, now, tf = controller(environ)
    ask(ctl, "async")
    now["state"] = TFState.IMPORTED
    ctl._on_import(tf)
    now["state"] = TFState.INITIALIZED
    with pytest.raises(RefusedError) as err:
        ask(ctl, "off")
    need = f"{ALLOCATOR_VAR} unset"  # the environment had none: back to TensorFlow's BFC, too late now
    assert str(err.value) == TOO_LATE.format(command="%tfgpu allocator off", need=need)
    assert environ == {ALLOCATOR_VAR: ASYNC} and ctl.plan.allocator == "async"
    assert ask(ctl, "async").status is Status.UNCHANGED and "allocator" not in ctl.refused


def test_the_magic_says_too_late_in_one_line(shell):
    ctl, _, _ = controller({}, TFState.INITIALIZED)
    shell.tfgpu.controller = ctl
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", "allocator async")
    assert str(err.value) == TOO_LATE.format(command="%tfgpu allocator async")


# -- with growth and a limit: accepted, and noted -----------------------------------------------------------------
@pytest.mark.parametrize("order", [("growth", "allocator"), ("allocator", "growth")])
def test_growth_with_async_is_accepted_either_way_and_the_views_note_it(order):
    environ: dict[str, str] = {}
    ctl, _, _ = controller(environ)
    changes = {"growth": Change("growth", True, command="%tfgpu growth on"),
               "allocator": Change("allocator", "async", command="%tfgpu allocator async")}
    for name in order:
        assert ctl.change(changes[name]).status is Status.PENDING
    notes = settings.environment_notes(environ)
    assert any(note.startswith(f"{ALLOCATOR_VAR}={ASYNC}") and "growth" in note and "pool" in note for note in notes)


def test_a_limit_with_async_is_accepted():
    ctl, _, _ = controller({})
    ask(ctl, "async")
    assert ctl.change(Change("limit", 1024, 0, "%tfgpu limit 1GB --gpu 0")).status is Status.PENDING


# -- the environment as the kernel had it ---------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    (None, None), (ASYNC, None),
    ("fast", "TF_GPU_ALLOCATOR='fast' is ignored by TensorFlow, which keeps its BFC allocator"),
    ("CUDA_MALLOC_ASYNC", "TF_GPU_ALLOCATOR='CUDA_MALLOC_ASYNC' is ignored by TensorFlow"),  # exact words only
    ("cuda_malloc", "TF_GPU_ALLOCATOR=cuda_malloc: one of TensorFlow's debugging allocators"),
    ("memory_guard", "TF_GPU_ALLOCATOR=memory_guard: one of TensorFlow's debugging allocators"),
])
def test_a_value_that_is_neither_kind_gets_a_note(value, expected):
    notes = ALLOCATOR.notes({} if value is None else {ALLOCATOR_VAR: value})
    if expected is None:
        assert notes == []
    else:
        (note,) = notes
        assert note.startswith(expected) and "\n" not in note and "%tfgpu allocator" in note


def test_a_control_character_in_the_variable_is_never_shown_raw():
    (note,) = ALLOCATOR.notes({ALLOCATOR_VAR: "x\x1b[2Jy"})
    assert "\x1b" not in note


def test_a_preset_async_reads_as_the_notebooks(monkeypatch):
    monkeypatch.setenv(ALLOCATOR_VAR, ASYNC)
    plan, outcome = ALLOCATOR.read_back(None, TFState.INITIALIZED, Plan(), None)
    assert plan.allocator == "async" and outcome.status is Status.NOTEBOOK
    assert outcome.detail.startswith(f"{ALLOCATOR_VAR}={ASYNC}: in the kernel's environment")
    assert ALLOCATOR.read_back(None, TFState.INITIALIZED, Plan(allocator="bfc"), None) is None  # asked: its record
    monkeypatch.setenv(ALLOCATOR_VAR, "fast")
    assert ALLOCATOR.read_back(None, TFState.INITIALIZED, Plan(), None) is None  # TensorFlow's default: nothing
    monkeypatch.delenv(ALLOCATOR_VAR)
    assert ALLOCATOR.read_back(None, TFState.INITIALIZED, Plan(), None) is None


# -- every face reads it from the registry --------------------------------------------------------------------
def test_export_sets_the_variable_before_tensorflow_is_imported():
    for render in (export.render_tf2, export.render_tf1):
        script = render(Plan(allocator="async"))
        assert f'os.environ["{ALLOCATOR_VAR}"] = "{ASYNC}"' in script
        assert script.index(ALLOCATOR_VAR) < script.index("import tensorflow")
        compile(script, "export", "exec")
    script = export.render_tf2(Plan(allocator="bfc"))
    assert f'os.environ.pop("{ALLOCATOR_VAR}", None)' in script
    assert script.index(ALLOCATOR_VAR) < script.index("import tensorflow")
    assert ALLOCATOR_VAR not in export.render_tf2(Plan())


def test_help_tab_and_usage(shell, capsys):
    shell.run_line_magic("tfgpu", "help")
    assert "%tfgpu allocator async|bfc|off" in capsys.readouterr().out
    shell.run_line_magic("tfgpu", "help allocator")
    explained = capsys.readouterr().out
    assert "cuda_malloc_async" in explained and "  %tfgpu allocator async" in explained
    completion.register(shell)
    try:
        with provisionalcompleter():
            code = "%tfgpu allocator "
            offered = [c.text for c in rectify_completions(code, shell.Completer.completions(code, len(code)))]
        assert offered == ["async", "bfc", "off"]
    finally:
        completion.unregister(shell)


def test_the_magic_prints_what_became_of_it_and_status_shows_it(shell, capsys):
    shell.run_line_magic("tfgpu", "allocator async")
    assert capsys.readouterr().out.strip() == ("tfgpu: %tfgpu allocator async: waiting for import (applied when "
                                               "TensorFlow is imported)")
    assert shell.tfgpu.controller.environ[ALLOCATOR_VAR] == ASYNC
    shell.run_line_magic("tfgpu", "status")
    status = capsys.readouterr().out
    assert "allocator  async" in status and f"{ALLOCATOR_VAR}={ASYNC}" in status


def test_configure_the_panel_and_the_saved_settings_take_it(shell):
    [change] = from_keywords(allocator="async")
    assert change == Change("allocator", "async", command="%tfgpu allocator async")
    assert ("allocator", ALLOCATOR.words.control) in panel.controls()
    p = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    try:
        assert p._inputs["allocator"].value == "bfc" and list(p._inputs["allocator"].options) == ["bfc", "async"]
        p.apply("allocator", "async")
        assert shell.tfgpu.controller.plan.allocator == "async"
    finally:
        p.close()
    order = saved.order()
    assert order.index("cpumem") < order.index("allocator") < order.index("growth")  # the registry's order
    assert saved.check({"settings": {"allocator": "async", "growth": "on"}}, shell.tfgpu.controller) == {}
    assert "bad value 'fast' for allocator" in saved.check({"settings": {"allocator": "fast"}},
                                                           shell.tfgpu.controller)["allocator"]
    assert saved.first_cell({"settings": {"growth": "on", "allocator": "async"}}).splitlines()[1:] == [
        "%tfgpu allocator async", "%tfgpu growth on"]
    assert {"name": "allocator", "per_gpu": False, "placeholder": "async|bfc",
            "usage": "%tfgpu allocator async|bfc|off"} in settings.wire_words()
