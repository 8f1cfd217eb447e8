"""Joining the three numberings of one GPU: NVML's physical index (PCI bus order, as nvidia-smi
shows it), the CUDA ordinal under CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, and TensorFlow's GPU:N.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .nvml import NvmlSnapshot, Unavailable


def cuda_order(environ: Mapping[str, str], snap: NvmlSnapshot | None) -> list[int] | None:
    """Physical index of CUDA ordinal k (and so of TensorFlow's physical GPU:k), for each k.

    None when it cannot be known: no NVML to count or identify GPUs. With CUDA's default
    FASTEST_FIRST order, GPUs of one model keep PCI order; mixed models may not, which is why
    `visible` sets CUDA_DEVICE_ORDER=PCI_BUS_ID."""
    gpus = list(snap.gpus) if snap is not None and snap.available else None
    spec = environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return None if gpus is None else [g.index for g in gpus]
    order: list[int] = []
    # CUDA reads the list up to the first entry it cannot use, and ignores the rest.
    for entry in (e.strip() for e in spec.split(",")):
        index = _resolve_entry(entry, gpus)
        if index is None or index in order:
            break
        order.append(index)
    return order


def _resolve_entry(entry: str, gpus) -> int | None:
    if re.fullmatch(r"\d+", entry):
        index = int(entry)
        if gpus is not None and index not in {g.index for g in gpus}:
            return None
        return index
    if gpus is None or not entry:
        return None
    key = entry.lower()
    if key.startswith("mig-gpu-"):
        # The pre-R470 MIG form names its parent: MIG-GPU-<parent uuid>/<gi>/<ci>.
        key = key[4:].split("/")[0]
    elif key.startswith("mig-"):
        return None  # a MIG instance's own UUID: its parent is not known without MIG enumeration
    # CUDA takes a unique prefix of the UUID ("GPU-8f3a"); an ambiguous one is unusable.
    matches = [g.index for g in gpus
               if not isinstance(g.uuid, Unavailable) and g.uuid and g.uuid.lower().startswith(key)]
    return matches[0] if len(matches) == 1 else None


def tf_names(order: Sequence[int] | None, visible_physical: Sequence[int] | None) -> dict[int, str]:
    """physical index -> TensorFlow's logical name ("GPU:0"), for the GPUs TensorFlow uses.

    TensorFlow renumbers its visible GPUs from 0 in CUDA order (tensorflow#50300)."""
    if order is None:
        return {}
    used = [p for p in order if visible_physical is None or p in visible_physical]
    return {p: f"GPU:{k}" for k, p in enumerate(used)}
