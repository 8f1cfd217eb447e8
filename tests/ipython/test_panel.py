"""The live panel without a browser: its widget tree over a real IPython shell (in-memory NVML), its controls
(the magic's own subcommands and messages), its faults and its threads (a scripted session with the fake NVML
library and real TensorFlow is tests/tf/test_panel_tf.py). What a front end would get is read from the widgets'
state."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace

import gpu_fakes
import ipywidgets
import pytest
from IPython.core.error import UsageError
from message_sweep import one_answer

from tfgpu_magic.core import words
from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.live import LiveModel
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot, Unavailable
from tfgpu_magic.core.runtime import Probe, TFState
from tfgpu_magic.ipython.panel import Panel, close_all

EVIL = "<img src=x onerror=alert(1)>"


def walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def html_values(panel: Panel) -> list[str]:
    return [w.value for w in walk(panel) if isinstance(w, ipywidgets.HTML)]


def text_of(panel: Panel) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", " ".join(html_values(panel))).replace("&#x27;", "'").split())


def live_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tfgpu-live"]


@pytest.fixture
def panel(shell):
    p = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    yield p
    p.close()


def make_panel(snapshot_fn, environ=None) -> tuple[Panel, Controller]:
    controller = Controller(environ={} if environ is None else environ, nvml_snapshot=snapshot_fn)
    return Panel(model=LiveModel(controller), magics=None), controller


# -- the tree -------------------------------------------------------------------------------
def test_the_panel_shows_gpus_both_numberings_and_settings(shell, panel):
    shell.tfgpu.controller.installed_cpu_only = lambda: False  # a CUDA build beside the GPUs: it will name them
    panel.apply("visible", "2")
    text = text_of(panel)
    assert "GPU 2 · NVIDIA H100 80GB HBM3 (TensorFlow GPU:0)" in text
    assert "GPU:0 = physical GPU 2" in text
    assert "30,000 / 40,960 MiB used (73%)" in text
    assert f"visible 2 {words.setting_state('pending')}" in text  # "waiting for import", the vocabulary's words
    assert "allocator figures appear once its runtime starts" in text  # TensorFlow not imported here
    tabs = next(w for w in walk(panel) if isinstance(w, ipywidgets.Tab))
    assert list(tabs.titles) == ["Memory", "Devices", "Cells", "Placement", "Settings"]


def test_mig_devices_show_under_their_gpu_and_gpus_not_given_say_so():
    """A MIG-mode A100 (three MIG devices) and an L4, in a kernel started with only GPU 1 (the L4)."""
    from tfgpu_magic.core.assignment import Assignment

    controller = Controller(environ={}, nvml_snapshot=gpu_fakes.mig_gpus,
                            assignment=Assignment.from_environ({"CUDA_VISIBLE_DEVICES": "1"}))
    panel = Panel(model=LiveModel(controller), magics=None)
    try:
        text = text_of(panel)
    finally:
        panel.close()
    for slot, profile in enumerate(("3g.20gb", "2g.10gb", "1g.5gb")):
        assert f"GPU 0/{slot} · MIG {profile} {gpu_fakes.MIG_UUIDS[slot]}" in text, text
    assert "1,024 / 19,968 MiB used (5%)" in text  # slot 0's memory, not the parent's
    assert text.count("not reported per MIG device") == 3
    gpu0 = text[text.index("GPU 0 · "):text.index("GPU 0/0")]
    assert "not given to this kernel" in gpu0
    assert text[text.index("GPU 0/0"):text.index("GPU 1 · ")].count("not given to this kernel") == 3
    assert "not given to this kernel" not in text[text.index("GPU 1 · "):]


def test_a_gpu_whose_mig_device_was_given_says_which():
    from tfgpu_magic.core.assignment import Assignment

    given = f"1,{gpu_fakes.MIG_UUIDS[1]}"
    controller = Controller(environ={}, nvml_snapshot=gpu_fakes.mig_gpus,
                            assignment=Assignment.from_environ({"CUDA_VISIBLE_DEVICES": given}))
    panel = Panel(model=LiveModel(controller), magics=None)
    try:
        text = text_of(panel)
    finally:
        panel.close()
    assert "only its MIG device 0/1 is given to this kernel" in text
    assert text[text.index("GPU 0/1"):text.index("GPU 0/2")].count("not given") == 0
    assert text[text.index("GPU 0/2"):text.index("GPU 1 · ")].count("not given to this kernel") == 1


def test_terminal_ipython_prints_the_status_instead(shell, capsys):
    shell.run_line_magic("tfgpu", "panel")
    out = capsys.readouterr().out
    assert "TensorFlow" in out and "needs a notebook front end" in out


# -- controls: the magic's own path -------------------------------------------------------------------------------
def test_a_control_runs_the_magic_and_says_what_became_of_it(shell, panel):
    said = panel.apply("cpus", "3")
    assert said == "tfgpu: %tfgpu cpus 3: waiting for import (applied when TensorFlow is imported)"
    assert shell.tfgpu.controller.plan.cpus == 3
    assert f"cpus 3 {words.setting_state('pending')}" in text_of(panel)


def test_several_per_gpu_limits_as_the_input_shows_them_apply_again_unchanged(shell, panel):
    panel.apply("limit", "4GB --gpu 0")
    panel.apply("limit", "2GB --gpu 1")
    shown = panel._inputs["limit"].value
    assert shown == "4GiB --gpu 0; 2GiB --gpu 1", shown  # the values in force, one per GPU
    before = shell.tfgpu.controller.plan
    said = panel.apply("limit")  # Apply on the input as it is
    # Each entry its own change, as the magic takes them ("--gpu given twice" before).
    assert said.count("tfgpu: %tfgpu limit") == 2 and "given twice" not in said, said
    assert shell.tfgpu.controller.plan == before
    assert panel.apply("limit", "").startswith("tfgpu: limit: missing")  # the magic's


@pytest.mark.parametrize("name, value", [
    ("limit", "1000GB"), ("cpus", "0"), ("cpus", "9" * 5000), ("visible", "7"), ("limit", "40% --gpu 9"),
    ("visible", ""), ("growth", "maybe"), ("cpumem", "sometimes"), ("virtual", "2x"),
])
def test_a_refused_value_gets_the_magics_message_and_changes_nothing(shell, panel, name, value):
    before = (shell.tfgpu.controller.plan, dict(shell.tfgpu.controller.environ))
    with pytest.raises(UsageError) as magic:
        shell.run_line_magic("tfgpu", f"{name} {value}")
    said = panel.apply(name, value) if name in panel._inputs else None
    if said is None:  # no control for it: the panel's path is the same function
        from tfgpu_magic.ipython.commands import dispatch
        with pytest.raises(UsageError):
            dispatch(shell.tfgpu, f"{name} {value}", None)
        return
    assert said == str(magic.value) and said.startswith("tfgpu:") and one_answer(said)
    assert "&#9888;" in panel._html["message"].value  # shown as a refusal
    assert (shell.tfgpu.controller.plan, dict(shell.tfgpu.controller.environ)) == before


def test_placement_control_needs_the_extension(shell):
    p = Panel(model=LiveModel(shell.tfgpu.controller), magics=None)
    try:
        assert p._inputs["placement"].disabled and "load_ext" in p._html["notice"].value
        assert not p._inputs["cpus"].disabled
    finally:
        p.close()


# -- the Settings tab: a form of the values in force ------------------------------------------------------------
@pytest.fixture
def tf_now(shell, monkeypatch):
    """The shell's ``%tfgpu`` on a controller whose TensorFlow (a recording stand-in over the three fake GPUs) is in
    the state this dict holds: ``tf_now["state"] = TFState.INITIALIZED`` starts its runtime."""
    import tfgpu_magic.core.snapshot as snapshot
    from tfgpu_magic.ipython.magics import TfgpuMagics

    now = {"state": TFState.NOT_IMPORTED}
    tf = gpu_fakes.RecordingTF(3)

    def prober():
        tf.initialized = now["state"] >= TFState.INITIALIZED
        return Probe(now["state"], "2.99")

    monkeypatch.setattr(snapshot, "probe", prober)
    controller = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus, tensorflow=lambda: tf, prober=prober)
    magics = TfgpuMagics(shell=shell, controller=controller)
    shell.register_magics(magics)
    shell.tfgpu = magics
    yield now
    controller.unhook()


def values(panel: Panel) -> dict[str, str]:
    return {name: control.value for name, control in panel._inputs.items()}


def in_force_text(panel: Panel, name: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", panel._states[name].value).replace("&#x27;", "'").split())


def message(panel: Panel) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", panel._html["message"].value)).split())


def test_before_any_setting_every_input_shows_the_value_in_force(shell, panel):
    assert values(panel) == {"visible": "all", "growth": "off", "limit": "off", "cpus": "off", "cpumem": "off",
                             "allocator": "bfc", "placement": "off"}
    assert in_force_text(panel, "visible") == "not asked: every GPU this kernel was given"
    assert in_force_text(panel, "growth") == "not asked: TensorFlow's default"
    assert "runtime has started" not in panel._html["notice"].value  # TensorFlow fixed nothing yet


def test_a_setting_made_by_the_magic_shows_in_the_form(shell, tf_now):
    panel = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    try:
        shell.run_line_magic("tfgpu", "growth on")
        shell.run_line_magic("tfgpu", "cpus 3")
        panel.model.refresh()
        assert values(panel)["growth"] == "on" and values(panel)["cpus"] == "3"
        assert in_force_text(panel, "growth") == words.setting_state("pending")  # "waiting for import"
    finally:
        panel.close()


def test_an_environment_variable_that_decides_a_setting_is_its_value_in_force():
    p, _ = make_panel(gpu_fakes.three_gpus, environ={"TF_FORCE_GPU_ALLOW_GROWTH": "true"})
    try:
        assert values(p)["growth"] == "on" and in_force_text(p, "growth") == "not asked: TF_FORCE_GPU_ALLOW_GROWTH=true"
    finally:
        p.close()


def test_after_tensorflow_starts_a_refused_value_never_stays_in_its_input(shell, tf_now):
    panel = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    try:
        panel.apply("cpus", "2")  # before the start: waits for import
        tf_now["state"] = TFState.INITIALIZED
        panel.model.refresh()
        panel._inputs["limit"].value = "40%"  # typed, then Apply: too late
        said = panel.apply("limit")
        assert "is too late" in said and "&#9888;" in panel._html["message"].value
        assert values(panel)["limit"] == "off"  # the value in force, not the refused 40%
        assert f"40% {words.setting_state('refused')}: too late" in in_force_text(panel, "limit")
        assert values(panel)["cpus"] == "2"
        # Every input TensorFlow fixed is disabled, and still shows its value in force.
        fixed = [n for n, c in panel._inputs.items() if c.disabled and n != "placement"]  # no capture here
        assert fixed == ["visible", "cpus", "cpumem", "allocator", "growth", "limit"]  # the registry's order
        assert panel._restart.layout.display == "" and panel._restart.button_style == "danger"
    finally:
        panel.close()


def test_the_reason_inputs_are_disabled_is_said_once_for_the_whole_tab(shell, tf_now):
    tf_now["state"] = TFState.INITIALIZED
    panel = Panel(model=shell.tfgpu.live, magics=None)  # no placement capture: a second reason
    try:
        text = text_of(panel)
        assert text.count("TensorFlow's runtime has started") == 1, text
        assert panel._html["notice"].value.count("load_ext tfgpu_magic") == 1
        assert ("visible GPUs, logical CPUs, CPU figures, GPU allocator, memory growth and memory limit are "
                "fixed") in text
        assert all("runtime has started" not in s.value for s in panel._states.values())
    finally:
        panel.close()


def test_the_message_of_one_action_is_cleared_by_the_next(shell, panel):
    panel.apply("cpus", "0")  # refused: a warning
    assert "&#9888;" in panel._html["message"].value
    panel._inputs["cpus"].value = "4"  # the user edits: the warning is stale
    assert panel._html["message"].value == ""
    panel.apply("cpus")
    assert message(panel) == f"tfgpu: %tfgpu cpus 4: {words.setting_state('pending')} (applied when TensorFlow is " \
                             "imported)"
    assert values(panel)["cpus"] == "4"
    panel.restart_and_apply()  # another action: its own message only
    assert message(panel).startswith("tfgpu: no GPUs sidebar") and "cpus 4: waiting" not in message(panel)
    panel.apply("growth", "maybe")
    assert message(panel).startswith("⚠ tfgpu:") and "sidebar" not in message(panel)


def test_the_form_is_one_grid_with_a_label_column_that_never_cuts_a_label(panel):
    grid = next(w for w in walk(panel) if isinstance(w, ipywidgets.GridBox))
    columns = grid.layout.grid_template_columns.split(" ")
    assert columns[0] == "max-content", columns  # as wide as the longest label
    labels = [w for w in grid.children if isinstance(w, ipywidgets.Label)]
    assert [w.value for w in labels] == ["visible GPUs", "logical CPUs", "CPU figures", "GPU allocator",
                                         "memory growth", "memory limit", "placement log"]
    assert all(w.layout.overflow == "initial" and w.layout.width == "auto" for w in labels)  # initial: visible
    assert len(grid.children) == 6 * len(labels)  # per setting: label, input, Apply; under the input its state
    assert all(s.layout.grid_area == "auto / 2 / auto / span 1" for s in panel._states.values())
    assert all(c.layout.width == "100%" for c in panel._inputs.values())  # the column's width, not their own


def test_the_restart_button_is_the_destructive_red(panel):
    assert panel._restart.button_style == "danger"
    assert panel._restart.description == "Restart kernel and apply"


# -- text from outside is text -------------------------------------------------------------------------------
def test_names_from_outside_are_shown_as_text():
    evil = NvmlSnapshot(available=True, driver_version=EVIL, cuda_driver_version="12.4", gpus=(
        replace(gpu_fakes.gpu(0, EVIL, 1000, 500), processes=(GpuProcess(4242, 400, EVIL, EVIL),)),))
    p, _ = make_panel(lambda: evil)
    try:
        values = "".join(html_values(p))
        assert "<img" not in values and "&lt;img src=x onerror=alert(1)&gt;" in values
    finally:
        p.close()


# -- faults -------------------------------------------------------------------------------
def lost_gpu() -> NvmlSnapshot:
    lost = replace(gpu_fakes.gpu(1, "NVIDIA L4", 23034, 1000), error=Unavailable("gpu_is_lost", "GPU is lost"))
    return replace(gpu_fakes.three_gpus(), gpus=(gpu_fakes.three_gpus().gpus[0], lost))


@pytest.mark.parametrize("snapshot_fn, says", [
    (gpu_fakes.no_nvml, "NVML is unavailable (NVML library not found)"),
    (lambda: NvmlSnapshot(available=True, driver_version="550", cuda_driver_version="12.4", gpus=()),
     "No GPU: NVML lists none"),
    (lost_gpu, "Unavailable: GPU is lost"),
])
def test_faults_build_a_panel_that_says_why(snapshot_fn, says, capsys):
    p, _ = make_panel(snapshot_fn)
    try:
        assert says in text_of(p)
        assert p.model.errors == 0
    finally:
        p.close()
    assert capsys.readouterr() == ("", "")


def test_a_gpu_lost_mid_run_is_said_and_the_rest_still_shows(capsys):
    lost = {"now": False}
    p, _ = make_panel(lambda: lost_gpu() if lost["now"] else gpu_fakes.three_gpus())
    try:
        assert "GPU 1 · NVIDIA L4" in text_of(p) and "Unavailable" not in text_of(p)
        lost["now"] = True
        p.model.refresh(read_nvml=True)
        assert "Unavailable: GPU is lost" in text_of(p) and "30,000 / 40,960 MiB used" in text_of(p)
    finally:
        p.close()
    assert capsys.readouterr() == ("", "")


def test_a_process_that_exits_with_a_panel_open_stops_its_refresher_cleanly():
    code = ("from tfgpu_magic import Panel\nimport threading\np = Panel()\n"
            "print([t.name for t in threading.enumerate()])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "tfgpu-live" in proc.stdout, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr


def test_tensorflow_not_installed_is_said(monkeypatch):
    import tfgpu_magic.core.snapshot as state

    monkeypatch.setattr(state, "probe", lambda: Probe(TFState.NOT_INSTALLED))
    p, _ = make_panel(gpu_fakes.three_gpus)
    try:
        assert "TensorFlow: not installed" in text_of(p) and "pip install" in text_of(p)
    finally:
        p.close()


def test_a_failing_refresh_is_shown_and_the_refresher_goes_on(capsys):
    calls = []

    def broken(controller, **kw):
        calls.append(1)
        raise OSError("NVML went away")

    model = LiveModel(Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus), interval=0.1, take=broken)
    p = Panel(model=model)
    try:
        deadline = time.monotonic() + 10
        while model.errors < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert model.errors >= 3 and model.running
        error = p._html["error"].value
        assert "OSError: NVML went away" in error and "keeps refreshing" in error
    finally:
        p.close()
    assert not live_threads()
    assert capsys.readouterr() == ("", "")  # never into the user's cell


# -- only what changed is sent -------------------------------------------------------------------------------
def test_a_refresh_with_nothing_changed_sends_nothing_and_a_change_sends_only_its_widgets(monkeypatch):
    figures = {"used": 30000}

    def snap():
        base = gpu_fakes.three_gpus()
        first = replace(base.gpus[0], memory_used_mib=figures["used"], memory_free_mib=40960 - figures["used"])
        return replace(base, gpus=(first, *base.gpus[1:]))

    model = LiveModel(Controller(environ={}, nvml_snapshot=snap), interval=3600)
    p = Panel(model=model)
    sent = []
    monkeypatch.setattr(ipywidgets.Widget, "_send", lambda self, msg, buffers=None: sent.append((self, msg)))
    try:
        for _ in range(5):
            assert model.refresh(read_nvml=True) == {}
        assert sent == []
        figures["used"] = 31000
        changes = model.refresh(read_nvml=True)
        assert set(changes) == {"gpus", "history"}
        updated = {w.model_id for w, _ in sent}
        assert updated == {p._html["memory"].model_id, p._html["chart"].model_id}
        assert "31,000 / 40,960" in p._html["memory"].value
    finally:
        p.close()


# -- threads -------------------------------------------------------------------------------
def test_one_refresher_for_every_panel_stopped_by_close_and_unload(shell):
    from tfgpu_magic.ipython.context import LOADED
    from tfgpu_magic.ipython.magics import load_extension, unload_extension

    load_extension(shell)
    try:
        magics = LOADED[id(shell)]
        first, second = Panel(), Panel()
        assert first.model is second.model is magics.live
        assert len(live_threads()) == 1
        first.close()
        assert len(live_threads()) == 1  # the other panel still looks
        second.close()
        assert live_threads() == [] and not magics.live.running
        third = Panel()
        assert len(live_threads()) == 1
    finally:
        unload_extension(shell)
    assert live_threads() == [] and third.closed


def test_refresh_interval_is_an_option(shell, capsys):
    shell.run_line_magic("config", "TfgpuMagics.refresh_interval = 2.0")
    assert shell.tfgpu.live.interval == 2.0
    shell.run_line_magic("config", "TfgpuMagics.refresh_interval = 0")
    # One line per magics object this test process has made (they share the shell's config): the same line.
    (line,) = set(capsys.readouterr().err.splitlines())
    assert line.startswith("tfgpu: bad refresh interval 0: expected seconds, from 0.1 to 3600")
    assert shell.tfgpu.live.interval == 2.0 and shell.tfgpu.refresh_interval == 2.0


def test_closing_a_panel_closes_every_widget_it_made(shell):
    p = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    made = list(walk(p))
    p.close()
    assert [w for w in made if w.comm is not None] == []


def test_panel_close_command(shell, capsys):
    p = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    shell.tfgpu._panel = p
    shell.run_line_magic("tfgpu", "panel --close")
    assert p.closed and live_threads() == []
    assert "closed 1 panel(s)" in capsys.readouterr().out
    with pytest.raises(UsageError, match="panel takes nothing or --close"):
        shell.run_line_magic("tfgpu", "panel now")
    close_all()


# -- the markup itself ------------------------------------------------------------------------------------------
KNOWN_ATTRIBUTES = {"style", "class", "role", "aria-label", "colspan", "width", "height", "viewbox", "d",
                    "stroke-width", "stroke-dasharray", "stroke-linejoin", "x", "y", "x1", "y1", "x2", "y2",
                    "text-anchor"}


def test_every_view_is_well_formed_markup_with_known_attributes():
    """A quote inside a style (the font list has 'Segoe UI') once ended an attribute early: the SVG's colour and
    size were dropped, dark text on the dark theme. Any such break shows up as an attribute nobody wrote."""
    from html.parser import HTMLParser

    from tfgpu_magic.render.live_html import chart_html

    seen = []

    class Attributes(HTMLParser):
        def handle_starttag(self, tag, attrs):
            seen.extend((tag, name, value) for name, value in attrs)

    history = [{"t": 1000.0 + k, "gpus": {"0": {"used": 100 * k, "total": 4000, "kernel": 50, "util": 10 * k}},
                "tf": {"CPU:0": 4.0 * k}} for k in range(5)]
    p, _ = make_panel(gpu_fakes.three_gpus)
    try:
        for markup in [*html_values(p), chart_html(history)]:
            Attributes().feed(markup)
    finally:
        p.close()
    assert {name for _, name, _ in seen} <= KNOWN_ATTRIBUTES, {name for _, name, _ in seen} - KNOWN_ATTRIBUTES
    svg_styles = [value for tag, name, value in seen if tag == "svg" and name == "style"]
    assert len(svg_styles) == 3 and all("font-size:10px" in s and "fill:" in s for s in svg_styles), svg_styles


def test_a_panel_that_cannot_be_drawn_says_what_it_was_and_what_to_run(shell):
    """The display bundle's text and HTML are what a saved copy, an nbconvert export or GitHub show once the kernel
    that had the panel's widgets is gone: not 'VBox(children=...)'."""
    panel = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    try:
        bundle = panel._repr_mimebundle_()
    finally:
        panel.close()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == Panel.DEAD_TEXT
    assert "the kernel it belonged to has restarted" in bundle["text/plain"] and "VBox" not in bundle["text/plain"]
    assert "<code>%tfgpu panel</code>" in bundle["text/html"]


