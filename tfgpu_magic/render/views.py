"""How the snapshot and placement capture's state read in a notebook (HTML), and the HTML pieces every view
shares (colours, boxes, tables). The sentences and figures come from text.py, so both forms say the same.
Functions over data already gathered: nothing here asks TensorFlow or NVML again, and nothing imports IPython.

Colours and fonts are JupyterLab's CSS variables, so its light and dark themes both work, each with a plain
fallback for front ends without them (nbviewer, the classic Notebook, GitHub). The fallbacks are chosen for a
light page: no single colour reaches 4.5:1 against both white and JupyterLab's dark #111. Warnings are not
written in ``--jp-warn-color0``: light's #e65100 is 3.8:1 on white, below WCAG AA for text; it marks them as
a stripe instead (3:1 is enough for a mark that is not text), and fallbacks and refusals use
``--jp-error-color1`` (4.98:1 in light, 5.13:1 in dark). tests/render/test_views.py measures all of this
against the installed themes.

Every piece of text that comes from data (GPU and process names, op names, notes, settings) goes through
``html.escape``; markup is only ever added around escaped text."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import words
from ..core.i18n import _
from ..core.nvml import Unavailable
from ..core.nvml import hint as nvml_hint
from ..core.nvml_values import unattributed
from ..core.runtime import TFState
from .text import (
    PROCESS_TYPE_TITLE,
    device_sentences,
    figure,
    kernel_memory_sentences,
    logical_sentence,
    memory_lines,
    memory_rows,
    memory_used_total,
    mig_label,
    na,
    nvml_versions,
    physical_sentence,
    pids_sentence,
    placed,
    placement_sentences,
    process_types_sentence,
    sentence,
    unattributed_item,
    unattributed_sentence,
    why,
)

if TYPE_CHECKING:  # types only: importing the snapshot would load the controller
    from ..core.snapshot import Snapshot

# -- colours and fonts --------------------------------------------------------------------------------------
TEXT = "var(--jp-content-font-color1, inherit)"
ALERT = "var(--jp-error-color1, #c62828)"  # text: refused settings, placement fallbacks
CAUTION_STRIPE = "var(--jp-warn-color0, #e65100)"  # a mark beside a caution, never text
RULE = "var(--jp-border-color2, #e0e0e0)"
HEAD_RULE = "var(--jp-border-color1, #bdbdbd)"
FONT = "var(--jp-ui-font-family, system-ui, -apple-system, 'Segoe UI', sans-serif)"
FONT_SIZE = "var(--jp-ui-font-size1, 13px)"
MONO = "var(--jp-code-font-family, ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace)"

_BOX = (f"font-family:{FONT};font-size:{FONT_SIZE};color:{TEXT};line-height:1.45;text-align:left;"
        "max-width:100%;overflow-x:auto")
# JupyterLab right-aligns rendered table cells and stripes the rows; its stripes would put the alert colour on
# a darker background (4.4:1 in dark), so rows stay on the page's own. The <table> itself keeps JupyterLab's
# style (collapsed borders, left in an output) and no attributes.
_ROW = "background:transparent"
# Narrow gaps and headers that may wrap ("memory used / total"): the status table fits an output beside an open
# sidebar at a laptop's width (1280 px) instead of scrolling sideways; figures stay on one line (_RIGHT).
_CELL = "padding:3px 10px 3px 0;line-height:1.4;word-break:normal;overflow-wrap:break-word"
_TH = f"{_CELL};vertical-align:bottom;font-weight:600;white-space:normal;border-bottom:1px solid {HEAD_RULE}"
_TD = f"{_CELL};vertical-align:top;white-space:normal;border-bottom:1px solid {RULE}"
_LEFT = "text-align:left"
_RIGHT = "text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
_P = "margin:2px 0 6px 0;padding:0;text-align:left"
_TITLE = "margin:10px 0 2px 0;padding:0;font-weight:600;text-align:left"
_CAUTION = f"{_P};padding-left:8px;border-left:3px solid {CAUTION_STRIPE}"
_ALERT = f"{_P};color:{ALERT};font-weight:600"

class Markup(str):
    """HTML built here around escaped text; a table cell that is Markup is not escaped again."""


@dataclass(frozen=True)
class Cell:
    content: str | Markup
    span: int = 1
    style: str = ""


def esc(value: Any) -> str:
    return html.escape(str(value))


_CODE = re.compile(r"`([^`]+)`")


def inline(text: str) -> Markup:
    """Escaped text, with `backticked` spans as code (the notes and messages quote commands that way)."""
    return Markup(_CODE.sub(r"<code>\1</code>", esc(text)))


def box(kind: str, *parts: str) -> str:
    return f"<div class='tfgpu-view tfgpu-{kind}' style=\"{_BOX}\">{''.join(parts)}</div>"


def paragraph(text: str, style: str = _P) -> str:
    return f"<p style=\"{style}\">{inline(text)}</p>"


def title(text: str) -> str:
    return f"<div style=\"{_TITLE}\">{inline(text)}</div>"


def caution(text: str) -> str:
    return paragraph(sentence(text), _CAUTION)


def alert(text: str) -> str:
    """A line the reader must not miss (a placement fallback): the alert colour, bold, and a sign, so colour is
    not the only cue."""
    return f"<p style=\"{_ALERT}\">&#9888;&nbsp;{inline(text)}</p>"


def table_html(header: Sequence[str], rows: Iterable[Sequence[Any]], right: Iterable[int] = ()) -> str:
    """A table with a header row. Cells are escaped unless they are Markup (or a Cell holding Markup);
    columns in ``right`` hold figures and align right."""
    right = set(right)

    def align(k: int) -> str:
        return _RIGHT if k in right else _LEFT

    head = "".join(f"<th style=\"{_TH};{align(k)}\">{esc(h)}</th>" for k, h in enumerate(header))
    body = []
    for row in rows:
        cells, k = [], 0
        for value in row:
            cell = value if isinstance(value, Cell) else Cell(value)
            content = cell.content if isinstance(cell.content, Markup) else esc(cell.content)
            span = f" colspan='{cell.span}'" if cell.span > 1 else ""
            cells.append(f"<td{span} style=\"{_TD};{align(k)}{';' + cell.style if cell.style else ''}\">"
                         f"{content}</td>")
            k += cell.span
        body.append(f"<tr style=\"{_ROW}\">{''.join(cells)}</tr>")
    return f"<table><thead><tr style=\"{_ROW}\">{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# -- placement capture ----------------------------------------------------------------------------------
_ROUTE_WORDS = {"log at import": "TensorFlow's log, from its import", "log": "TensorFlow's placement log",
                "run_metadata": "run metadata (newly compiled ops)", "none": "nothing yet"}


def placement_status_html(status: dict) -> str:
    """``%tfgpu placement status``: one sentence on what capture does, its figures in a table, its notes."""
    first, *_rest = placement_sentences(status)
    at_init = {True: "on", False: "off", None: "not started yet"}[status.get("tf_log_at_init")]
    capture = {"on": "on", "off": "off"}.get(status.get("mode"), "off (never switched on)")
    row = (capture, _ROUTE_WORDS.get(status.get("route"), str(status.get("route"))),
           f"{status.get('records', 0):,}", f"{status.get('dropped', 0):,}", f"{status.get('maxlen', 0):,}", at_init)
    header = ("capture", "reads", "records kept", "dropped", "ring buffer", "TensorFlow's log at its start")
    notes = [caution(n) for n in status.get("notes") or ()]
    return box("placement", paragraph(first), table_html(header, [row], right=(2, 3, 4)), *notes)


# -- the snapshot ---------------------------------------------------------------------------------------


def _tf_head(snap: Snapshot) -> str:
    version = f" {snap.tf_version}" if snap.tf_version else ""
    return (f"<p style=\"{_P}\"><b>TensorFlow{esc(version)}: {esc(snap.tf_state.label)}.</b> "
            f"{inline(sentence(snap.state_note))}</p>")


def state_cell(status: str) -> Cell:
    """What became of a setting, in the vocabulary's words; a bad end in the alert colour."""
    error = words.setting_level(status) == "error"
    return Cell(words.setting_state(status), style=f"color:{ALERT};font-weight:600" if error else "")


