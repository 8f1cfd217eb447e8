"""The views a notebook shows: `%tfgpu status`, `devices`, `memory` and `placement status` as HTML tables with
headers, every piece of data escaped, no dict dumps, JupyterLab's colours (measured against its installed light
and dark themes for WCAG AA contrast); and their text forms within 100 columns. `%tfgpu memory` against real
TensorFlow is tests/tf/test_views_tf.py."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

import gpu_fakes
import pytest
from IPython.utils.capture import capture_output

from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot, Unavailable
from tfgpu_magic.core.placement import CellSummary, Fallback, RecordTable
from tfgpu_magic.core.snapshot import Device, Memory
from tfgpu_magic.render import views
from tfgpu_magic.render.placement import record_table_html, summary_html
from tfgpu_magic.render.snapshot import ShownSnapshot as Snapshot
from tfgpu_magic.render.snapshot import take

EVIL = "<img src=x onerror=alert(1)>"
# NVML's processes are named from /proc/PID/comm (at most 15 characters): a busy GPU makes the column long.
BUSY = [GpuProcess(5100 + k, 2000 + k, name, "bob") for k, name in
        enumerate(["python3", "jupyter-kernel", "train_worker_00", "train_worker_01", "tensorboard", "ray::IDLE"])]


def evil_gpus() -> NvmlSnapshot:
    """Three GPUs as a shared server shows them: a hostile GPU name and process name,
    a process NVML cannot attribute memory to, a busy GPU, one GPU without temperature."""
    return NvmlSnapshot(available=True, driver_version="550.54.15", cuda_driver_version="12.4", gpus=(
        gpu_fakes.gpu(0, "NVIDIA A100-SXM4-40GB", 40960, 30000, [
            GpuProcess(4242, 29000, "python", "ann"), GpuProcess(os.getpid(), 1024, EVIL, "me", is_self=True)]),
        dataclasses.replace(gpu_fakes.gpu(1, EVIL, 23034, 1000), temperature_c=Unavailable("not_supported")),
        gpu_fakes.gpu(2, "NVIDIA H100 80GB HBM3", 81920, 70000, [*BUSY, GpuProcess(5152, None, "python3", "bob")]),
    ))


PLACEMENT = {"on": True, "mode": "on", "records": 12, "dropped": 3, "maxlen": 10000, "tf_log_at_init": True,
             "tf_log_at_init_known": True, "route": "log", "capturing": False,
             "notes": ["TF_CPP_MIN_LOG_LEVEL=2 hides TensorFlow's stderr log; placements still come from its "
                       "stdout copy of the placer and from its eager listener", EVIL]}


@pytest.fixture
def realistic(shell) -> Snapshot:
    """Settings asked through the real magic, over the hostile GPUs; TensorFlow's devices and memory as an
    initialized runtime with two logical CPUs and two GPUs would report them."""
    shell.tfgpu.controller._nvml_snapshot = evil_gpus
    shell.tfgpu.controller.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    for line in ("visible 0,2", "limit 20GB --gpu 2", "cpus 2"):
        shell.run_line_magic("tfgpu", line)
    snap = take(shell.tfgpu.controller, nvml=evil_gpus(), placement=PLACEMENT)
    physical = (Device("CPU:0", "CPU", "physical"), Device("GPU:0", "GPU", "physical", 0),
                Device("GPU:1", "GPU", "physical", 2))
    logical = (Device("CPU:0", "CPU", "logical"), Device("CPU:1", "CPU", "logical"),
               Device("GPU:0", "GPU", "logical"), Device("GPU:1", "GPU", "logical"))
    memory = (Memory("CPU:0", 1.5, 20.25), Memory("CPU:1", 1.5, 20.25, shared_with="CPU:0"),
              Memory("GPU:0", 12.0, 40.5), Memory("GPU:1", None, None, f"no figures: {EVIL}"))
    return dataclasses.replace(snap, physical_devices=physical, logical_devices=logical, memory=memory,
                               tf_gpu_names={0: "GPU:0", 2: "GPU:1"})


def placement_status(shell) -> str:
    from tfgpu_magic.ipython.placement import PlacementController

    controller = PlacementController(shell)
    controller._errors.append(EVIL)  # a capture error's text is data too
    return controller.status_html()


def all_html(snap: Snapshot, shell) -> dict[str, str]:
    return {"status": snap._repr_html_(), "devices": views.devices_html(snap), "memory": views.memory_html(snap),
            "placement status": placement_status(shell)}


# -- HTML ------------------------------------------------------------------------------------------------
def test_every_view_is_tables_with_headers(realistic, shell):
    for name, page in all_html(realistic, shell).items():
        assert "<table" in page and "<thead>" in page and "<th" in page, name
        assert "<pre" not in page, name
    status = realistic._repr_html_()
    for header in ("setting", "asked", "status", "detail", "memory used / total", "utilization", "temperature",
                   "processes"):
        assert f">{header}" in status, header
    memory = views.memory_html(realistic)
    assert re.search(r"text-align:\s*right[^>]*>\s*40\.5\s*<", memory), memory  # figures right-aligned


def test_data_is_escaped_never_raw(realistic, shell):
    pages = all_html(realistic, shell)
    for name, page in pages.items():
        assert "<img" not in page, name
    for name in ("status", "devices"):
        assert pages[name].count(html_escaped(EVIL)) >= 2, name  # the GPU's name and the process's
    assert html_escaped(EVIL) in pages["memory"] and html_escaped(EVIL) in pages["placement status"]


def html_escaped(text: str) -> str:
    import html

    return html.escape(text)


def test_no_dict_dump_anywhere(realistic, shell):
    texts = {**all_html(realistic, shell), "text": realistic.to_text()}
    for name, page in texts.items():
        for dump in ("{'", '{"', "on=False,", "on=True,", "notes=[]", "notes=[", "'mode':", "route="):
            assert dump not in page, (name, dump)
    assert "Placement capture is on" in realistic._repr_html_()


def test_placement_status_says_what_it_does_in_sentences(shell):
    page = placement_status(shell)
    assert "capture" in page and "never switched on" in page
    assert "%tfgpu placement on" in page


COLOUR = re.compile(r"(?<![-\w])(?:color|background|border(?:-left|-bottom|-top)?)\s*:\s*([^;\"']+)")


def test_colours_are_jupyterlab_variables_with_fallbacks(realistic, shell):
    summary = CellSummary.from_records([], cell=3, requested="/GPU:7",
                                       fallbacks=(Fallback("/GPU:7", ("CPU:0",), ("MatMul",), "there is no GPU:7"),))
    pages = {**all_html(realistic, shell), "fallback": summary_html(summary),
             "records": record_table_html(RecordTable((), 0, 0, 0, 10))}
    for name, page in pages.items():
        for value in COLOUR.findall(page):
            if value.strip() in ("transparent", "none", "0", "inherit"):
                continue
            assert "var(--jp-" in value and "," in value, (name, value)  # a JupyterLab variable, a fallback
        assert "#b00020" not in page, name
    assert views.ALERT in pages["fallback"] and "fallback: asked /GPU:7" in pages["fallback"]


# -- contrast (WCAG 2.x) against the installed JupyterLab themes -------------------------------------------
THEMES = Path(sys.prefix) / "share" / "jupyter" / "lab" / "themes" / "@jupyterlab"
NAMED = {"white": "#ffffff", "black": "#000000"}


def theme(name: str) -> dict[str, str]:
    css = THEMES / f"theme-{name}-extension" / "index.css"
    if not css.exists():
        pytest.skip(f"JupyterLab's {name} theme is not installed here ({css})")
    return dict(re.findall(r"(--jp-[\w-]+):\s*([^;]+);", css.read_text()))


def rgba(value: str, variables: dict[str, str]) -> tuple[float, float, float, float]:
    value = value.strip()
    var = re.fullmatch(r"var\((--[\w-]+)\s*(?:,\s*(.+))?\)", value)
    if var:  # a theme variable, else its fallback (JupyterLab's --md-* palette equals the fallbacks given)
        name, fallback = var.groups()
        return rgba(variables.get(name, fallback), variables)
    value = NAMED.get(value, value)
    if value.startswith("#"):
        digits = value[1:]
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return (*(int(digits[i:i + 2], 16) for i in (0, 2, 4)), 1.0)
    parts = re.fullmatch(r"rgba?\(([^)]*)\)", value).group(1).split(",")
    return (*(float(p) for p in parts[:3]), float(parts[3]) if len(parts) > 3 else 1.0)


def over(colour, background):
    r, g, b, a = colour
    return (*(a * c + (1 - a) * bg for c, bg in zip((r, g, b), background[:3], strict=True)), 1.0)


def luminance(colour) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in colour[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground, background) -> float:
    lighter, darker = sorted((luminance(over(foreground, background)), luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_jupyterlab_backgrounds_are_what_the_colours_were_chosen_for():
    assert rgba("var(--jp-layout-color0)", theme("light"))[:3] == (255, 255, 255)
    assert rgba("var(--jp-layout-color0)", theme("dark"))[:3] == (17, 17, 17)


@pytest.mark.parametrize("name", ["light", "dark"])
@pytest.mark.parametrize("role,colour,minimum", [
    ("text", views.TEXT, 4.5),
    ("alert text (fallbacks, refused settings)", views.ALERT, 4.5),
    ("caution stripe (not text: WCAG 1.4.11 asks 3:1)", views.CAUTION_STRIPE, 3.0),
])
def test_theme_colours_meet_wcag_aa(name, role, colour, minimum):
    variables = theme(name)
    background = rgba("var(--jp-layout-color0)", variables)
    ratio = contrast(rgba(colour, variables), background)
    print(f"{name} {role}: {ratio:.2f}:1")
    assert ratio >= minimum, f"{role} in JupyterLab {name}: {ratio:.2f}:1 < {minimum}:1"


def test_fallback_colours_meet_wcag_aa_on_a_light_page():
    """Front ends without JupyterLab's variables (nbviewer, classic Notebook) get the fallbacks, chosen for a
    white page: no single colour reaches 4.5:1 against both white and JupyterLab's dark #111."""
    white = rgba("#ffffff", {})
    for colour, minimum in ((views.ALERT, 4.5), (views.CAUTION_STRIPE, 3.0)):
        fallback = re.fullmatch(r"var\(--[\w-]+,\s*(.+)\)", colour).group(1)
        assert contrast(rgba(fallback, {}), white) >= minimum, colour