# -- the charts: steps, time ticks, every series visible -------------------------------------------------------
def history_of(used: list[int | None], kernel: list[int | None] | None = None, start: float = 1_700_000_000.0,
               every: float = 5.0) -> list[dict]:
    kernel = kernel or used
    return [{"t": start + every * k, "gpus": {"0": {"used": u, "total": 40960, "kernel": m, "util": None}},
             "tf": {}} for k, (u, m) in enumerate(zip(used, kernel, strict=True))]


def svg_paths(markup: str) -> list[tuple[str, str, str]]:
    """(class, d, style) of every path."""
    return re.findall(r"<path class='([^']*)' d='([^']*)' style='([^']*)'", markup)


def steps(d: str) -> list[tuple[str, float]]:
    return [(c, float(v.split(",")[0])) for c, v in re.findall(r"([MHV])([\d.,]+)", d)]


def test_memory_is_drawn_as_steps_each_change_a_horizontal_then_a_vertical_segment():
    from tfgpu_magic.render.live_html import chart_html

    markup = chart_html(history_of([1000, 1000, 5000, 5000, 2000], kernel=[0] * 5))
    (_, d, _), = [p for p in svg_paths(markup) if "series-line" in p[0]]
    commands = [c for c, _ in steps(d)]
    assert commands[0] == "M" and set(commands[1:]) <= {"H", "V"}, d
    # Each change: H to the sample's time, then V to its value; never a diagonal (no L, no bare pairs).
    assert "L" not in d and "V" in d
    pairs = commands[1:]
    for k, c in enumerate(pairs):
        if c == "V":
            assert pairs[k - 1] == "H", d
    assert pairs.count("V") == 2  # 1000 -> 5000 -> 2000: two changes, two steps


