"""HTML of placement capture's results and of TensorFlow's log per cell: a cell's summary, the ``show``
listing, a log block. The IPython face registers these as the HTML form of the core's objects
(ipython/magics.py), so a summary shown or returned by a cell renders as a table, and a plain Python caller
gets the same HTML from these functions."""

from __future__ import annotations

import html
from typing import Any

from ..core.i18n import ngettext
from ..core.placement.summary import CellSummary, RecordTable
from ..core.tflog import LogBlock
from .views import ALERT, CAUTION_STRIPE, FONT, FONT_SIZE, TEXT, alert, box, caution, table_html, title


def summary_html(summary: CellSummary) -> str:
    parts = [title(summary.heading())]
    # A fallback in JupyterLab's error colour, readable (WCAG AA) in its light and dark themes.
    parts += [alert(f.text()) for f in summary.fallbacks]
    if summary.rows:
        parts.append(table_html(summary.HEADER, summary.table_rows(), right=(2, 3)))
    parts += [caution(f"note: {n}") for n in summary.notes]
    return box("placement", *parts)


def record_table_html(table: RecordTable) -> str:
    rows = table_html(table.HEADER, table.table_rows(), right=(0,)) if table.records else ""
    note = table.footnote()
    return box("placement", title(table.heading()), caution(note) if note else "", rows)


def log_block_html(block: LogBlock) -> str:
    """Warnings and errors in the alert colour, information in the page's own; a stripe marks the block."""
    shown = block.shown_lines()
    folded = [ln for ln in block.lines if ln not in shown]
    loud = block.highest != "I"
    rows = "".join(f"<div><code>{html.escape(line.severity)} {html.escape(line.where)}]</code> "
                   f"{html.escape(line.message)}</div>" for line in shown)
    details = ""
    if folded:
        body = "".join(f"<div><code>{html.escape(line.text)}</code></div>" for line in folded)
        said = ngettext("{n} info line folded", "{n} info lines folded", len(folded)).format(n=len(folded))
        details = f"<details><summary>{html.escape(said)}</summary>{body}</details>"
    stripe = CAUTION_STRIPE if loud else "var(--jp-border-color1, #bdbdbd)"
    title_colour = ALERT if loud else TEXT
    return (f"<div class='tfgpu-tflog' style='border-left:3px solid {stripe};padding-left:8px;"
            f"font-family:{FONT};font-size:{FONT_SIZE};color:{TEXT};text-align:left'>"
            f"<div style='color:{title_colour};font-weight:600'>{html.escape(block.heading())}</div>"
            f"{rows}{details}</div>")


def html_of(obj: Any) -> str:
    """The HTML form of a summary, a listing or a log block (what the IPython face registers for the three)."""
    if isinstance(obj, CellSummary):
        return summary_html(obj)
    if isinstance(obj, RecordTable):
        return record_table_html(obj)
    if isinstance(obj, LogBlock):
        return log_block_html(obj)
    raise TypeError(f"no HTML form for {type(obj).__name__}")  # a bug in the face that registered it
