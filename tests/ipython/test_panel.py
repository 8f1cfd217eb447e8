"""The live panel without a browser: its widget tree over a real IPython shell (in-memory NVML), its controls
(the magic's own subcommands and messages), its faults, its threads, and a scripted session with the fake NVML
library and real TensorFlow in a subprocess. What a front end would get is read from the widgets' state."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace

import gpu_fakes
import ipywidgets
import pytest
from fakenvml import three_gpus
from harness import SHELL_PRELUDE
from IPython.core.error import UsageError

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
    panel.apply("visible", "2")
    text = text_of(panel)
    assert "GPU 2 · NVIDIA H100 80GB HBM3 (TensorFlow GPU:0)" in text
    assert "GPU:0 = physical GPU 2" in text
    assert "30,000 / 40,960 MiB used (73%)" in text
    assert "visible 2 pending" in text
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
    assert "cpus 3 pending" in text_of(panel)


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
    assert said == str(magic.value) and said.startswith("tfgpu:") and "\n" not in said
    assert "&#9888;" in panel._html["message"].value  # shown as a refusal
    assert (shell.tfgpu.controller.plan, dict(shell.tfgpu.controller.environ)) == before


def test_placement_control_needs_the_extension(shell):
    p = Panel(model=LiveModel(shell.tfgpu.controller), magics=None)
    try:
        assert p._inputs["placement"].disabled and "load_ext" in p._reasons["placement"].value
        assert not p._inputs["cpus"].disabled
    finally:
        p.close()


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


# -- a scripted session: the fake NVML library, real TensorFlow, a placement cell ----
SESSION = SHELL_PRELUDE + """
import json, re, ipywidgets
from tfgpu_magic import Panel
def dump(p):
    out, stack = [], [p]
    while stack:
        w = stack.pop()
        out.append({"model": w.get_state()["_model_name"], "value": getattr(w, "value", None),
                    "disabled": getattr(w, "disabled", None), "description": getattr(w, "description", None)})
        stack.extend(getattr(w, "children", ()))
    return out
magic("visible 1")
p = Panel()
before = dump(p)
magic("visible all")
magic("cpus 2")
magic("cpumem on")
magic("placement on")
assert cell("import tensorflow as tf").success
assert cell("x = tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))").success
assert cell("y = tf.ones((1024, 1024)) * 3.0").success
after = dump(p)
p.close()
print(json.dumps({"before": before, "after": after}))
"""


def plain(states: list[dict]) -> str:
    values = [s["value"] for s in states if s["model"] == "HTMLModel" and isinstance(s["value"], str)]
    return " ".join(re.sub(r"<[^>]+>", " ", " ".join(values)).replace("&#x27;", "'").split())


@pytest.mark.tf
def test_a_scripted_session_fills_every_part_of_the_panel(fake_nvml):
    fake_nvml.write(three_gpus())
    proc = fake_nvml.run_python(SESSION, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = plain(data["before"]), plain(data["after"])
    # Before import: the fake GPUs, and TensorFlow's number for the one `visible 1` keeps.
    assert "GPU 1 · NVIDIA H100 80GB HBM3 (TensorFlow GPU:0)" in before and "GPU:0 = physical GPU 1" in before
    assert "30,000 / 40,960 MiB used (73%)" in before
    assert "this kernel reserved" in before  # the fake lists this process on GPU 1
    # After: both logical CPUs, memory figures, per-cell rows and the MatMul's placement.
    assert "logical CPU:0 CPU" in after and "logical CPU:1 CPU" in after
    assert "TensorFlow sees none of the 3 GPUs NVML lists: this TensorFlow (tensorflow-cpu " in after
    assert re.search(r"TensorFlow CPU allocator in use [\d.]+ MiB, peak [\d.]+ MiB", after), after
    # Cells before the runtime started are not recorded: the MatMul's cell started it, then one more.
    assert "Recent cells (the last 2, latest first)" in after and "(started TensorFlow)" in after, after
    assert re.search(r"MatMul", after) and "records match" in after
    # The settings TensorFlow fixed at its start are disabled, with the reason; placement still switches.
    controls = {s["description"]: s for s in data["after"] if s["model"] == "ButtonModel"}
    assert controls["Apply"]["disabled"] in (True, False)
    disabled = [s for s in data["after"] if s["model"] in ("TextModel", "DropdownModel") and s["disabled"]]
    assert len(disabled) == 5, disabled
    assert "fixed: TensorFlow's runtime has started" in after


# -- the markup itself ------------------------------------------------------------------------------------------
KNOWN_ATTRIBUTES = {"style", "class", "role", "aria-label", "colspan", "width", "height", "viewbox", "points",
                    "fill", "stroke-width", "stroke-dasharray", "x", "y", "x1", "y1", "x2", "y2", "text-anchor"}


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
