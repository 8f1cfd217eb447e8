"""The text forms: the snapshot in 100 columns (a terminal, the CLI, IPython without HTML), and the sentences
and figures that the HTML views (views.py) share with it. Functions over data already gathered: nothing here
asks TensorFlow or NVML again."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..core import words
from ..core.i18n import N_, _
from ..core.i18n import width as columns
from ..core.inputs import printable
from ..core.nvml import Unavailable
from ..core.nvml import hint as nvml_hint
from ..core.nvml_values import placeable, unattributed
from ..core.runtime import TFState

if TYPE_CHECKING:  # types only: importing the snapshot would load the controller
    from ..core.snapshot import Device, Memory, Snapshot

WIDTH = 100  # every line within it, broken between words; only a single word longer than a line may overflow


def sentence(text: str) -> str:
    """A note as a sentence: a capital first letter, a full stop at the end."""
    text = " ".join(str(text).split())
    if not text:
        return text
    if text[0].islower():
        text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


# -- 100 columns --------------------------------------------------------------------------------------


def fit(text: str, indent: str = "  ", first: str = "", width: int = WIDTH) -> list[str]:
    """One paragraph in lines of at most ``width``, broken between words; a word longer than a line (a
    path, a long name) stays whole, as the one thing that may overflow. Control characters in it (from a
    GPU or process name) are written escaped: text goes to terminals."""
    text = printable(text)
    if columns(text) != len(text):  # wide (CJK) characters: textwrap counts characters, a terminal columns
        return _wrap_wide(text, width, first, indent) or [first.rstrip()]
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [first.rstrip()]


_PIECE = re.compile(r"\s+|[\u1100-\uffff]|[^\s\u1100-\uffff]+")


def _wrap_wide(text: str, width: int, first: str, indent: str) -> list[str]:
    """``fit`` for text with wide characters: lines of at most ``width`` display columns, broken between words or
    between two wide characters (Chinese has no spaces); a word longer than a line stays whole."""
    lines: list[str] = []
    line = first
    for piece in _PIECE.findall(text):
        if piece.isspace():
            piece = " "
            if line.strip() == "":
                continue
        if columns(line) + columns(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = indent
            if piece == " ":
                continue
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: Iterable[int] = (),
               width: int = WIDTH, indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell; the last column (a detail, a process list) wraps between words
    to keep rows within ``width``. A cell may be a list of items (processes): they are joined with commas
    and wrap between items first."""
    right = set(right)
    cells = [[[printable(i) for i in c] if isinstance(c, list) else [printable(c)] for c in row]
             for row in [header, *rows]]
    flat = [[", ".join(c) for c in row] for row in cells]
    # In display columns: a Chinese header (core/i18n.py) takes two per character, and pads as a terminal shows it.
    widths = [max(columns(row[k]) for row in flat) for k in range(len(header))]
    lead = len(indent) + sum(w + 2 for w in widths[:-1])
    # Too little room left: overflow rather than a column of single words; the header stays on one line.
    room = max(width - lead, 24, columns(flat[0][-1]))
    lines = []
    for row, joined in zip(cells, flat, strict=True):
        padded = [(" " * (w - columns(s)) + s) if k in right else (s + " " * (w - columns(s)))
                  for k, (s, w) in enumerate(zip(joined, widths, strict=True))]
        last = _wrap_items(row[-1], room) if columns(joined[-1]) > room else [joined[-1]]
        lines.append((indent + "  ".join([*padded[:-1], last[0]])).rstrip())
        lines += [(" " * lead + more).rstrip() for more in last[1:]]
    return lines


def _wrap_items(items: list[str], room: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 else "")
        if line and columns(line) + 1 + columns(piece) <= room:
            line = f"{line} {piece}"
            continue
        if line:
            lines.append(line)
        parts = fit(piece, indent="", width=room)  # an item longer than the column: between its words
        lines += parts[:-1]
        line = parts[-1]
    return [*lines, line]


def na(value: Any) -> str:
    """A value in a cell: itself, or the vocabulary's "n/a" with its reason (core/words.py)."""
    if value is None:
        return words.MISSING
    if isinstance(value, Unavailable):
        return words.missing(value.reason, value.detail)
    return str(value)