def _settings(snap: Snapshot) -> str:
    if not snap.settings:
        return paragraph("Settings: none asked (`%tfgpu help` lists them).")
    rows = []
    for s in snap.settings:
        status = str(s.get("status", ""))
        rows.append((s.get("setting", ""), s.get("asked", ""), state_cell(status), sentence(s.get("detail", "")) or ""))
    return title("Settings") + table_html(("setting", "asked", "status", "detail"), rows)


def _gpu_rows(snap: Snapshot) -> list[tuple]:
    rows = []
    for gpu in snap.nvml.gpus:
        tf_name = snap.tf_gpu_names.get(gpu.index, "not seen" if snap.no_gpu else "-") if snap.given(gpu.index) \
            else "not given"
        if gpu.error is not None:
            name = gpu.name if isinstance(gpu.name, str) else words.NO_NAME
            rows.append((str(gpu.index), tf_name, name,
                         Cell(Markup(f"<span style=\"color:{ALERT};font-weight:600\">unavailable:</span> "
                                     f"{esc(why(gpu.error))}"), span=4, style=_LEFT)))
            continue
        mig_mode = gpu.mig_mode is True
        utilization = "-" if mig_mode else figure(gpu.utilization_gpu_pct, "%")
        rows.append((str(gpu.index), tf_name, na(gpu.name) + (" (MIG mode)" if mig_mode else ""),
                     memory_used_total(gpu), utilization, figure(gpu.temperature_c, " °C"),
                     _processes_cell(gpu.processes, snap.nvml.pids, whole=not gpu.mig_devices)))
        for mig in gpu.mig_devices:  # each MIG device a row under its parent, named as `visible` takes it
            given = "-" if snap.given_mig(mig.uuid, gpu.index) else "not given"
            rows.append((f"{gpu.index}/{mig.index}", given, mig_label(snap, mig), memory_used_total(mig), "-", "-",
                         _processes_cell(mig.processes, snap.nvml.pids)))
    return rows


