"""The settings a user asked for: parsing, validation and rendering as code.

Pure data and pure functions: nothing here touches TensorFlow, NVML, the environment or IPython, so
every rule about what a valid setting is can be tested in microseconds and reused by every face.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, localcontext

from .i18n import N_, _
from .inputs import OFF_WORDS, ON_WORDS, shown, whole_number

ALL = "all"  # key of a limit / virtual split that applies to every visible GPU

SIZE_FORMS = N_("a size like 1024 (MiB), 512MiB, 1.5GB, 2GiB or 40%")  # translated where said (core/i18n.py)
ABSOLUTE_SIZE_FORMS = N_("a size like 1024 (MiB), 512MiB, 1.5GB or 2GiB")
VISIBLE_FORMS = N_("0, 1,3, all, none, auto, auto:N or a MIG device (MIG-5e8b...)")
# NVIDIA's MIG user guide (CUDA 11 and 12): a CUDA process enumerates one MIG device, whatever number it is given.
MIG_ONE = N_("a CUDA process uses one MIG device (NVIDIA's MIG user guide, for CUDA 11 and 12: it enumerates only "
             "the first), so give one MIG device alone, or whole GPUs")

# Bounds that keep every number a plain int that TensorFlow, CUDA and the exported code can hold. No GPU
# comes near 16 TiB.
MAX_SIZE_MIB = 1 << 24
MAX_VIRTUAL = 64


class PlanError(ValueError):
    """A user mistake. ``str()`` is one line that starts with ``tfgpu:``, names the bad value, the
    valid choices and the fix; ``more``, when given, is a second line (a reason too long for the first, which keeps
    within 120 characters)."""

    def __init__(self, message: str, more: str = ""):
        message = " ".join(message.splitlines())  # one line, whatever a value held
        message = message if message.startswith("tfgpu:") else f"tfgpu: {message}"
        super().__init__(message + (f"\n  {' '.join(more.splitlines())}" if more else ""))


FIRST_LINE = 120  # an answer's first line at most (issue 37)


@dataclass(frozen=True)
class Percent:
    """A share of one GPU's total memory; turned into MiB once that total is known (NVML)."""

    value: float

    def __str__(self) -> str:
        return f"{self.value:g}%"


# Binary units throughout: GB means GiB, as in nvidia-smi and in TensorFlow's own examples
# ("2 GB virtual GPUs" are memory_limit=2048).
_UNITS_MIB = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024, "t": 1 << 20, "tb": 1 << 20,
              "tib": 1 << 20}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*|%)\s*$")


def parse_size(text: str, *, allow_percent: bool = True, what: str = "") -> int | Percent:
    """``1024`` (MiB), ``512MiB``, ``1.5GB``, ``2GiB``, ``40%`` -> MiB (int) or Percent. ``what``: a setting's
    name as typed, or words already translated."""
    what = what or _("size")
    forms = _(SIZE_FORMS if allow_percent else ABSOLUTE_SIZE_FORMS)
    m = _SIZE_RE.match(text or "")
    if not m:
        raise PlanError(_("bad {what} {value}: expected {forms}").format(what=what, value=shown(text), forms=forms))
    # Decimal holds any number of digits exactly (no float overflow, no int-conversion limit), given the
    # precision for them: its default 28 digits would round 0.999... MiB up to 1.
    with localcontext() as context:
        context.prec = len(m.group(1)) + 12
        return _size_in_mib(Decimal(m.group(1)), m.group(2), text, what, allow_percent, forms)


def _size_in_mib(number: Decimal, unit_text: str, text: str, what: str, allow_percent: bool,
                 forms: str) -> int | Percent:
    unit = unit_text.lower()
    if unit == "%":
        if not allow_percent:
            raise PlanError(_("bad {what} {value}: a percentage is not allowed here; give {forms}").format(
                what=what, value=shown(text), forms=forms))
        if not 0 < number <= 100:
            raise PlanError(_("bad {what} {value}: a percentage must be above 0 and at most 100").format(
                what=what, value=shown(text)))
        return Percent(float(number))
    if unit not in _UNITS_MIB:
        units = _("MiB, MB, GiB or GB (or %)") if allow_percent else _("MiB, MB, GiB or GB")
        raise PlanError(_("bad {what} {value}: unknown unit {unit}; use {units}").format(
            what=what, value=shown(text), unit=shown(unit_text), units=units))
    exact = number * _UNITS_MIB[unit]
    if exact > MAX_SIZE_MIB:
        raise PlanError(_("bad {what} {value}: more than any GPU has (the most tfgpu takes is {most}); give {forms}"
                          ).format(what=what, value=shown(text), most=format_mib(MAX_SIZE_MIB), forms=forms))
    mib = math.floor(exact)
    if mib < 1:
        raise PlanError(_("bad {what} {value}: it must be at least 1 MiB").format(what=what, value=shown(text)))
    return mib