def test_warn_colour_is_not_used_for_text_because_it_fails_on_white():
    """Why warnings are not written in --jp-warn-color0: JupyterLab light's is #e65100, 3.8:1 on white."""
    light = theme("light")
    assert contrast(rgba("var(--jp-warn-color0)", light), rgba("#ffffff", {})) < 4.5


# -- through the magic ---------------------------------------------------------------------------------
def test_magics_display_the_html_views(shell):
    shell.tfgpu.controller._nvml_snapshot = evil_gpus
    for line in ("status", "devices", "memory"):
        with capture_output() as captured:
            shell.run_line_magic("tfgpu", line)
        (output,) = captured.outputs
        page, text = output.data["text/html"], output.data["text/plain"]
        assert "<pre" not in page and "<img" not in page, line
        assert "tfgpu-view" in page, line
        assert text and "<" not in " ".join(text.split()).replace(EVIL, ""), line
    assert "nothing allocated yet" in page


# -- text ----------------------------------------------------------------------------------------------
def test_text_forms_fit_100_columns(realistic, shell):
    from tfgpu_magic.ipython.placement import PlacementController

    texts = {"status": realistic.to_text(), "devices": realistic.devices_text(),
             "memory": "\n".join(realistic.memory_lines()),
             "placement status": PlacementController(shell).status_text()}
    for name, text in texts.items():
        too_long = [line for line in text.splitlines() if len(line) > 100]
        assert not too_long, (name, too_long)
    status = texts["status"]
    assert all(f"{p.pid} {p.name} {p.used_mib} MiB" in " ".join(status.split()) for p in BUSY)  # wrapped, not cut
    assert "PID 5152 python3 n/a" in status  # a figure NVML did not give: the vocabulary's word
    assert "PID 4242 python 29000 MiB" in status


def test_status_text_ends_with_placement_capture_as_sentences(realistic):
    text = realistic.to_text()
    last = text.split("\nPlacement capture", 1)
    assert len(last) == 2, text
    paragraph = " ".join(("Placement capture" + last[1]).split())
    assert paragraph.startswith("Placement capture is on") and paragraph.endswith("."), paragraph
    assert "12 records kept, 3 dropped" in paragraph and "10,000" in paragraph
    assert "TF_CPP_MIN_LOG_LEVEL=2 hides" in paragraph


def test_memory_text_shows_no_numbers_where_there_are_none(realistic):
    text = "\n".join(realistic.memory_lines())
    row = next(line for line in text.splitlines() if line.lstrip().startswith("GPU:1"))
    assert "0.0" not in row and "no figures" in row
    cpu1 = next(line for line in text.splitlines() if line.lstrip().startswith("CPU:1"))
    assert "CPU:0" in cpu1 and "1.5" not in cpu1  # shared: its figures are CPU:0's, not counted twice