def test_a_missing_reading_is_a_gap_not_a_drop_to_zero():
    from tfgpu_magic.render.live_html import chart_html

    markup = chart_html(history_of([1000, None, 3000, 3000], kernel=[0, None, 0, 0]))
    (_, d, _), = [p for p in svg_paths(markup) if "series-line" in p[0]]
    assert d.count("M") == 2, d  # the line breaks where the GPU could not be read


def test_the_time_axis_has_ticks_at_round_clock_times():
    from tfgpu_magic.render.live_html import chart_html, time_ticks

    start = 1_700_000_003.0  # 3 s past a round minute
    markup = chart_html(history_of([100 * k for k in range(25)], start=start, every=5.0))  # two minutes
    ticks = time_ticks(start, start + 120)
    assert 3 <= len(ticks) <= 7 and all(t % 15 == 0 for t in ticks), ticks  # round 15 or 30 s steps
    labels = re.findall(r"text-anchor='(?:start|middle|end)'>(\d\d:\d\d(?::\d\d)?)</text>", markup)
    expected = [time.strftime("%H:%M:%S", time.localtime(t)) for t in ticks]
    assert labels[:len(ticks)] == expected, (labels, expected)
    assert markup.count("class='tfgpu-tick'") >= 3 * 1  # at least the memory chart's
    assert time_ticks(0, 600)[1] - time_ticks(0, 600)[0] == 120  # ten minutes: every two
    assert "last change" in markup