def _processes_cell(procs, pids: dict | None = None, whole: bool = True) -> str | Markup:
    """One process a line; in a container, the processes this kernel cannot place as one sentence after them
    (``whole``), or, for a GPU in MIG mode whose devices' rows say theirs, as a count that points there."""
    if isinstance(procs, Unavailable):
        return na(procs)
    # One process a line, each kept whole: a narrow table wraps between processes, not inside one.
    lines = ["<span style='white-space:nowrap'>"
             + esc(f"PID {p.pid}{'*' if p.is_self else ''} {p.name or words.NO_NAME}")
             + _type_mark(p) + esc(" " + (words.MISSING if p.used_mib is None else f"{p.used_mib:,} MiB")) + "</span>"
             for p in placed(procs, pids)]
    found = unattributed(procs, pids)
    if found is not None:
        said = sentence(unattributed_sentence(procs, pids)) if whole else unattributed_item(found[0])
        lines.append(f"<span class='tfgpu-unattributed'>{esc(said)}</span>")
    return Markup("<br>".join(lines) or "-")


def _type_mark(proc) -> str:
    """" (G)" with its meaning on hover (and for a screen reader, which reads an abbr's title); "" for compute."""
    if proc.type not in PROCESS_TYPE_TITLE:
        return ""
    return f" (<abbr title=\"{esc(PROCESS_TYPE_TITLE[proc.type])}\">{esc(proc.type)}</abbr>)"


