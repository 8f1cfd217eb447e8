"""The OOM card (core/oom.py's data) as text and as HTML, for the frontends that do not render its JSON (the
classic Notebook, VS Code, nbviewer, a terminal). Both forms say the same things in the same order: what failed,
what was asked, the cause, the figures (this kernel's TensorFlow, the GPU or host memory, who holds the GPU), the
settings in force and the next steps. Every value from the data is escaped (HTML) or made printable (text)."""

from __future__ import annotations

from typing import Any

from ..core.inputs import printable
from ..core.oom import Asked, size_text
from .text import fit, sentence
from .views import box, esc, paragraph, table_html, title

_EXACT = "{:,} bytes"


def _bytes(value: Any) -> str:
    return size_text(value) if isinstance(value, int) else "n/a"


def headline(data: dict) -> str:
    asked = data.get("asked") or {}
    device = asked.get("device") or "an unknown device"
    where = "host memory" if data.get("kind") == "cpu" else (
        f"GPU {data['physical_index']}" if data.get("physical_index") is not None else "GPU")
    cell = f" in cell {data['execution_count']}" if data.get("execution_count") is not None else ""
    return f"Out of memory on {device} ({where}){cell}: {data.get('error') or 'error'}"


def asked_line(data: dict) -> str:
    asked = Asked.from_dict(data.get("asked") or {})
    parts = []
    if isinstance(asked.bytes, int):
        parts.append(f"{size_text(asked.bytes)} ({_EXACT.format(asked.bytes)})")
    else:
        parts.append("an amount the message does not give")
    if asked.dtype and asked.shape is not None:
        parts.append(f"a {asked.dtype} tensor of shape {list(asked.shape)}")
    if asked.allocator:
        parts.append(f"allocator {asked.allocator}")
    return "TensorFlow asked for " + ", ".join(parts)


def memory_line(data: dict) -> str:
    tf = data.get("tf_memory") or {}
    device = (data.get("asked") or {}).get("device") or "its device"
    if tf.get("current_bytes") is None and tf.get("peak_bytes") is None:
        return f"This kernel's TensorFlow on {device}: no allocator figures"
    return (f"This kernel's TensorFlow on {device}: {_bytes(tf.get('current_bytes'))} in use, "
            f"{_bytes(tf.get('peak_bytes'))} at its peak")


def room_line(data: dict) -> str | None:
    if data.get("kind") == "cpu":
        host = data.get("host") or {}
        if not host:
            return None
        return f"Host memory: {_bytes(host.get('available_bytes'))} available of {_bytes(host.get('total_bytes'))}"
    gpu = data.get("gpu")
    device = (data.get("asked") or {}).get("device")
    label = f"GPU {data['physical_index']}" if data.get("physical_index") is not None else "The GPU"
    if not gpu:
        note = data.get("gpu_note") or "NVML is not available"
        return f"{label} ({device}): no figures ({note})"
    name = f"{gpu['name']}, " if gpu.get("name") else ""
    return f"{label} ({name}TensorFlow's {device}): {_bytes(gpu.get('free_bytes'))} free of " \
           f"{_bytes(gpu.get('total_bytes'))}"


def holder_items(data: dict) -> list[str]:
    return [f"{h.get('text')}: {_bytes(h.get('bytes'))}" for h in data.get("holders") or ()]


def settings_text(data: dict) -> str:
    rows = data.get("settings") or []
    return ", ".join(f"{name} {value}" for name, value in rows) if rows else "none asked (TensorFlow's defaults)"


def to_text(data: dict) -> str:
    """The card in at most 100 columns."""
    lines = [*fit(f"tfgpu: {headline(data)}", indent="  "),
             *fit(str(data.get("message") or ""), first="  ", indent="    "),
             *fit(sentence(asked_line(data)), first="  ", indent="    "),
             *fit(f"Cause: {data.get('cause') or ''}", first="  ", indent="    "),
             *fit(sentence(memory_line(data)), first="  ", indent="    ")]
    room = room_line(data)
    if room:
        lines += fit(sentence(room), first="  ", indent="    ")
    if data.get("kind") == "gpu":
        held = holder_items(data)
        lines += fit("Held by: " + ("; ".join(held) if held else "no process NVML lists"), first="  ", indent="    ")
    lines += fit(f"Settings in force: {settings_text(data)}", first="  ", indent="    ")
    steps = data.get("steps") or []
    if steps:
        lines.append("  Next:")
        for step in steps:
            magic = f"{step['magic']}: " if step.get("magic") else ""
            lines += fit(f"{magic}{step.get('why') or ''}", first="    - ", indent="      ")
    return "\n".join(printable(line) for line in lines)


def to_html(data: dict) -> str:
    """The card as one box of the project's views: escaped text, JupyterLab's CSS variables, tfgpu-oom classes."""
    parts = [f"<div class='tfgpu-oom-head'>{title(headline(data))}</div>",
             f"<pre class='tfgpu-oom-message' style=\"margin:2px 0 6px 0;white-space:pre-wrap\">"
             f"{esc(data.get('message') or '')}</pre>",
             paragraph(sentence(asked_line(data))),
             f"<div class='tfgpu-oom-cause'>{paragraph('Cause: ' + str(data.get('cause') or ''))}</div>",
             paragraph(sentence(memory_line(data)))]
    room = room_line(data)
    if room:
        parts.append(paragraph(sentence(room)))
    holders = data.get("holders") or []
    if data.get("kind") == "gpu" and holders:
        rows = [(h.get("text") or "", str(h.get("pid") if h.get("pid") is not None else ""),
                 h.get("user") or "", _bytes(h.get("bytes"))) for h in holders]
        parts.append(f"<div class='tfgpu-oom-holders'>{table_html(('held by', 'pid', 'user', 'memory'), rows, (1, 3))}"
                     "</div>")
    parts.append(paragraph(f"Settings in force: {settings_text(data)}"))
    steps = data.get("steps") or []
    if steps:
        items = "".join(
            f"<li>{'<code>' + esc(s['magic']) + '</code>: ' if s.get('magic') else ''}{esc(s.get('why') or '')}</li>"
            for s in steps)
        parts.append(f"<div class='tfgpu-oom-steps'>{title('Next')}<ul style=\"margin:2px 0 6px 0\">{items}</ul>"
                     "</div>")
    return box("oom", *parts)


__all__ = ["headline", "to_html", "to_text"]
