"""The GPUs this kernel was given: ``CUDA_VISIBLE_DEVICES`` as the process found it when it started.

On a shared server the GPUs a kernel may use are often decided before it starts: Slurm's ``--gres=gpu:2``,
the Kubernetes device plugin or a JupyterHub spawner set ``CUDA_VISIBLE_DEVICES`` (indices, GPU UUIDs or
unique UUID prefixes, MIG UUIDs old and new). That value is read from ``/proc/self/environ``, the environment
the process was started with, so a value the user's own code set since is the user's and no limit; and it is
read as CUDA reads it (numbering.read_entries): up to the first entry CUDA cannot read, which ends the list as
``-1`` does, and which the views name. ``visible`` chooses inside the given set and writes the variable in the
form the scheduler used; numbers stay NVML's physical indices. Slurm's own variables add to the explanation and
never widen the set.

Pure functions over an environment mapping and an NVML snapshot: no IPython, no TensorFlow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from .inputs import printable, shown
from .numbering import Entries, match_entry, read_entries
from .nvml import NvmlSnapshot

VAR = "CUDA_VISIBLE_DEVICES"
SLURM_VARS = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


@cache
def start_environment() -> Mapping[str, str]:
    """The environment this process was started with (Linux: /proc/self/environ); elsewhere, or where it
    cannot be read, the environment as it was when this was first asked (before any setting of tfgpu's)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return dict(os.environ)
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


@dataclass(frozen=True)
class Given:
    """The inherited assignment matched to NVML's GPUs. ``restricted`` False: every GPU of the machine."""

    restricted: bool = False
    indices: tuple[int, ...] = ()  # whole GPUs given, physical indices, in the inherited order
    mig: tuple[str, ...] = ()  # MIG devices given, full UUIDs
    form: str = "index"  # "index" or "uuid": how the scheduler named the GPUs (visible writes the same)
    error: str | None = None  # the value names a GPU NVML does not have: refuse, never guess
    raw: str | None = None
    source: str = ""
    ended_by: str | None = None  # the entry at which CUDA stops reading the value (0,x,2: 'x'), or None

    def allows(self, index: int) -> bool:
        return not self.restricted or index in self.indices

    def allows_mig(self, uuid: str, parent: int | None = None) -> bool:
        return not self.restricted or uuid in self.mig or (parent is not None and parent in self.indices)

    def describe(self) -> str:
        """"GPUs 2 and 3", "GPU 1 and MIG-5e8b...", "no GPU"."""
        parts = [p for p in (gpus_text(self.indices), *self.mig) if p]
        return " and ".join(parts) if parts else "no GPU"

    def refusal(self, what: str) -> str:
        """The message for ``what`` (a GPU or MIG device) outside the set: what was given and by whom."""
        return (f"{what} was not given to this kernel: it may use {self.describe()} ({self.source}); choose among "
                "those, or ask whoever starts the kernel (the scheduler, the spawner) for other GPUs")

    def to_dict(self) -> dict:
        return {"restricted": self.restricted, "indices": list(self.indices), "mig": list(self.mig),
                "form": self.form, "error": self.error, "value": self.raw, "source": self.source,
                "ended_by": self.ended_by, "described": self.describe()}


@dataclass(frozen=True)
class Assignment:
    """What the kernel inherited: the raw variable, and Slurm's words on it."""

    raw: str | None = None
    slurm: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> Assignment:
        slurm = {name: env[name] for name in (*SLURM_VARS, "SLURM_JOB_ID") if env.get(name)}
        return cls(env.get(VAR), slurm)

    @property
    def restricted(self) -> bool:
        return self.raw is not None

    def source(self) -> str:
        text = f"{VAR}={printable(self.raw or '')} when this kernel started"
        gpus = next((f"{name}={printable(self.slurm[name])}" for name in SLURM_VARS if name in self.slurm), None)
        if gpus:
            job = f" {printable(self.slurm['SLURM_JOB_ID'])}" if "SLURM_JOB_ID" in self.slurm else ""
            text += f"; Slurm job{job} was given {gpus}"
        return text

    def resolve(self, snap: NvmlSnapshot | None) -> Given:
        """The set as CUDA reads the value (numbering.read_entries: in order, up to the first entry it cannot
        read), each entry matched to NVML's GPUs and MIG devices; an entry that matches none is an error."""
        if self.raw is None:
            return Given()
        entries = read_entries(self.raw)
        source = self.source() + _ended_words(self.raw, entries)
        form = "uuid" if any(e[:4].lower() in ("gpu-", "mig-") for e in entries.read) else "index"
        base = {"restricted": True, "form": form, "raw": self.raw, "source": source, "ended_by": entries.ended_by}
        if not entries.read:
            return Given(**base)  # "", -1 or an entry CUDA cannot read first: the scheduler gave no GPU
        gpus = list(snap.gpus) if snap is not None and snap.available and snap.error is None else None
        indices: list[int] = []
        mig: list[str] = []
        for entry in entries.read:
            found = match_entry(entry, gpus)
            if found.why:
                return Given(**base, error=f"{VAR}={shown(self.raw)} (when this kernel started) names "
                             f"{shown(entry)}, {found.why}; tfgpu will not guess which GPUs are this kernel's: "
                             "ask whoever starts the kernel, or restart it with a value that names GPUs NVML lists")
            if found.index is not None:
                if found.index not in indices:
                    indices.append(found.index)
            elif found.mig is not None and found.mig not in mig:
                mig.append(found.mig)
        return Given(**base, indices=tuple(indices), mig=tuple(mig))

    def value_for(self, given: Given, indices: tuple[int, ...], mig: tuple[str, ...], snap: NvmlSnapshot | None
                  ) -> str:
        """CUDA_VISIBLE_DEVICES naming these GPUs in the form the kernel was given them (UUIDs stay UUIDs)."""
        entries: list[str] = []
        for index in indices:
            gpu = snap.gpu(index) if snap is not None else None
            uuid = gpu.uuid if gpu is not None else None
            use_uuid = given.form == "uuid" and isinstance(uuid, str) and uuid
            entries.append(uuid if use_uuid else str(index))  # type: ignore[arg-type]
        return ",".join(entries + list(mig))


def gpus_text(indices) -> str:
    """"GPU 2", "GPUs 2 and 3", "GPUs 0, 1 and 4"; "" for none."""
    names = [str(i) for i in indices]
    if len(names) <= 1:
        return f"GPU {names[0]}" if names else ""
    return f"GPUs {', '.join(names[:-1])} and {names[-1]}"


def _ended_words(raw: str, entries: Entries) -> str:
    """"; CUDA stops reading it at 'x' ...": the entry that ended the list, unless the value is the usual "-1"."""
    ended = entries.ended_by
    if ended is None or (not entries.read and re.fullmatch(r"\s*-[0-9]+\s*", raw)):
        return ""
    counts = "so only the entries before it count" if entries.read else "so CUDA sees no GPU"
    return (f"; CUDA stops reading it at {shown(ended)}, which is no index in ASCII digits, GPU- or MIG- UUID, "
            f"{counts}")