def _gpus(snap: Snapshot) -> str:
    nvml = snap.nvml
    if not nvml.available:
        more = nvml_hint(nvml.error)
        return title("GPUs (NVML)") + paragraph(sentence(f"unavailable: {why(nvml.error)}")) + (
            paragraph(sentence(more)) if more else "")
    head = title(f"GPUs (NVML, {nvml_versions(snap)})")
    if not nvml.gpus:
        if nvml.error is not None:  # no list because the count failed: "none" would be untrue
            return head + paragraph(sentence(f"{words.MISSING}: the count could not be read ({why(nvml.error)})"))
        return head + paragraph("None.")
    header = ("GPU", "TensorFlow", "name", "memory used / total", "utilization", "temperature",
              "processes (*: this kernel)")
    parts = [head, table_html(header, _gpu_rows(snap), right=(3, 4, 5))]
    if pids_sentence(snap):
        parts.append(paragraph(sentence(pids_sentence(snap))))
    if process_types_sentence(snap):
        parts.append(paragraph(process_types_sentence(snap)))
    not_given = snap.not_given_sentence()
    if not_given:
        parts.append(caution(not_given))
    if snap.no_gpu:
        parts.append(caution(snap.no_gpu))
    parts += [paragraph(sentence(f"GPU {index}: {claim}")) for index, claim in sorted(snap.claims.items())]
    if snap.numbering.get("note"):
        parts.append(caution(_("Numbering: {note}").format(note=snap.numbering["note"])))
    parts += [paragraph(sentence(line)) for line in kernel_memory_sentences(snap)]
    return "".join(parts)


def _notes(snap: Snapshot) -> list[str]:
    return [caution(n) for n in snap.notes]


def _placement(snap: Snapshot) -> str:
    if not snap.placement:
        return ""
    sentences = placement_sentences(snap.placement)
    notes = len(snap.placement.get("notes") or ())
    said = sentences[:len(sentences) - notes]
    return title("Placement capture") + paragraph(" ".join(said)) + "".join(caution(n) for n in sentences[len(said):])


def status_html(snap: Snapshot) -> str:
    """``%tfgpu status``: TensorFlow's state, the settings, the devices, the GPUs, notes, placement capture."""
    devices = "".join(paragraph(sentence(line)) for line in device_sentences(snap))
    return box("status", _tf_head(snap), _settings(snap), title("Devices") + devices if devices else "", _gpus(snap),
               *_notes(snap), _placement(snap))


def devices_html(snap: Snapshot) -> str:
    """``%tfgpu devices``: TensorFlow's physical and logical devices with nvidia-smi's numbers, and the GPUs."""
    rows = []
    for kind, devices in (("physical", snap.physical_devices), ("logical", snap.logical_devices)):
        for device in devices or ():
            physical = _physical_index(snap, device)
            rows.append((device.name, device.device_type, kind, "" if physical is None else str(physical)))
    if snap.tf_state is TFState.NOT_INSTALLED:  # the head says it once; there are no TensorFlow devices
        return box("devices", _tf_head(snap), _gpus(snap), *_notes(snap))
    parts = [_tf_head(snap), title("TensorFlow devices")]
    if rows:
        parts.append(table_html(("TensorFlow name", "type", "kind", "nvidia-smi GPU"), rows))
    # What is not listed, and why (listing it would start what the user may still configure).
    if snap.physical_devices is None:
        parts.append(paragraph(sentence(physical_sentence(snap))))
    elif snap.logical_devices is None and logical_sentence(snap):
        parts.append(paragraph(sentence(logical_sentence(snap))))
    return box("devices", *parts, _gpus(snap), *_notes(snap))


def _physical_index(snap: Snapshot, device) -> int | None:
    """nvidia-smi's number of a TensorFlow device: physical GPUs carry it; a logical GPU has its physical
    GPU's name unless a virtual split makes several logical GPUs of one."""
    if device.device_type != "GPU":
        return None
    if device.kind == "physical":
        return device.physical_index
    logical_gpus = [d for d in snap.logical_devices or () if d.device_type == "GPU"]
    if len(logical_gpus) != len(snap.tf_gpu_names):
        return None
    return next((index for index, name in snap.tf_gpu_names.items() if name == device.name), None)


def memory_html(snap: Snapshot) -> str:
    """``%tfgpu memory``: TensorFlow's allocator per logical device, current and peak MiB."""
    if snap.memory is None:
        return box("memory", paragraph(sentence(memory_lines(snap)[0])))
    rows = [(d, c, p, sentence(n) if n else "") for d, c, p, n in memory_rows(snap.memory)]
    return box("memory", title("TensorFlow allocator memory (MiB)"),
               table_html(("device", "current MiB", "peak MiB", "note"), rows, right=(1, 2)))
