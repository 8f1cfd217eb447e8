"""The live model's sections (live.py) as HTML and text: what the panel shows, and the recent-cells table that
``%tfgpu memory`` shows too. Pure functions over plain data: nothing here asks TensorFlow or NVML, and nothing
imports IPython or ipywidgets. Everything that comes from data is escaped (views.esc / views.table_html); the
output is deterministic for the same data, so a view that re-renders unchanged data sends nothing."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import words
from .text import memoryfigure, placement_sentences, sentence, text_table, unattributed_sentence
from .views import (
    ALERT,
    FONT,
    MONO,
    TEXT,
    Markup,
    alert,
    box,
    caution,
    esc,
    inline,
    paragraph,
    state_cell,
    table_html,
    title,
)

MUTED = "var(--jp-ui-font-color2, #616161)"
OWN = "var(--jp-brand-color1, #1976d2)"  # this kernel's memory
OTHERS = "var(--jp-layout-color4, #9e9e9e)"  # other processes' memory
TRACK = "var(--jp-layout-color2, #eeeeee)"
# Line colours at 3:1 or more against both themes' backgrounds (the pale -color3 shades are not): a chart has a
# few lines, each GPU's in one chart, TensorFlow's allocators in another.
SERIES = ("var(--jp-brand-color1, #1976d2)", "var(--jp-accent-color1, #388e3c)", "var(--jp-warn-color0, #e65100)",
          "var(--jp-error-color1, #c62828)", "var(--jp-brand-color0, #0d47a1)", "var(--jp-accent-color0, #1b5e20)")
CHART_POINTS = 150  # a line of more points than this is thinned: the chart is ~600 px wide
RECORDS_SHOWN = 50

RESERVED_MEANING = ("Reserved is what this kernel holds on the GPU as nvidia-smi counts it (TensorFlow's pool and "
                    "CUDA's context); in use is what TensorFlow's allocator hands out now, and peak the most it "
                    "handed out. Without growth TensorFlow reserves nearly the whole GPU at start: `%tfgpu growth "
                    "on` reserves as needed, `%tfgpu limit 40%` caps the pool (both before TensorFlow's first "
                    "operation).")


def size(mib: float | None) -> str:
    if mib is None:
        return words.MISSING
    return f"{mib / 1024:,.1f} GiB" if mib >= 1024 else f"{mib:,.1f} MiB"


def _detail(value: dict, what: str) -> str:
    """NVML's own words for a missing field, without the field's name where the line already says it
    ("utilization: Insufficient Permissions" on the utilization line is "Insufficient Permissions")."""
    detail = str(value.get("detail") or "")
    return detail[len(what) + 2:] if what and detail.startswith(f"{what}: ") else detail


def _na(value: Any, what: str = "") -> str:
    """A value, or the vocabulary's "n/a" and its reason: a field the adapter could not read is NVML's
    ``{"unavailable": reason, "detail": ...}`` (nvml.to_jsonable). ``what``: the field the line names already."""
    if isinstance(value, dict):
        return words.missing(str(value.get("unavailable") or ""), _detail(value, what))
    return words.MISSING if value is None else str(value)


def _why(value: Any) -> str:
    """Why a value is missing, for a sentence that already says it is ("NVML is unavailable (<why>)")."""
    if isinstance(value, dict):
        return words.why(str(value.get("unavailable") or ""), _detail(value, "")) or words.MISSING
    return words.MISSING if value is None else str(value)


def _name(value: Any) -> str:
    """A GPU's name, or the vocabulary's word for a name that could not be read."""
    return value if isinstance(value, str) and value.strip() else words.NO_NAME


def _num(value: Any) -> int | float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


# -- header: TensorFlow and the settings ---------------------------------------------------------------------
def header_html(kernel: dict) -> str:
    tf = kernel["tensorflow"]
    version = f" {tf['version']}" if tf.get("version") else ""
    head = (f"<p style=\"margin:0 0 4px 0\"><b>TensorFlow{esc(version)}: {esc(words.tf_state(tf['state']))}.</b> "
            f"{inline(sentence(tf['note']))}</p>")
    settings = kernel.get("settings") or []
    if settings:
        rows = [(s["setting"], s["asked"], state_cell(s["status"]), sentence(s["detail"]) if s["detail"] else "")
                for s in settings]
        body = table_html(("setting", "asked", "what became of it", "detail"), rows)
    else:
        body = paragraph("No settings asked (the Settings tab, or `%tfgpu help`, lists them).")
    notes = [caution(n) for n in kernel.get("notes") or ()]
    return box("panel-header", head, body, *notes)


# -- devices ------------------------------------------------------------------------------------------
def devices_html(kernel: dict, gpus: dict) -> str:
    tf = kernel["tensorflow"]
    names = {g["index"]: g.get("tf_name") for g in gpus.get("gpus") or ()}
    rows = []
    for d in tf.get("physical_devices") or ():
        index = d.get("physical_index")
        rows.append(("physical", d["name"], d["device_type"], "" if index is None else f"GPU {index}"))
    for d in tf.get("logical_devices") or ():
        physical = next((i for i, n in names.items() if n == d["name"]), None) if d["device_type"] == "GPU" else None
        rows.append(("logical", d["name"], d["device_type"], "" if physical is None else f"GPU {physical}"))
    parts = []
    if rows:
        parts.append(table_html(("kind", "TensorFlow", "type", "nvidia-smi"), rows))
    if tf.get("physical_devices") is None:
        parts.append(paragraph("TensorFlow's devices are not listed yet (`%tfgpu devices` lists them; that does not "
                               "start the runtime)." if tf["state"] in ("imported",) else
                               "TensorFlow's devices appear once it is imported."))
    if tf.get("logical_devices") is None and tf["state"] in ("imported", "enumerated"):
        parts.append(paragraph("Logical devices appear when TensorFlow's runtime starts (its first operation)."))
    mapped = [(i, n) for i, n in sorted(names.items()) if n]
    if tf.get("no_gpu"):
        parts.append(caution(tf["no_gpu"]))
    if mapped:
        parts.append(paragraph("GPU numbering: " + ", ".join(f"{n} = physical GPU {i}" for i, n in mapped)
                               + " (physical: nvidia-smi's numbers)."))
    note = (kernel.get("numbering") or {}).get("note")
    if note:
        parts.append(caution(note))
    return box("panel-devices", *parts)


# -- memory per GPU ------------------------------------------------------------------------------------------------
def _bar(used: int | None, own: float | None, total: int | None) -> str:
    """Used over total, this kernel's share drawn apart; figures in the text beside it, not only in colour."""
    if not total or used is None:
        return ""
    own_pct = 100 * min(own or 0, used) / total
    others_pct = 100 * max(used - (own or 0), 0) / total
    return (f"<div role='img' aria-label='{esc(f'{used:,} of {total:,} MiB used')}' style=\"display:flex;width:260px;"
            f"height:10px;background:{TRACK};border:1px solid {OTHERS};border-radius:2px;overflow:hidden;"
            f"margin:3px 0\"><div style=\"width:{own_pct:.2f}%;background:{OWN}\"></div>"
            f"<div style=\"width:{others_pct:.2f}%;background:{OTHERS}\"></div></div>")