def format_mib(mib: int) -> str:
    if mib >= 1 << 20 and mib % (1 << 20) == 0:
        return f"{mib >> 20}TiB"
    if mib >= 1024 and mib % 1024 == 0:
        return f"{mib // 1024}GiB"
    return f"{mib}MiB"


def format_size(size: int | Percent) -> str:
    return str(size) if isinstance(size, Percent) else format_mib(size)


@dataclass(frozen=True)
class VisibleSpec:
    """``indices`` for an explicit list (empty for none); ``every`` for all; ``auto`` picks the ``auto`` freest
    GPUs among those that qualify: no other process computing on it and at least half its memory free, or
    ``min_free_mib`` free in place of the half (resolved to indices by the caller, who has NVML: control.py's
    AUTO_RULE and _select). With ``wait_s`` it waits for them; without, plain auto takes the freest when none
    qualifies, and says so."""

    indices: tuple[int, ...] = ()
    every: bool = False
    auto: int | None = None
    mig: tuple[str, ...] = ()  # one MIG device's UUID (or a unique prefix until resolved against NVML)
    min_free_mib: int | None = None  # auto: in place of "half free"; indices: wait until they have it
    wait_s: float | None = None  # wait this long for GPUs that qualify (core/waiting.py) instead of refusing

    @property
    def chooses(self) -> bool:
        """Resolved against NVML's free memory (and other kernels' claims) when applied."""
        return self.auto is not None or self.min_free_mib is not None or self.wait_s is not None

    def __str__(self) -> str:
        if self.every:
            return "all"
        if self.auto is not None:
            return "auto" if self.auto == 1 else f"auto:{self.auto}"
        if self.mig:
            return ",".join(self.mig)
        return ",".join(map(str, self.indices)) if self.indices else "none"


def parse_index(text: str, *, what: str = "") -> int:
    index = whole_number(text)
    if index is None:
        raise PlanError(_("bad {what} {value}: expected a physical GPU index like 0 or 2 (as nvidia-smi numbers them)"
                          ).format(what=what or _("GPU index"), value=shown(text)))
    return index


def parse_visible(text: str) -> VisibleSpec:
    t = (text or "").strip().lower()
    if t == "all":
        return VisibleSpec(every=True)
    if t == "none":
        return VisibleSpec()
    if t == "auto" or t.startswith("auto:"):
        n = whole_number(t.partition(":")[2] or "1", low=1)
        if n is None:
            raise PlanError(_("bad GPU count in {value}: auto:N needs N of 1 or more, like auto:2").format(
                value=shown(text)))
        return VisibleSpec(auto=n)
    if "mig-" in t:
        entries = [e.strip() for e in (text or "").split(",")]
        if len(entries) > 1:
            raise PlanError(_("bad GPU list {value}: {why}").format(value=shown(text), why=_(MIG_ONE)))
        if not re.fullmatch(r"(?i)MIG-[0-9a-f-]+|MIG-GPU-[0-9a-f-]+/\d+/\d+", entries[0]):
            raise PlanError(_("bad MIG device {value}: expected a MIG UUID like MIG-5e8b9c1d (or a unique prefix), as "
                              "`%tfgpu devices` lists them").format(value=shown(text)))
        return VisibleSpec(mig=(entries[0],))
    parts = [whole_number(p) for p in t.split(",")]
    if not t or None in parts:
        raise PlanError(_("bad GPU list {value}: expected {forms}").format(value=shown(text), forms=_(VISIBLE_FORMS)))
    indices = tuple(parts)
    if len(set(indices)) != len(indices):
        raise PlanError(_("bad GPU list {value}: a GPU is listed twice; list each physical index once").format(
            value=shown(text)))
    return VisibleSpec(indices=indices)


def parse_on_off(text: str, *, what: str) -> bool:
    t = (text or "").strip().lower()
    if t in ON_WORDS:
        return True
    if t in OFF_WORDS:
        return False
    raise PlanError(_("bad value {value} for {what}: expected on or off").format(value=shown(text), what=what))