def why(value: Any) -> str:
    """Why a value is missing, for a sentence that already says it is ("unavailable: <why>")."""
    if isinstance(value, Unavailable):
        return words.why(value.reason, value.detail)
    return words.MISSING if value is None else str(value)


def figure(value: Any, unit: str, thousands: bool = True) -> str:
    """A number with its unit; a missing figure is "n/a" and its reason, without a unit."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return na(value)
    return f"{value:,}{unit}" if thousands else f"{value}{unit}"


def memory_used_total(gpu, thousands: bool = True) -> str:
    """"used / total MiB" of one GPU; when both come from one failed call, its reason once."""
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    if isinstance(used, int) and isinstance(total, int):
        return f"{figure(used, '', thousands)} / {figure(total, '', thousands)} MiB"
    if used == total:
        return na(used)
    return f"{figure(used, ' MiB', thousands)} / {figure(total, ' MiB', thousands)}"


def memoryfigure(value: float | None) -> str:
    """MiB with one decimal; an amount too small for it is "< 0.1" and nothing at all "0", never a made-up
    "0.0"; None is no figure."""
    if value is None:
        return ""
    if value == 0:
        return "0"
    if 0 < value < 0.05:
        return "< 0.1"
    return f"{value:,.1f}"


def memory_rows(memory: Sequence[Memory]) -> list[tuple[str, str, str, str]]:
    """Per logical device: current, peak, note. A device sharing another's allocator shows no figures of
    its own (they are the other's, and would be counted twice)."""
    return [(m.device, "" if m.shared_with else memoryfigure(m.current_mib),
             "" if m.shared_with else memoryfigure(m.peak_mib),
             m.note or (f"shares {m.shared_with}'s allocator" if m.shared_with else "")) for m in memory]


# -- placement capture, in sentences ------------------------------------------------------------------------
_ROUTES = {  # translated where said (core/i18n.py)
    "log at import": N_("Placement capture is on: TensorFlow's placement log starts when TensorFlow is imported."),
    "log": N_("Placement capture is on, reading TensorFlow's placement log."),
    "run_metadata": N_("Placement capture is on, reading run metadata only (ops and functions compiled from now on)."),
}
_NOTHING_TO_READ = N_("Placement capture is on, with nothing to read yet.")


def placement_sentences(status: dict) -> list[str]:
    """Placement capture's state (``PlacementController.status()``) as sentences: what it does, what it keeps,
    then its notes. Text: each sentence plain; HTML: each escaped."""
    mode = status.get("mode")
    if mode == "on":
        first = _(_ROUTES.get(status.get("route"), _NOTHING_TO_READ))
    elif mode == "off":
        first = _("Placement capture is off (`%tfgpu placement on` turns it back on).")
    else:
        first = _("Placement capture is off: never switched on (`%tfgpu placement on` shows where each op runs).")
    sentences = [first]
    records, dropped, maxlen = status.get("records", 0), status.get("dropped", 0), status.get("maxlen", 0)
    if mode in ("on", "off") or records or dropped:
        sentences.append(_("{records} records kept, {dropped} dropped (the ring buffer holds {most}).").format(
            records=f"{records:,}", dropped=f"{dropped:,}", most=f"{maxlen:,}"))
    at_init = status.get("tf_log_at_init")
    if at_init is not None:
        sentences.append(_("TensorFlow's placement log was on when its runtime started.") if at_init else
                         _("TensorFlow's placement log was off when its runtime started."))
    return sentences + [sentence(n) for n in status.get("notes") or ()]


# -- the snapshot ---------------------------------------------------------------------------------------


def tf_line(snap: Snapshot) -> str:
    version = f" {snap.tf_version}" if snap.tf_version else ""
    return _("TensorFlow{version}: {state} ({note})").format(version=version, state=snap.tf_state.label,
                                                            note=snap.state_note)


def settings_lines(snap: Snapshot) -> list[str]:
    notes = [line for n in snap.notes for line in fit(_("Note: {note}").format(note=n))]
    if not snap.settings:
        return [_("Settings: none asked (`%tfgpu help` lists them)"), *notes]
    rows = [(s["setting"], s["asked"], words.setting_state(s["status"]), s["detail"]) for s in snap.settings]
    head = (_("setting"), _("asked"), _("status"), _("detail"))
    return [_("Settings:"), *text_table(head, rows), *notes]


def physical_sentence(snap: Snapshot) -> str:
    if snap.physical_devices is None:
        if snap.tf_state < TFState.IMPORTED:  # nothing to list before the import, whatever view asks
            return _("TensorFlow devices: listed once TensorFlow is imported")
        return _("TensorFlow devices: not listed yet (`%tfgpu devices` lists them without starting the runtime)")
    return _("TensorFlow physical devices: {devices}").format(
        devices=", ".join(_device_label(d) for d in snap.physical_devices) or _("none"))


def logical_sentence(snap: Snapshot) -> str | None:
    if snap.logical_devices is None:
        if snap.tf_state >= TFState.IMPORTED:
            return _("TensorFlow logical devices: appear when the runtime starts (its first operation)")
        return None
    return _("TensorFlow logical devices: {devices}").format(
        devices=", ".join(d.name for d in snap.logical_devices) or _("none"))


def device_sentences(snap: Snapshot) -> list[str]:
    if snap.tf_state is TFState.NOT_INSTALLED:
        return []  # the TensorFlow line says it once
    return [line for line in (physical_sentence(snap), logical_sentence(snap)) if line]


def device_lines(snap: Snapshot) -> list[str]:
    return [line for text in device_sentences(snap) for line in fit(text)]


def nvml_versions(snap: Snapshot) -> str:
    def named(label: str, value) -> str:
        # The adapter's details name their field already ("driver version: ..."): no label twice.
        return value.detail if isinstance(value, Unavailable) and value.detail else f"{label} {na(value)}"

    return f"{named('driver', snap.nvml.driver_version)}, {named('CUDA', snap.nvml.cuda_driver_version)}"


def kernel_memory_sentences(snap: Snapshot) -> list[str]:
    lines = []
    for own in snap.kernel_gpu_memory:
        where = f"GPU {own['physical_index']}" if own["physical_index"] is not None else ""
        named = "" if snap.tf_state is TFState.NOT_INSTALLED else f" ({own['tf_name'] or 'not used by TensorFlow'})"
        lines.append(f"This kernel: {where}{named} "
                     f"{figure(own['used_mib'], ' MiB')}, from {words.memory_source(own['source'])}"
                     + (f" ({own['note']})" if own.get("note") else ""))
    return lines


# What nvidia-smi's Type letters mean, for a process that is not compute only (compute is the rest: no mark).
PROCESS_TYPE_WORDS = {"G": "a graphics process, such as a desktop session or an OpenGL or Vulkan program",
                      "C+G": "compute and graphics, its memory counted once"}
PROCESS_TYPE_TITLE = {"G": "a graphics process (nvidia-smi's type G): a desktop session, an OpenGL or Vulkan program",
                      "C+G": "a compute and graphics process (nvidia-smi's type C+G): its memory is counted once"}


def process_type_mark(proc) -> str:
    """" (G)" or " (C+G)" after a process's name, as nvidia-smi's Type column types it; "" for a compute process."""
    return f" ({proc.type})" if proc.type in PROCESS_TYPE_WORDS else ""


def placed(procs, pids: dict | None):
    """The processes a view lists as rows. In a container (``pids``: NvmlSnapshot.pids) NVML's numbers are the
    host's: a process that is not this one and that no host view names would be a row of a number that means
    nothing here, so it is left out and counted in the device's unattributed line instead (nvml_values.unattributed
    counts the same ones). On the host: every process."""
    if pids is None or pids.get("comparable", True) or not isinstance(procs, tuple):
        return procs
    return tuple(p for p in procs if placeable(p))


def process_types_sentence(snap: Snapshot) -> str:
    """What the marks in the process column mean, for the marks it has; "" where every process is compute only (a
    sentence under the table, not a longer column header: that would squeeze the GPU names)."""
    found = {p.type for procs in snap.nvml.listed_processes() for p in placed(procs, snap.nvml.pids)}
    parts = [f"({kind}) {meaning}" for kind, meaning in PROCESS_TYPE_WORDS.items() if kind in found]
    return f"Processes marked as nvidia-smi types them: {'; '.join(parts)}." if parts else ""


def unattributed_sentence(procs, pids: dict | None) -> str:
    """"12,288 MiB held by 2 processes this kernel cannot attribute: ..." for one GPU's or MIG device's list, or ""
    (on the host, or nothing to say)."""
    found = unattributed(procs, pids)
    if found is None:
        return ""
    return words.unattributed_line(*found, _("this kernel"), (pids or {}).get("view") or "none")


def device_unattributed(snap: Snapshot) -> list[tuple[str, str]]:
    """(where, sentence) for each GPU or MIG device with memory this kernel cannot attribute: "GPU 0", "GPU 0/1".
    A GPU in MIG mode says its devices' lines, not its own (its list is their union: counted once)."""
    pids = snap.nvml.pids
    if pids is None or pids.get("comparable", True):
        return []
    found = []
    for gpu in snap.nvml.gpus:
        if gpu.error is not None:
            continue
        if gpu.mig_devices:
            found += [(f"GPU {gpu.index}/{mig.index}", unattributed_sentence(mig.processes, pids))
                      for mig in gpu.mig_devices]
        else:
            found.append((f"GPU {gpu.index}", unattributed_sentence(gpu.processes, pids)))
    return [(where, said) for where, said in found if said]


def pids_sentence(snap: Snapshot) -> str:
    """Whose numbers the PIDs are, once, where they are not this kernel's ("" on the host)."""
    pids = snap.nvml.pids
    if pids is None or pids.get("comparable", True) or not pids.get("note"):
        return ""
    return f"PIDs: {pids['note']}"


# The process column's item for a device's unattributed processes: the sentence is under the table (too long for a
# column), and the column must not read "-" (nothing) when memory is held there.
def unattributed_item(count: int) -> str:
    return f"{count} unattributed (see below)"


def process_items(procs, pids: dict | None = None) -> str | list[str]:
    """A process column: its reason when NVML gave none, else one item a process (the column wraps between
    processes before it wraps inside one); in a container, the processes this kernel cannot place as one item."""
    if isinstance(procs, Unavailable):
        return na(procs)  # the column says these are processes; the detail often does too
    # "PID 4242": a bare number beside a name reads like a count of something.
    items = [f"PID {p.pid}{'*' if p.is_self else ''} {p.name or words.NO_NAME}{process_type_mark(p)} "
             + (words.MISSING if p.used_mib is None else f"{p.used_mib} MiB") for p in placed(procs, pids)]
    found = unattributed(procs, pids)
    if found is not None:
        items.append(unattributed_item(found[0]))
    return items or "-"


def mig_label(snap: Snapshot, mig) -> str:
    """"MIG 3g.20gb MIG-5e8b9c1d": the profile and the shortest unique start of its UUID (12 characters or more),
    which `%tfgpu visible` takes."""
    uuid = mig.uuid if isinstance(mig.uuid, str) else na(mig.uuid)
    others = [m.uuid.lower() for _parent, m in snap.nvml.mig_devices() if isinstance(m.uuid, str) and m.uuid != uuid]
    size = 12
    while size < len(uuid) and any(o.startswith(uuid[:size].lower()) for o in others):
        size += 1
    return f"MIG {na(mig.profile)} {uuid[:size]}"


PROCESS_HEAD = N_("processes (*: this kernel)")  # the GPU table's last head (the CLI says "this command")


def gpu_lines(snap: Snapshot) -> list[str]:
    if not snap.nvml.available:
        more = nvml_hint(snap.nvml.error)
        return fit(_("GPUs (NVML): unavailable: {why}").format(why=why(snap.nvml.error))) + (
            fit(more, first="  ") if more else [])
    head = _("GPUs (NVML, {versions}):").format(versions=nvml_versions(snap))
    if not snap.nvml.gpus:
        if snap.nvml.error is not None:  # no list because the count failed: "none" would be untrue
            # One line, unwrapped: the head and why the count failed belong together.
            return [printable(head + " " + _("{missing}: the count could not be read ({why})").format(
                missing=words.MISSING, why=why(snap.nvml.error)))]
        return [printable(head + " " + _("none"))]
    rows = []
    for gpu in snap.nvml.gpus:
        tf_name = snap.tf_gpu_names.get(gpu.index, _("not seen") if snap.no_gpu else "-") if snap.given(gpu.index) \
            else _("not given")
        if gpu.error is not None:
            name = gpu.name if isinstance(gpu.name, str) else words.NO_NAME
            rows.append((str(gpu.index), tf_name, name, _("unavailable: {why}").format(why=why(gpu.error)), "", ""))
            continue
        memory = memory_used_total(gpu, thousands=False)
        proc_text = process_items(gpu.processes, snap.nvml.pids)
        utilization = figure(gpu.utilization_gpu_pct, "%", thousands=False) if gpu.mig_mode is not True else "-"
        name = na(gpu.name) + (" " + _("(MIG mode)") if gpu.mig_mode is True else "")
        rows.append((str(gpu.index), tf_name, name, memory, utilization, proc_text))
        for mig in gpu.mig_devices:
            given = snap.given_mig(mig.uuid, gpu.index)
            rows.append((f"{gpu.index}/{mig.index}", "-" if given else _("not given"), mig_label(snap, mig),
                         memory_used_total(mig, thousands=False), "-", process_items(mig.processes, snap.nvml.pids)))
    header = ("GPU", "TensorFlow", _("name"), _("memory used/total"), _("util"), _(PROCESS_HEAD))  # as the HTML
    lines = [printable(head), *text_table(header, rows)]
    for where, said in device_unattributed(snap):
        lines += fit(f"{where}: {said}")
    if pids_sentence(snap):
        lines += fit(pids_sentence(snap))
    if process_types_sentence(snap):
        lines += fit(process_types_sentence(snap))
    not_given = snap.not_given_sentence()
    if not_given:
        lines += fit(printable(not_given))
    if snap.no_gpu:
        lines += fit(printable(snap.no_gpu))
    for index, claim in sorted(snap.claims.items()):
        lines += fit(printable(f"GPU {index}: {claim}"))
    if snap.numbering.get("note"):
        lines += fit(_("Numbering: {note}").format(note=snap.numbering["note"]))
    lines += [line for text in kernel_memory_sentences(snap) for line in fit(text)]
    return lines


def memory_lines(snap: Snapshot) -> list[str]:
    if snap.tf_state is TFState.NOT_INSTALLED:
        return ["TensorFlow memory: none (TensorFlow is not installed)"]
    if snap.memory is None:
        return ["TensorFlow memory: nothing allocated yet (the runtime has not started)"]
    return ["TensorFlow allocator memory (MiB):",
            *text_table(("device", "current", "peak", "note"), memory_rows(snap.memory), right=(1, 2))]


def placement_lines(snap: Snapshot) -> list[str]:
    """Placement capture as sentences (what it does, what it keeps), then each of its notes."""
    if not snap.placement:
        return []
    sentences = placement_sentences(snap.placement)
    notes = len(snap.placement.get("notes") or ())
    said = sentences[:len(sentences) - notes]
    return fit(" ".join(said)) + [line for n in sentences[len(said):] for line in fit(n, first="  ", indent="    ")]


def devices_text(snap: Snapshot) -> str:
    return "\n".join([*fit(tf_line(snap)), *device_lines(snap), *gpu_lines(snap)])


def status_text(snap: Snapshot) -> str:
    lines = [*fit(tf_line(snap)), *settings_lines(snap), *device_lines(snap), *gpu_lines(snap),
             *placement_lines(snap)]
    return "\n".join(lines)


def _device_label(device: Device) -> str:
    if device.physical_index is not None:
        return f"{device.name} (physical GPU {device.physical_index})"
    return device.name