def memory_html(gpus: dict, memory: dict) -> str:
    nvml = gpus.get("nvml") or {}
    pids = nvml.get("pids")  # NvmlSnapshot.pids: None on the host
    tf_memory = {m["device"]: m for m in memory.get("devices") or ()}
    own = {m["physical_index"]: m for m in gpus.get("kernel_gpu_memory") or () if m.get("physical_index") is not None}
    parts = []
    if not nvml.get("available"):
        parts.append(caution(f"No GPU figures: NVML is unavailable ({_why(nvml.get('error'))})."))
    elif not gpus.get("gpus"):
        parts.append(paragraph("No GPU: NVML lists none." if not nvml.get("error") else
                               f"GPUs unknown: NVML could not count them ({_why(nvml.get('error'))})."))
    for gpu in gpus.get("gpus") or ():
        name = _name(gpu.get("name"))
        tf_name = gpu.get("tf_name")
        label = f"GPU {gpu['index']} · {name}" + (f" (TensorFlow {tf_name})" if tf_name else "")
        if gpu.get("error"):
            parts.append(title(label) + caution(f"Unavailable: {_why(gpu['error'])}"))
            continue
        used, total = _num(gpu.get("memory_used_mib")), _num(gpu.get("memory_total_mib"))
        mine = own.get(gpu["index"], {}).get("used_mib")
        used_text = (f"{used:,} / {total:,} MiB used ({100 * used / total:.0f}%)" if used is not None and total
                     else f"memory {_na(gpu.get('memory_used_mib'), 'memory')}")
        lines = [used_text + (f"; this kernel reserved {size(mine)}" if mine is not None else "")]
        figures = tf_memory.get(tf_name) if tf_name else None
        if figures and figures.get("current_mib") is not None:
            lines.append(f"TensorFlow {tf_name}: reserved {size(mine)}, in use {size(figures['current_mib'])}, "
                         f"peak {size(figures['peak_mib'])}")
        elif figures:
            lines.append(f"TensorFlow {tf_name}: {figures.get('note') or 'no allocator figures'}")
        util, temp = gpu.get("utilization_gpu_pct"), gpu.get("temperature_c")
        lines.append(f"utilization {_na(util, 'utilization')}{'%' if _num(util) is not None else ''}, "
                     f"temperature {_na(temp, 'temperature')}{' °C' if _num(temp) is not None else ''}")
        given_migs = [f"{gpu['index']}/{m.get('index')}" for m in gpu.get("mig_devices") or () if m.get("given")]
        if gpu.get("given") is False and given_migs:
            lines.append(f"only its MIG device{'s' if len(given_migs) > 1 else ''} {', '.join(given_migs)} "
                         f"{'are' if len(given_migs) > 1 else 'is'} given to this kernel (see `%tfgpu devices`)")
        elif gpu.get("given") is False:
            lines.append("not given to this kernel (see `%tfgpu devices`): CUDA_VISIBLE_DEVICES at its start left "
                         "it out")
        migs = gpu.get("mig_devices") or ()
        # In MIG mode each device says its own part.
        said = "" if migs else unattributed_sentence(gpu.get("processes"), pids)
        if said:
            lines.append(said)
        parts.append(title(label) + _bar(used, mine, total) + "".join(paragraph(line) for line in lines))
        parts += [_mig_html(gpu, mig, pids) for mig in migs]
    if gpus.get("gpus"):
        parts.append(paragraph(RESERVED_MEANING, f"margin:6px 0;color:{MUTED}"))
    if pids and not pids.get("comparable", True) and pids.get("note"):
        parts.append(paragraph(sentence(f"PIDs: {pids['note']}"), f"margin:6px 0;color:{MUTED}"))
    cpu = tf_memory.get("CPU:0")
    if cpu is not None:
        if cpu.get("current_mib") is not None:
            parts.append(title("TensorFlow CPU allocator") + paragraph(
                f"in use {size(cpu['current_mib'])}, peak {size(cpu['peak_mib'])}"
                + (" (one allocator, shared by every logical CPU)" if cpu.get("note") else "")))
        else:
            parts.append(title("TensorFlow CPU allocator") + caution(cpu.get("note") or "no figures"))
    elif memory.get("state") not in ("initialized",):
        parts.append(paragraph("TensorFlow's allocator figures appear once its runtime starts (its first operation)."))
    return box("panel-memory", *parts)


