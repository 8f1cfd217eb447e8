"""Joining the three numberings of one GPU: NVML's physical index (PCI bus order, as nvidia-smi
shows it), the CUDA ordinal under CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, and TensorFlow's GPU:N.

``CUDA_VISIBLE_DEVICES`` is read here as CUDA reads it, once for every caller (the assignment a kernel was
started with, the order of its GPUs): entries in order, each an index in ASCII digits, a GPU UUID or a unique
prefix of one (``GPU-8f3a``), or a MIG device (``MIG-<uuid>``, or before driver R470
``MIG-GPU-<parent uuid>/<GPU instance>/<compute instance>``); the first entry of any other form ends the list,
as ``-1`` does, and CUDA ignores what follows it (``0,x,2`` is GPU 0 alone; ``²``, ``１`` or ``٣`` are no
index to CUDA, which reads ASCII digits only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .nvml import Gpu, NvmlSnapshot, Unavailable

_INDEX = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() and \d take "²", "１" and "٣", which CUDA does not
_OLD_MIG = re.compile(r"(?i)MIG-(GPU-[^/]+)/([0-9]+)/([0-9]+)")
_BLANKS = " \t\n\r\f\v"  # ASCII blanks around an entry; any other character is part of it
_MAX_INDEX_DIGITS = 9  # no machine has a billion GPUs; a longer number is never turned into an int


@dataclass(frozen=True)
class Entries:
    """What CUDA reads of a CUDA_VISIBLE_DEVICES value: ``read``, the entries before the first one it cannot
    read, and ``ended_by``, that entry (None when CUDA reads the whole value); both without the blanks around them."""

    read: tuple[str, ...]
    ended_by: str | None = None


def read_entries(value: str) -> Entries:
    """Split ``value`` as CUDA does: in order, up to the first entry that is no index, GPU UUID or MIG UUID."""
    if not value.strip(_BLANKS):
        return Entries(())  # "" (or blanks): no GPU, with no entry to blame
    read: list[str] = []
    for entry in (e.strip(_BLANKS) for e in value.split(",")):
        if not _readable(entry):
            return Entries(tuple(read), entry)
        read.append(entry)
    return Entries(tuple(read))


def _readable(entry: str) -> bool:
    return bool(_INDEX.fullmatch(entry)) or entry[:4].lower() in ("gpu-", "mig-")


@dataclass(frozen=True)
class Match:
    """One readable entry matched to NVML's devices: a whole GPU (``index``), a MIG device (``mig``, its full
    UUID, with its ``parent``), or neither, with ``why`` ("a UUID no GPU of NVML's has")."""

    index: int | None = None
    mig: str | None = None
    parent: int | None = None
    why: str = ""


def match_entry(entry: str, gpus: Sequence[Gpu] | None) -> Match:
    """The device a readable entry names among ``gpus`` (None: NVML unavailable, so only indices are taken)."""
    if _INDEX.fullmatch(entry):
        if len(entry.lstrip("0")) > _MAX_INDEX_DIGITS:
            return Match(why="an index far beyond any GPU's")
        index = int(entry)
        if gpus is not None and index not in {g.index for g in gpus}:
            listed = ", ".join(str(g.index) for g in gpus) or "none"
            return Match(why=f"an index NVML does not have (its GPUs: {listed})")
        return Match(index=index)
    if gpus is None:
        return Match(why="a UUID, which needs NVML to match, and NVML is unavailable")
    old = _OLD_MIG.fullmatch(entry)
    if old:  # the pre-R470 form names one MIG device by its parent and its instance ids, never the whole parent
        parents = _gpus_by_uuid(old.group(1), gpus)
        if len(parents) != 1:
            return Match(why="a MIG device of a GPU NVML does not list" if not parents
                         else "a MIG device of a prefix of several GPUs' UUIDs")
        parent = parents[0]
        gi, ci = (int(n) if len(n) <= _MAX_INDEX_DIGITS else -1 for n in (old.group(2), old.group(3)))
        found = [m for m in parent.mig_devices if isinstance(m.uuid, str)
                 and m.gpu_instance_id == gi and m.compute_instance_id == ci]
        if len(found) != 1:
            return Match(why=f"a MIG device NVML does not list (GPU {parent.index} has no GPU instance "
                         f"{old.group(2)} with compute instance {old.group(3)})")
        return Match(mig=found[0].uuid, parent=parent.index)  # type: ignore[arg-type]
    key = entry.lower()
    if key.startswith("mig-"):
        devices = [(g, m) for g in gpus for m in g.mig_devices
                   if isinstance(m.uuid, str) and m.uuid.lower().startswith(key)]
        exact = [(g, m) for g, m in devices if m.uuid.lower() == key]  # type: ignore[union-attr]
        devices = exact or devices
        if len(devices) == 1:
            return Match(mig=devices[0][1].uuid, parent=devices[0][0].index)  # type: ignore[arg-type]
        return Match(why="a MIG device NVML does not list" if not devices else "a prefix of several MIG devices")
    matches = _gpus_by_uuid(entry, gpus)
    if len(matches) == 1:
        return Match(index=matches[0].index)
    return Match(why="a UUID no GPU of NVML's has" if not matches else "a prefix of several GPUs' UUIDs")


def _gpus_by_uuid(prefix: str, gpus: Sequence[Gpu]) -> list[Gpu]:
    """The GPUs whose UUID is ``prefix``, else starts with it (CUDA takes a unique prefix: "GPU-8f3a")."""
    key = prefix.lower()
    known = [g for g in gpus if not isinstance(g.uuid, Unavailable) and g.uuid]
    exact = [g for g in known if g.uuid.lower() == key]  # type: ignore[union-attr]
    return exact or [g for g in known if g.uuid.lower().startswith(key)]  # type: ignore[union-attr]


def cuda_order(environ: Mapping[str, str], snap: NvmlSnapshot | None) -> list[int] | None:
    """Physical index of CUDA ordinal k (and so of TensorFlow's physical GPU:k), for each k.

    None when it cannot be known: no NVML to count or identify GPUs. With CUDA's default
    FASTEST_FIRST order, GPUs of one model keep PCI order; mixed models may not, which is why
    `visible` sets CUDA_DEVICE_ORDER=PCI_BUS_ID. The order ends where CUDA's reading of
    CUDA_VISIBLE_DEVICES ends (read_entries), at an entry that names no GPU NVML lists, at a GPU named
    twice, and at a MIG device: a slice of its parent, not the whole GPU a physical index names."""
    gpus = list(snap.gpus) if snap is not None and snap.available else None
    spec = environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return None if gpus is None else [g.index for g in gpus]
    order: list[int] = []
    for entry in read_entries(spec).read:
        index = match_entry(entry, gpus).index
        if index is None or index in order:
            break
        order.append(index)
    return order


def tf_names(order: Sequence[int] | None, visible_physical: Sequence[int] | None) -> dict[int, str]:
    """physical index -> TensorFlow's logical name ("GPU:0"), for the GPUs TensorFlow uses.

    TensorFlow renumbers its visible GPUs from 0 in CUDA order (tensorflow#50300)."""
    if order is None:
        return {}
    used = [p for p in order if visible_physical is None or p in visible_physical]
    return {p: f"GPU:{k}" for k, p in enumerate(used)}