def test_this_kernels_reserved_share_shows_where_it_equals_used():
    """The kernel alone on its GPU: reserved == used. The reserved share is a filled area under the used line (its
    colour, its own legend swatch), so it does not hide exactly under the line as a dashed line did."""
    from tfgpu_magic.render.live_html import chart_html

    markup = chart_html(history_of([1000, 4000, 4000, 8000]))
    paths = svg_paths(markup)
    area = [p for p in paths if "series-area" in p[0]]
    line = [p for p in paths if "series-line" in p[0]]
    assert len(area) == 1 and len(line) == 1
    assert "fill-opacity" in area[0][2] and "fill:none" not in area[0][2]
    assert "fill:none" in line[0][2]
    assert paths.index(area[0]) < paths.index(line[0])  # drawn first: the line on top of the area
    assert "GPU 0 reserved by this kernel" in markup and "GPU 0 used" in markup
    assert "height:9px;background:" in markup  # the area's swatch in the legend, apart from the lines'


def test_lines_that_meet_are_all_visible():
    """Two idle GPUs both at 0 MiB: the line drawn first is wider, so its colour shows along the one above it."""
    from tfgpu_magic.render.live_html import chart_html

    history = [{"t": 1000.0 + k, "gpus": {"0": {"used": 0, "kernel": None, "util": 0},
                                          "1": {"used": 0, "kernel": None, "util": 0}}, "tf": {}} for k in range(3)]
    widths = [float(w) for w in re.findall(r"series-line' d='[^']*' style='[^']*' stroke-width='([\d.]+)'",
                                           chart_html(history))]
    assert len(widths) == 4 and widths[0] > widths[1] and widths[2] > widths[3], widths