def _mig_html(gpu: dict, mig: dict, pids: dict | None = None) -> str:
    """A MIG device under its parent: its memory, and no utilization or temperature (NVML has none per device)."""
    used, total = _num(mig.get("memory_used_mib")), _num(mig.get("memory_total_mib"))
    mine = sum(p.get("used_mib") or 0 for p in mig.get("processes") or () if isinstance(p, dict) and p.get("is_self"))
    uuid = mig.get("uuid") if isinstance(mig.get("uuid"), str) else words.MISSING
    label = f"GPU {gpu['index']}/{mig.get('index')} · MIG {_na(mig.get('profile'))} {uuid}"
    used_text = (f"{used:,} / {total:,} MiB used ({100 * used / total:.0f}%)" if used is not None and total
                 else f"memory {_na(mig.get('memory_used_mib'), 'memory')}")
    lines = [used_text + (f"; this kernel holds {size(mine)}" if mine else ""),
             "utilization and temperature: not reported per MIG device (the parent's are the whole GPU's)"]
    if mig.get("given") is False:
        lines.append("not given to this kernel (see `%tfgpu devices`)")
    said = unattributed_sentence(mig.get("processes"), pids)
    if said:
        lines.append(said)
    return (f"<div style='margin-left:18px'>{title(label)}{_bar(used, mine or None, total)}"
            + "".join(paragraph(line) for line in lines) + "</div>")


