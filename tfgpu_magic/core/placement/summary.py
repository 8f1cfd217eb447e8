"""Summaries of placement records: op types per device for one cell, fallbacks (ops that ran elsewhere than
asked), and the ``show`` listing. Data with a text form; their HTML is render/placement.py's.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .records import PLUMBING_OPS, PlacementRecord, base_op_type, parse_device

# --- summaries ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRow:
    device: str  # short name, e.g. "CPU:2"
    op_type: str
    executed: int | None  # eager executions ("Executing op" lines); None: not seen (run metadata only)
    placed: int  # graph nodes placed (placer lines, run metadata)


@dataclass(frozen=True)
class Fallback:
    """Ops that ran somewhere other than the device the cell asked for."""

    asked: str
    ran_on: tuple[str, ...]
    ops: tuple[str, ...]
    reason: str = ""

    def text(self) -> str:
        ran = ", ".join(self.ran_on) if self.ran_on else "another device"
        ops = f" ({', '.join(self.ops)})" if self.ops else ""
        reason = f"; {self.reason}" if self.reason else ""
        return f"fallback: asked {self.asked}, ran on {ran}{ops}{reason}"


def find_fallbacks(
    records: Sequence[PlacementRecord],
    requested: str | None = None,
    asked_in_source: Sequence[str] = (),
    existing: Iterable[str] | None = None,
) -> tuple[Fallback, ...]:
    """``requested``: the device a whole cell ran under (``%%tfgpu device``): every op elsewhere is a
    fallback. ``asked_in_source``: device strings of ``tf.device("...")`` literals in a plain cell; those
    ops cannot be told apart from the cell's others, so one is flagged only when no such device exists
    (``existing``: short names of the logical devices), which under soft placement means it fell back."""
    out = []
    ops = [r for r in records if r.op_type not in PLUMBING_OPS]
    want = parse_device(requested) if requested else None
    existing_specs = {parse_device(d) for d in existing} if existing is not None else None
    if want is not None:
        missing = (f"there is no {want.short}" if existing_specs is not None and want not in existing_specs
                   else "")
        elsewhere = [r for r in ops if parse_device(r.device) != want]
        if elsewhere:
            ran_on = tuple(dict.fromkeys(r.short_device for r in elsewhere))
            op_types = tuple(dict.fromkeys(r.op_type or r.op for r in elsewhere))
            out.append(Fallback(requested, ran_on, op_types, missing))
        elif missing:
            out.append(Fallback(requested, (), (), missing))
    for asked in dict.fromkeys(asked_in_source):
        spec = parse_device(asked)
        if spec is None or existing_specs is None or spec in existing_specs or spec == want:
            continue
        ran_on = tuple(dict.fromkeys(r.short_device for r in ops))
        # The literal may sit in a branch that never ran: say what is known, not more.
        out.append(Fallback(asked, ran_on, (), f"there is no {spec.short} here: ops placed under it, "
                                               "if that code ran, were moved by soft placement"))
    return tuple(out)


_TF_DEVICE_LITERAL = re.compile(r"""\bdevice\(\s*[rRbBuU]?(['"])([^'"\n]+)\1\s*\)""")


def devices_in_source(source: str) -> list[str]:
    """Device strings in ``tf.device("...")`` / ``device('...')`` literals of a cell's source."""
    return [m.group(2) for m in _TF_DEVICE_LITERAL.finditer(source)]


def _table_text(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]


@dataclass(frozen=True, repr=False)
class CellSummary:
    """Op types per device for one cell, with fallbacks flagged. Its repr is its text form."""

    cell: int | None
    rows: tuple[SummaryRow, ...]
    fallbacks: tuple[Fallback, ...] = ()
    requested: str | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_records(
        cls,
        records: Sequence[PlacementRecord],
        cell: int | None = None,
        requested: str | None = None,
        fallbacks: Sequence[Fallback] = (),
        notes: Sequence[str] = (),
    ) -> CellSummary:
        executed: collections.Counter = collections.Counter()
        placed_as: collections.Counter = collections.Counter()
        for r in records:
            if r.op_type in PLUMBING_OPS:
                continue
            kind = r.op_type or r.op
            key = (r.short_device, base_op_type(kind))
            if r.channel == "eager":
                executed[key] += 1
            else:
                placed_as[(key, kind)] += 1
        # oneDNN rewrites MatMul into _MklMatMul and the placer reports the node once as each: one placement.
        placed: collections.Counter = collections.Counter()
        for (key, _), count in placed_as.items():
            placed[key] = max(placed[key], count)
        keys = sorted(set(executed) | set(placed), key=lambda k: (_device_sort_key(k[0]), k[1]))
        # Run metadata tells where ops were placed, never how often they ran: without one eager line the
        # executed column is unknown, not zero.
        blind = any(r.channel == "run_metadata" for r in records) and not any(r.channel == "eager" for r in records)
        rows = tuple(SummaryRow(d, t, None if blind else executed[(d, t)], placed[(d, t)]) for d, t in keys)
        if blind and rows:
            notes = (*notes, "executed is unknown (-): without TensorFlow's log only run metadata is seen, which "
                             "tells where newly compiled ops were placed, not how often they ran")
        return cls(cell, rows, tuple(fallbacks), requested, tuple(notes))

    @property
    def empty(self) -> bool:
        return not self.rows and not self.fallbacks

    HEADER = ("device", "op type", "executed", "placed")

    def heading(self) -> str:
        where = f"cell {self.cell}" if self.cell is not None else "this cell"
        devices = len({r.device for r in self.rows})
        asked = f", asked {self.requested}" if self.requested else ""
        return f"tfgpu placement, {where}{asked}: {len(self.rows)} op type(s) on {devices} device(s)"

    def table_rows(self) -> list[tuple]:
        return [(r.device, r.op_type, "-" if r.executed is None else r.executed, r.placed) for r in self.rows]

    def to_text(self) -> str:
        lines = [self.heading()]
        lines += [f"  !! {f.text()}" for f in self.fallbacks]
        if self.rows:
            lines += _table_text(self.HEADER, self.table_rows())
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.to_text()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _device_sort_key(short: str) -> tuple[str, int]:
    kind, _, index = short.partition(":")
    return (kind, int(index) if index.isdigit() else -1)


def fold_internal(records) -> tuple[list[PlacementRecord], list[tuple[str, int]], int]:
    """What a learner wrote, without TensorFlow's own bookkeeping: the graph plumbing (``_Arg``, ``_Retval`` ...)
    left out, and one row per op of a cell on a device, however many lines named it (the eager line and the placer
    line of one op, each execution, a oneDNN rewrite such as ``_MklMatMul`` of the ``MatMul`` it stands for).
    Returns (the first record of each row, each row's (channels, how many lines), how many plumbing records
    were left out)."""
    kept: list[PlacementRecord] = []
    merged: dict[tuple, list] = {}
    left_out = 0

    def key_of(r: PlacementRecord) -> tuple:
        # The eager listener names an op by its type: its "_MklMatMul" is the placer's node "MatMul" too.
        op = base_op_type(r.op) if r.op == r.op_type else r.op
        return r.cell, r.short_device, base_op_type(r.op_type or ""), op

    for r in records:
        if r.op_type in PLUMBING_OPS:
            left_out += 1
            continue
        key = key_of(r)
        if key not in merged:
            merged[key] = [r, [], 0]
            kept.append(r)
        entry = merged[key]
        if r.channel not in entry[1]:
            entry[1].append(r.channel)
        entry[2] += 1
        if base_op_type(r.op_type or "") != (r.op_type or "") and entry[0].op_type == base_op_type(r.op_type or ""):
            entry[0] = r  # the rewrite's name is the more telling: "MatMul (oneDNN: _MklMatMul)"
    rows = [merged[key_of(r)] for r in kept]
    # Channels in one order, whichever line came first (the order differs from run to run and build to build).
    return [row[0] for row in rows], [("+".join(sorted(row[1])), row[2]) for row in rows], left_out


@dataclass(frozen=True, repr=False)
class RecordTable:
    """The ``show`` listing: records (already filtered and limited) with what the buffer dropped. Folded (``show``
    without ``--all``): one row per op, ``merged`` its channels and line count, and how many of TensorFlow's
    internal records were left out."""

    records: tuple[PlacementRecord, ...]
    matched: int
    total: int
    dropped: int
    maxlen: int
    internal: int = 0
    merged: tuple[tuple[str, int], ...] | None = None

    def heading(self) -> str:
        what = "ops" if self.merged is not None else "records"
        shown = f"showing the last {len(self.records)} of {self.matched}" if len(self.records) < self.matched \
            else f"{self.matched}"
        return (f"tfgpu placement {what}: {shown} matching, {self.total} records kept, "
                f"{self.dropped} dropped by the ring buffer (size {self.maxlen})")

    def footnote(self) -> str:
        """What the listing leaves out and how to see it, under the heading (which stays within one short line)."""
        if self.merged is None:
            return ""
        hidden = (f"{self.internal} of TensorFlow's internal record{'s' if self.internal != 1 else ''} left out: "
                  if self.internal else "")
        return f"{hidden}`%tfgpu placement show --all` lists every record"

    def table_rows(self) -> list[tuple]:
        if self.merged is None:
            return [(r.cell if r.cell is not None else "", r.short_device, _op_type(r.op_type), r.op, r.channel,
                     r.requested or "") for r in self.records]
        return [(r.cell if r.cell is not None else "", r.short_device, _op_type(r.op_type), r.op, channels, lines,
                 r.requested or "") for r, (channels, lines) in zip(self.records, self.merged, strict=True)]

    @property
    def HEADER(self) -> tuple[str, ...]:  # as every table of the module names it
        if self.merged is None:
            return ("cell", "device", "op type", "op", "channel", "asked")
        return ("cell", "device", "op type", "op", "channels", "lines", "asked")


    def to_text(self) -> str:
        note = self.footnote()
        return "\n".join([self.heading(), *([f"  {note}"] if note else []),
                          *(_table_text(self.HEADER, self.table_rows()) if self.records else [])])

    def __repr__(self) -> str:
        return self.to_text()




def _op_type(op_type: str | None) -> str:
    """"MatMul (oneDNN: _MklMatMul)" for a rewrite, so the op a learner wrote is the one they read first."""
    if not op_type:
        return ""
    base = base_op_type(op_type)
    return op_type if base == op_type else f"{base} (oneDNN: {op_type})"