# -- one vocabulary (core/words.py) -------------------------------------------------------------------------
def test_setting_and_tensorflow_states_use_the_vocabulary():
    from tfgpu_magic.render.live_html import header_html

    kernel = {"tensorflow": {"state": "not_imported", "version": None, "note": ""},
              "settings": [{"setting": "growth", "asked": "on", "status": "no_gpu", "detail": ""},
                           {"setting": "cpus", "asked": "2", "status": "pending", "detail": ""},
                           {"setting": "visible", "asked": "7", "status": "no_device", "detail": ""}]}
    text = " ".join(re.sub(r"<[^>]+>", " ", header_html(kernel)).split())
    for status in ("no_gpu", "pending", "no_device"):
        assert words.setting_state(status) in text, text
    assert f"TensorFlow: {words.tf_state('not_imported')}." in text
    assert "no gpu" not in text and "pending" not in text and "not_imported" not in text


def test_missing_values_use_the_vocabulary_and_name_a_field_once():
    no_permission = Unavailable("no_permission", "utilization: Insufficient Permissions")
    lost = replace(gpu_fakes.gpu(1, "NVIDIA L4", 23034, 1000), name=Unavailable("gpu_lost", "GPU 1: GPU is lost"),
                   error=Unavailable("gpu_lost", "GPU 1: GPU is lost"))
    base = gpu_fakes.three_gpus()
    odd = replace(base, gpus=(replace(base.gpus[0], utilization_gpu_pct=no_permission,
                                      temperature_c=Unavailable("not_supported")), lost))
    p, _ = make_panel(lambda: odd)
    try:
        text = text_of(p)
    finally:
        p.close()
    assert "utilization utilization" not in text
    assert f"utilization {words.missing('no_permission', 'Insufficient Permissions')}" in text, text
    assert f"temperature {words.missing('not_supported')}" in text  # "n/a (not supported)"
    assert f"GPU 1 · {words.NO_NAME}" in text and "GPU 1 · ?" not in text


def test_nvml_unavailable_without_its_own_words_says_why_in_the_vocabulary():
    quiet = NvmlSnapshot(available=False, error=Unavailable("no_permission", ""))
    p, _ = make_panel(lambda: quiet)
    try:
        assert f"NVML is unavailable ({words.MISSING_REASONS['no_permission']})" in text_of(p)
    finally:
        p.close()