# -- history chart ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    """One line of a chart: its readings as (time, value) with None where there was no reading (a gap), its colour
    (one per GPU, the same in every chart), and its kind: a ``line``, or an ``area`` filled from zero (this
    kernel's reserved share, drawn under its GPU's used line, so where the two are equal both still show)."""

    label: str
    points: tuple[tuple[float, float | None], ...]
    colour: str
    kind: str = "line"


# Seconds between time ticks: the least that gives at most TICKS_MAX ticks (a label is ~50 px of the ~530 drawn).
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
TICKS_MAX = 7
# A line that another one drawn after it meets (two idle GPUs at 0: within MEET_PX of each other) is wider by this
# much (px) for each such line, so its colour still shows along the one above it.
UNDER_WIDTH = 1.2
LINE_WIDTH = 1.6
MEET_PX = 2.5


def _series(history: Sequence[dict]) -> tuple[list[Series], list[Series], list[Series]]:
    """Three charts' series: GPU memory (each GPU's used, and this kernel's reserved share as an area under it),
    TensorFlow's allocators in use, and each GPU's utilization. Apart, so 64 MiB of a CPU allocator does not
    vanish at the bottom of an 80 GiB axis. A reading NVML could not give is a gap, not a zero."""
    indices = sorted({i for point in history for i in point["gpus"]}, key=lambda i: (len(i), i))
    gpu, util = [], []
    for k, index in enumerate(indices):
        colour = SERIES[k % len(SERIES)]
        readings = [(point["t"], point["gpus"].get(index) or {}) for point in history]
        used = [(t, g.get("used")) for t, g in readings]
        if any(g.get("kernel") is not None for _, g in readings):
            # No process of this kernel on a GPU that was read: it holds nothing there.
            mine = [(t, g["kernel"] if g.get("kernel") is not None else (0 if g.get("used") is not None else None))
                    for t, g in readings]
            gpu.append(Series(f"GPU {index} reserved by this kernel", _thin(mine), colour, "area"))
        if any(v is not None for _, v in used):
            gpu.append(Series(f"GPU {index} used", _thin(used), colour))
        busy = [(t, g.get("util")) for t, g in readings]
        if any(v is not None for _, v in busy):
            util.append(Series(f"GPU {index} utilization", _thin(busy), colour))
    devices = list(dict.fromkeys(d for point in history for d in point["tf"]))
    tf = [Series(f"{d} in use", _thin([(p["t"], p["tf"].get(d)) for p in history]), SERIES[k % len(SERIES)])
          for k, d in enumerate(devices)]
    return gpu, tf, util


def _thin(points: list[tuple[float, float | None]]) -> tuple[tuple[float, float | None], ...]:
    """The points where the value changed (a step needs no others), and the last; then at most CHART_POINTS."""
    kept = [p for k, p in enumerate(points) if k == 0 or k == len(points) - 1 or p[1] != points[k - 1][1]]
    if len(kept) > CHART_POINTS:
        step = len(kept) / CHART_POINTS
        kept = [kept[int(k * step)] for k in range(CHART_POINTS)] + [kept[-1]]
    return tuple(kept)


def _runs(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """The stretches with a reading, each ending where the next reading was missing (the value held until then)."""
    runs: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] | None = None
    for t, v in points:
        if v is None:
            if current:
                current.append((t, current[-1][1]))
            current = None
        elif current is None:
            current = [(t, v)]
            runs.append(current)
        else:
            current.append((t, v))
    return runs


def step_path(runs: list[list[tuple[float, float]]], x, y, end: float | None = None) -> str:
    """An SVG path of steps: from each reading a horizontal segment to the next reading's time, then a vertical one
    to its value (memory changes at a sample, it does not ramp between two). ``end``: the last run's value is held
    on to that x (the chart's right edge: nothing changed since)."""
    parts = []
    for k, run in enumerate(runs):
        (t, v), y_now = run[0], y(run[0][1])
        parts.append(f"M{x(t):.1f},{y_now:.1f}")
        for t, v in run[1:]:
            parts.append(f"H{x(t):.1f}")
            if y(v) != y_now:
                y_now = y(v)
                parts.append(f"V{y_now:.1f}")
        if end is not None and k == len(runs) - 1:
            parts.append(f"H{end:.1f}")
    return "".join(parts)


def _meets(a: Series, b: Series, y) -> bool:
    """Whether two step lines come within MEET_PX of each other at some time both have a reading (one walk over
    both series' readings in time order, each holding its value until its next reading)."""
    merged = sorted([(t, 0, v) for t, v in a.points] + [(t, 1, v) for t, v in b.points], key=lambda e: e[0])
    now: list[float | None] = [None, None]
    for k, (t, which, v) in enumerate(merged):
        now[which] = v
        if k + 1 < len(merged) and merged[k + 1][0] == t:
            continue  # both changed at this time: compare once both are in
        if now[0] is not None and now[1] is not None and abs(y(now[0]) - y(now[1])) < MEET_PX:
            return True
    return False


def time_ticks(t0: float, t1: float) -> list[float]:
    """Clock times between t0 and t1 on a round step (every 10 s, every minute ...): at most TICKS_MAX of them."""
    span = t1 - t0
    step = next((s for s in TICK_STEPS if span / s <= TICKS_MAX - 1), TICK_STEPS[-1] * (1 + int(span // 21600)))
    first = math.ceil(t0 / step) * step
    return [first + k * step for k in range(int((t1 - first) // step) + 1)]


def _svg(series: list[Series], top: float, top_label: str, label: str, width: int, height: int) -> str:
    t0 = min(p[0] for s in series for p in s.points)
    t1 = max(p[0] for s in series for p in s.points)
    left, right, bottom = 62, width - 8, height - 18  # the plot: x from left to right, y from 4 to bottom
    span_t = (t1 - t0) or 1.0
    # Past the last change the lines run on a little: the figures held since (the chart is redrawn on a change).
    last_x = left + (right - left) * 0.96

    def x(t: float) -> float:
        return left + (last_x - left) * (t - t0) / span_t

    def y(v: float) -> float:
        return round(4 + (bottom - 4) * (1 - min(v, top) / top), 1)

    # Areas first, then lines; a line that later ones meet drawn wider: every series shows where they meet.
    lines = [s for s in series if s.kind == "line"]
    under = {k: sum(_meets(s, later, y) for later in lines[k + 1:]) for k, s in enumerate(lines)}
    # The paths carry no aria-label: inside the svg's role='img' they are presentational (an aria-label on a path
    # without a role is invalid ARIA, axe's aria-prohibited-attr); the svg's own label says what the chart shows.
    drawn = []
    for s in series:
        runs = _runs(s.points)
        if not runs:
            continue
        held = right if s.points[-1][1] is not None else None
        path = step_path(runs, x, y, held)
        if s.kind == "area":
            closed = "".join(f"{step_path([run], x, y, held if k == len(runs) - 1 else None)}V{y(0):.1f}"
                             f"H{x(run[0][0]):.1f}Z" for k, run in enumerate(runs))
            drawn.insert(0, f"<path class='tfgpu-series tfgpu-series-area' d='{closed}' style='fill:{s.colour};"
                            "fill-opacity:0.22;stroke:none'/><path class='tfgpu-series "
                            f"tfgpu-series-edge' d='{path}' style='fill:none;stroke:{s.colour}' stroke-width='1' "
                            "stroke-dasharray='4 3'/>")
        else:
            width_ = LINE_WIDTH + UNDER_WIDTH * under[lines.index(s)]
            drawn.append(f"<path class='tfgpu-series tfgpu-series-line' d='{path}' style='fill:none;"
                         f"stroke:{s.colour}' stroke-width='{width_:.1f}' "
                         "stroke-linejoin='round'/>")
    ticks = time_ticks(t0, t1) if t1 > t0 else [t0]
    fmt = "%H:%M:%S" if len(ticks) < 2 or ticks[1] - ticks[0] < 60 or any(t % 60 for t in ticks) else "%H:%M"
    axis = [f"<text x='{left - 4}' y='12' text-anchor='end'>{esc(top_label)}</text>",
            f"<text x='{left - 4}' y='{bottom + 4}' text-anchor='end'>0</text>",
            f"<line x1='{left}' y1='{bottom + 0.5}' x2='{right}' y2='{bottom + 0.5}' style='stroke:{OTHERS}' "
            f"stroke-width='1'/>",
            f"<line x1='{left}' y1='4.5' x2='{right}' y2='4.5' style='stroke:{TRACK}' stroke-width='1'/>"]
    for t in ticks:
        at = x(t)
        anchor = "start" if at < left + 24 else "end" if at > right - 24 else "middle"
        axis.append(f"<line class='tfgpu-tick' x1='{at:.1f}' y1='{bottom}' x2='{at:.1f}' y2='{bottom + 4}' "
                    f"style='stroke:{OTHERS}' stroke-width='1'/><text x='{at:.1f}' y='{height - 2}' "
                    f"text-anchor='{anchor}'>{time.strftime(fmt, time.localtime(t))}</text>")
    legend = []
    for s in series:
        swatch = (f"width:12px;height:9px;background:{s.colour};opacity:0.45;border-top:1px dashed {s.colour}"
                  if s.kind == "area" else f"width:14px;border-top:2px solid {s.colour}")
        legend.append(f"<span style='white-space:nowrap;margin-right:12px'><span style='display:inline-block;"
                      f"{swatch};vertical-align:middle;margin-right:4px'></span>{esc(s.label)}</span>")
    # Double quotes: FONT itself holds single-quoted family names.
    return (f"<svg role='img' aria-label='{esc(label)}' width='{width}' height='{height}' viewBox='0 0 {width} "
            f"{height}' style=\"font-family:{FONT};font-size:10px;fill:{TEXT};max-width:100%\">{''.join(axis)}"
            f"{''.join(drawn)}</svg><div style='font-size:11px;margin-bottom:6px'>{''.join(legend)}</div>")


def chart_html(history: Sequence[dict], width: int = 600, height: int = 130) -> str:
    """The last minutes as inline SVG steps: GPU memory used (NVML) and this kernel's reserved share; TensorFlow's
    allocators in use (on a laptop: its CPU allocator); each GPU's utilization. Clock times on the time axis; a
    point is taken every refresh, the chart redrawn when a figure changed."""
    gpu, tf, util = _series(history)
    if len(history) < 2 or not (gpu or tf or util):
        return box("panel-chart", paragraph("Memory over time: collecting (a point per refresh; the chart shows "
                                            "the last 10 minutes)."))
    parts = []
    for lines, name, fixed_top in ((gpu, "GPU memory over time (NVML)", None),
                                   (tf, "TensorFlow's allocators in use over time", None),
                                   (util, "GPU utilization over time", 100.0)):
        if not lines:
            continue
        top = fixed_top or (max((v for s in lines for _, v in s.points if v is not None), default=0) * 1.1 or 1.0)
        parts += [title(name), _svg(lines, top, "100%" if fixed_top else size(top), name.lower(), width,
                                    80 if fixed_top else height)]
    last = max(point["t"] for point in history)
    parts.append(paragraph(f"Each figure is a step at the reading that changed it. The charts end at the last change "
                           f"({time.strftime('%H:%M:%S', time.localtime(last))}); the lines run on from there: nothing "
                           "changed since.", f"margin:2px 0 6px 0;color:{MUTED};font-size:11px"))
    return box("panel-chart", *parts)


# -- recent cells ------------------------------------------------------------------------------------------
def cells_rows(cells: Sequence[dict]) -> list[tuple[str, ...]]:
    rows = []
    for cell in reversed(cells):  # the latest first
        count = "" if cell.get("cell") is None else str(cell["cell"])
        status = "" if cell.get("success", True) else " (failed)"
        started = " (started TensorFlow)" if cell.get("started_runtime") else ""
        for k, d in enumerate(cell["devices"] or [{"device": "", "current_mib": None, "delta_mib": None,
                                                   "peak_mib": None}]):
            delta = d.get("delta_mib")
            if delta is None:
                change = ""
            elif delta == 0:
                change = "0"
            else:
                change = ("+" if delta > 0 else "-") + memoryfigure(abs(delta))
            rows.append((count + status + started if k == 0 else "", f"{cell['duration_s']:.2f} s" if k == 0 else "",
                         d["device"], change, memoryfigure(d.get("peak_mib")), memoryfigure(d.get("current_mib"))))
    return rows


CELLS_HEADER = ("cell", "took", "device", "change MiB", "peak MiB", "now MiB")
CELLS_EMPTY = ("No cells recorded yet: each cell's memory is recorded once TensorFlow's runtime runs (the cell "
               "that starts it included).")


def _cells_reason(cells: Sequence[dict], memory: dict | None) -> str:
    """Why a recorded device has no figures, from the memory section's note for it."""
    blank = {d["device"] for c in cells for d in c["devices"] if d.get("peak_mib") is None}
    notes = {m["device"]: m.get("note") for m in (memory or {}).get("devices") or ()}
    return "; ".join(f"{device}: {notes.get(device) or 'no figures'}" for device in sorted(blank))


def cells_html(cells: Sequence[dict], memory: dict | None = None) -> str:
    if not cells:
        return box("panel-cells", paragraph(CELLS_EMPTY))
    reason = _cells_reason(cells, memory)
    return box("panel-cells", title(f"Recent cells (the last {len(cells)}, latest first)"),
               table_html(CELLS_HEADER, cells_rows(cells), right=(1, 3, 4, 5)), *([caution(reason)] if reason else []))


def cells_text(cells: Sequence[dict], memory: dict | None = None) -> list[str]:
    if not cells:
        return [CELLS_EMPTY]
    reason = _cells_reason(cells, memory)
    return [f"Recent cells (the last {len(cells)}, latest first):",
            *text_table(CELLS_HEADER, cells_rows(cells), right=(1, 3, 4, 5)), *([f"Note: {reason}"] if reason else [])]


# -- placement ------------------------------------------------------------------------------------------
def placement_summary_html(placement: dict | None) -> str:
    if not placement:
        return box("panel-placement", paragraph("Placement capture is not available: load the extension with "
                                                "`%load_ext tfgpu_magic`."))
    parts = [paragraph(" ".join(placement_sentences(placement["status"])))]
    summary = placement.get("summary")
    if summary and summary.get("rows"):
        rows = [(r["device"], r["op_type"], "-" if r["executed"] is None else r["executed"], r["placed"])
                for r in summary["rows"]]
        cell = summary.get("cell")
        parts += [title(f"Latest cell{'' if cell is None else f' [{cell}]'}: where its ops ran"),
                  table_html(("device", "op type", "executed", "placed"), rows, right=(2, 3))]
        for fallback in summary.get("fallbacks") or ():
            parts.append(alert(f"asked for {fallback['asked']}, ran on {', '.join(fallback['ran_on'])}: "
                               f"{', '.join(fallback['ops'][:5])}" + (f" ({fallback['reason']})"
                                                                      if fallback.get("reason") else "")))
    return box("panel-placement", *parts)


def matching_records(placement: dict | None, device: str = "", op: str = "") -> list[dict]:
    """Records whose short device starts with ``device`` (``CPU``, ``GPU:0``) and whose op or op type contains
    ``op``, case-insensitive."""
    records = (placement or {}).get("records") or []
    device, op = device.strip().upper(), op.strip().lower()
    return [r for r in records
            if (not device or r["short_device"].upper() == device or r["short_device"].upper().startswith(device + ":"))
            and (not op or op in r["op"].lower() or op in (r.get("op_type") or "").lower())]


def records_html(placement: dict | None, device: str = "", op: str = "") -> str:
    if not placement:
        return ""
    records = matching_records(placement, device, op)
    shown = records[-RECORDS_SHOWN:]
    total = placement.get("total", len(placement.get("records") or ()))
    head = (f"{len(records):,} records match" + (f", the last {len(shown)} shown" if len(shown) < len(records) else "")
            + f" ({total:,} kept)")
    if not records:
        return box("panel-records", paragraph(head + "."))
    rows = [("" if r.get("cell") is None else r["cell"], r["short_device"], r.get("op_type") or "", r["op"],
             r.get("requested") or "") for r in reversed(shown)]
    return box("panel-records", title(head), table_html(("cell", "device", "op type", "op", "asked"), rows, right=(0,)))


# -- the Settings tab ------------------------------------------------------------------------------------
def notice_html(reasons: Sequence[str]) -> str:
    """Why the form's inputs are disabled: each reason once, for the whole tab."""
    return box("panel-notice", *(caution(r) for r in reasons)) if reasons else ""


def in_force_html(state: str, level: str) -> str:
    """What became of a setting, beside its input: the vocabulary's words, a refusal in the alert colour."""
    if not state:
        return ""
    colour = f"color:{ALERT};font-weight:600" if level == "error" else f"color:{MUTED}"
    return (f"<div style=\"font-family:{FONT};font-size:12px;line-height:1.3;white-space:normal;"
            f"overflow-wrap:anywhere;{colour}\">{inline(state)}</div>")


# -- messages ------------------------------------------------------------------------------------------
def message_html(text: str, refused: bool) -> str:
    """The panel's message line; lines after the first are its detail when indented (what did not fit in the first,
    as the magic prints it), else code to paste, shown one line per line as typed."""
    if not text:
        return ""
    first, _, code = text.partition("\n")
    if code.startswith("  "):
        block = f"<div style=\"font-weight:normal;margin:2px 0 0 1.5em\">{esc(' '.join(code.split()))}</div>"
    else:
        block = (f"<pre style=\"font-family:{MONO};color:{TEXT};margin:4px 0 0;white-space:pre;user-select:all\">"
                 f"{esc(code)}</pre>") if code else ""
    if refused:
        return (f"<div style=\"color:{ALERT};font-weight:600;font-family:{FONT}\">&#9888;&nbsp;{esc(first)}"
                f"{block}</div>")
    return f"<div style=\"font-family:{FONT};color:{TEXT}\">{esc(first)}{block}</div>"


def error_html(error: dict | None) -> str:
    if not error:
        return ""
    return box("panel-error", caution(f"The refresh failed {error['count']} time(s); the last at {error['at']}: "
                                      f"{error['message']}{error.get('where', '')}. The panel keeps refreshing."))


__all__ = ["Markup", "Series", "cells_html", "cells_text", "chart_html", "devices_html", "error_html", "header_html",
           "in_force_html", "matching_records", "memory_html", "message_html", "notice_html", "placement_summary_html",
           "records_html", "step_path", "time_ticks"]