def parse_virtual(text: str) -> tuple[int | Percent, ...]:
    """``2x2GB`` or ``1GB,3GB`` -> one size per logical GPU."""
    t = (text or "").strip()
    m = re.fullmatch(r"(\d+)\s*[xX*]\s*(.+)", t)
    if m:
        count = whole_number(m.group(1), low=1, high=MAX_VIRTUAL)
        if count is None:
            raise PlanError(_("bad virtual GPU count {count} in {value}: use 1 to {most}, like 2x2GB").format(
                count=shown(m.group(1)), value=shown(text), most=MAX_VIRTUAL))
        sizes = (parse_size(m.group(2), what=_("virtual GPU size")),) * count
    elif not t:
        raise PlanError(_("virtual needs NxSIZE (2x2GB), SIZE,SIZE,... (1GB,3GB) or off"))
    else:
        parts = t.split(",")
        if len(parts) > MAX_VIRTUAL:  # the same bound as NxSIZE, checked before parsing thousands of sizes
            raise PlanError(_("bad virtual split {value}: {count} virtual GPUs; use 1 to {most}").format(
                value=shown(text), count=f"{len(parts):,}", most=MAX_VIRTUAL))
        try:
            sizes = tuple(parse_size(p, what=_("virtual GPU size")) for p in parts)
        except PlanError as err:
            why = str(err)[7:]
            expected = _(": expected ")  # the same words as parse_size's, in the language now in force
            if expected in why:  # not a size at all: the forms virtual takes, instead of a size's
                why = _("{bad}: virtual takes NxSIZE (2x2GB), SIZE,SIZE,... (1GB,3GB) or off").format(
                    bad=why.partition(expected)[0])
            raise PlanError(why) from None
    if not has_percent(sizes) and sum(sizes) > MAX_SIZE_MIB:
        raise PlanError(_("bad virtual split {value}: {total} in all is more than any GPU has").format(
            value=shown(text), total=format_mib(sum(sizes))))
    if has_percent(sizes) and sum(s.value for s in sizes if isinstance(s, Percent)) > 100:
        raise PlanError(_("bad virtual split {value}: the percentages add up to more than 100%").format(
            value=shown(text)))
    return sizes


def parse_count(text: str, *, what: str, maximum: int = 256) -> int:
    count = whole_number(text or "", low=1, high=maximum)
    if count is None:
        raise PlanError(_("bad {what} {value}: expected a whole number from 1 to {most}").format(
            what=what, value=shown(text), most=maximum))
    return count


def gpu_key(gpu: int | str) -> str:
    return _("every visible GPU") if gpu == ALL else f"GPU {gpu}"


class Plan:
    """What the user asked for: each asked setting's value under the setting's name (``core/settings`` says what
    each means and checks it; a per-GPU setting's value is ``((gpu, value), ...)``, ALL first). Immutable and
    hashable: a change makes a new Plan, so a refused change never leaves a half-changed plan behind. A setting
    never asked reads as None (``plan.visible``)."""

    __slots__ = ("_values",)

    def __init__(self, **values):
        object.__setattr__(self, "_values", {k: v for k, v in values.items() if v is not None and v != ()})

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._values.get(name)

    def __setattr__(self, name, value):
        raise AttributeError("a Plan is immutable: use replaced()")

    def replaced(self, name: str, value) -> Plan:
        """This plan with ``name`` set to ``value`` (None or empty: not asked)."""
        return Plan(**{**self._values, name: value})

    def per_gpu(self, name: str) -> dict:
        """A per-GPU setting's values as {gpu: value}."""
        return dict(self._values.get(name) or ())

    def names(self) -> tuple[str, ...]:
        return tuple(self._values)

    def is_empty(self) -> bool:
        return not self._values

    def __eq__(self, other) -> bool:
        return isinstance(other, Plan) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

    def __repr__(self) -> str:
        return "Plan(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


def sorted_items(mapping: dict) -> tuple:
    # ALL first, then physical indices in order: the order they are applied and shown in.
    return tuple(sorted(mapping.items(), key=lambda kv: (kv[0] != ALL, kv[0] if kv[0] != ALL else -1)))


def has_percent(value) -> bool:
    """A size or a tuple of sizes with a percentage in it: it needs the GPU's total memory."""
    if isinstance(value, tuple):
        return any(isinstance(v, Percent) for v in value)
    return isinstance(value, Percent)


def resolve_size(size: int | Percent, total_mib: int | None) -> int | None:
    """MiB for a size; a Percent needs the GPU's total (None when unknown)."""
    if isinstance(size, Percent):
        return None if total_mib is None else max(1, math.floor(total_mib * size.value / 100))
    return size
