"""Settings a notebook carries in its metadata: their shape, their check, what a restart applies, the first cell.

The notebook's metadata key ``tfgpu`` holds::

    {"version": 1, "apply_on_start": true,
     "settings": {"visible": "1", "cpus": "3", "growth": "on", "limit": "40%",
                  "virtual": "2x2GB", "placement": "on"}}

Each value is the argument text of ``%tfgpu <name>``; a per-GPU setting may be a list of them
(``"limit": ["2GB --gpu 0", "4GB --gpu 1"]``). A missing ``version`` is read as 1. The JupyterLab sidebar
writes the key and, at every kernel start, runs ``ipython/apply.py``'s ``apply_json`` silently before any cell
of the user; the value checks are the magics' own (``changes.py``), here in the kernel (the sidebar only
checks the shape). Pure: nothing here applies anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .changes import parse_change
from .inputs import has_controls, short_repr, shown
from .plan import ALL
from .settings import SAVED_AFTER, saved_order
from .settings import settings as registry_settings
from .version import SAVED_VERSION as VERSION

KEY = "tfgpu"
PLACEMENT = SAVED_AFTER[0]  # the placement log's switch, saved beside the settings and applied after them


def order() -> tuple[str, ...]:
    """The names a notebook may carry, in the order a kernel start applies them (the registry's, then placement)."""
    return saved_order()


def per_gpu() -> tuple[str, ...]:
    return tuple(s.name for s in registry_settings() if s.per_gpu)


class SavedError(ValueError):
    """Saved settings that cannot be used: one ``tfgpu:`` line that says what and how to fix it."""


def normalise(document: Any) -> dict[str, list[str]]:
    """The ``tfgpu`` metadata (or just its ``settings``) as ``{setting: [argument text, ...]}`` in ORDER.
    Checks the shape only; the values are checked by ``check``. Raises SavedError."""
    if not isinstance(document, dict):
        raise SavedError(f"tfgpu: the notebook's {KEY!r} metadata is {type(document).__name__}, not an object")
    version = document.get("version", VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SavedError(f"tfgpu: bad {KEY!r} metadata version {short_repr(version)}: expected {VERSION}")
    if version > VERSION:
        raise SavedError(f"tfgpu: these settings were saved by a newer tfgpu_magic (metadata version {version}); "
                         f"this one reads version {VERSION}: upgrade tfgpu_magic in this kernel's environment")
    settings = document.get("settings", {}) if "settings" in document or "version" in document else document
    if not isinstance(settings, dict):
        raise SavedError(f"tfgpu: the saved settings are {type(settings).__name__}, not an object")
    names, several = order(), per_gpu()
    unknown = [k for k in settings if k not in names]
    if unknown:
        raise SavedError(f"tfgpu: unknown saved setting {shown(unknown[0])}; valid: {', '.join(names)}")
    out: dict[str, list[str]] = {}
    for name in names:
        value = settings.get(name)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) and v.strip() for v in values) or (
                len(values) > 1 and name not in several):
            raise SavedError(f"tfgpu: saved {name} is {json.dumps(value)[:60]}: expected the text after "
                             f"`%tfgpu {name}`" + (", or a list of them, one per GPU" if name in several else ""))
        bad = next((v for v in values if has_controls(v.strip())), None)
        if bad is not None:  # a line break would be a line of Python in a first cell (first_cell)
            raise SavedError(f"tfgpu: saved {name} {shown(bad)} holds a control character (a line break, a tab or "
                             f"an escape): a value is the text after `%tfgpu {name}` on one line; write it again")
        out[name] = [v.strip() for v in values]
    return out


def lines(settings: dict[str, list[str]]) -> list[str]:
    """The ``%tfgpu`` lines (without ``%tfgpu``) for normalised settings, in the order they apply."""
    return [f"{name} {value}" for name in order() for value in settings.get(name, ())]


def first_cell(document: Any) -> str:
    """The notebook's first cell for running it where nothing applies saved settings (nbconvert, papermill)."""
    return "\n".join(["%load_ext tfgpu_magic", *(f"%tfgpu {line}" for line in lines(normalise(document)))])


def check_placement(value: str) -> str:
    if value.lower() not in ("on", "off"):
        raise SavedError(f"tfgpu: saved {PLACEMENT} is {shown(value)}; valid: on, off")
    return value.lower()


@dataclass(frozen=True)
class Parsed:
    """A document read as a kernel start reads it: its changes in the order they apply and its placement, or
    what is wrong (``{setting: message}``; key "" for the document's shape)."""

    changes: tuple = ()
    placement: str | None = None  # "on" | "off"
    errors: dict[str, str] = field(default_factory=dict)


def parse(document: Any) -> Parsed:
    """The magics' parsing of every value and the refusal of two entries for one GPU; needs no kernel state."""
    try:
        settings = normalise(document)
    except SavedError as err:
        return Parsed(errors={"": str(err)})
    errors: dict[str, str] = {}
    changes = []
    placement = None
    for name, values in settings.items():
        for value in values:
            try:
                if name == PLACEMENT:
                    placement = check_placement(value)
                else:
                    changes.append(parse_change(f"{name} {value}"))
            except ValueError as err:  # PlanError (argparse's complaints too), SavedError
                errors.setdefault(name, str(err))
    errors.update((k, v) for k, v in _duplicates(changes).items() if k not in errors)
    return Parsed(tuple(changes), placement, errors)


def check(document: Any, controller: Any = None, nvml: Any = None) -> dict[str, str]:
    """``{setting: the message}`` for each value a kernel start would refuse whatever the moment; empty when a
    start would apply them all. One verdict with ``ipython/apply.py``, which runs the same two steps first:
    ``parse``, then ``rehearse``: the controller's own rules on a rehearsal (control.Rehearsal: conflicts, GPU
    indices and sizes against NVML's totals where NVML knows them) with ``controller``'s environment and NVML
    (the kernel's by default; ``nvml``: a snapshot already read, so nothing waits for the driver). Applies
    nothing and needs no TensorFlow. Every setting that is wrong is named at once (Check & save shows each
    under its field): the values that parse are rehearsed too when others do not."""
    parsed = parse(document)
    if "" in parsed.errors:  # not a document of ours: no value can be read
        return parsed.errors
    refused = rehearse(parsed.changes, controller, nvml)
    return {**parsed.errors, **{k: v for k, v in refused.items() if k not in parsed.errors}}


def unchecked(document: Any, controller: Any = None, nvml: Any = None) -> dict[str, str]:
    """``{setting: why}`` for the values of a document that ``check`` accepts only because NVML cannot list the
    GPUs (``visible 9`` with no driver): a kernel start takes them as given, so whoever saves them is told."""
    from . import settings as registry
    from .control import default_controller
    from .settings.base import nvml_why

    parsed = parse(document)
    snap = nvml if nvml is not None else (controller if controller is not None else default_controller()).nvml()
    if snap.available and snap.error is None:
        return {}
    out: dict[str, str] = {}
    for change in parsed.changes:
        setting = registry.setting_of(change)
        named = setting.named_gpus(change, change.value) if setting.needs_inventory(change) else []
        if named and change.setting not in out:
            because = nvml_why(snap.error)
            out[change.setting] = f"GPU {', '.join(map(str, named))} not checked" + (f": {because}" if because else "")
    return out


def _duplicates(changes: list) -> dict[str, str]:
    """Two entries of a per-GPU setting for the same GPU: the second would silently win."""
    seen: dict[tuple[str, Any], str] = {}
    errors: dict[str, str] = {}
    for change in changes:
        key = (change.setting, change.gpu)
        if key in seen and change.setting not in errors:
            which = "every visible GPU" if change.gpu == ALL else f"GPU {change.gpu}"
            errors[change.setting] = (f"tfgpu: saved {change.setting} has two entries for {which} "
                                      f"({shown(seen[key])} and {shown(change.asked)}); keep one")
        seen.setdefault(key, change.asked)
    return errors


def rehearse(changes, controller: Any = None, nvml: Any = None) -> dict[str, str]:
    """``{setting: message}`` for each setting whose change the controller's rules refuse (its first refused
    value), applying nothing. A refused change stays out of the rehearsal, so the ones after it are checked as
    they would be without it; the first key is the change a kernel start stops at."""
    from .control import default_controller
    from .plan import PlanError

    trial = (controller if controller is not None else default_controller()).rehearsal(nvml)
    errors: dict[str, str] = {}
    for change in changes:
        try:
            trial.change(change)
        except PlanError as err:
            errors.setdefault(change.setting, str(err))
    return errors


def wanted(settings: list[dict], refused: list[dict], placement: str | None) -> dict[str, Any]:
    """What a restart should apply: the settings in force (the snapshot's rows) with the refused ones
    instead, in the metadata's form."""
    out: dict[str, list[str]] = {}
    for row in settings:
        name, _, gpu = row["setting"].partition("[")
        gpu = gpu.rstrip("]")
        text = row["asked"] if not gpu or gpu == "all" else f"{row['asked']} --gpu {gpu}"
        out.setdefault(name, []).append(text)
    for row in refused:
        out[row["setting"]] = [row["asked"]]
    if placement == "on":  # off is where a kernel starts: nothing to save
        out[PLACEMENT] = ["on"]
    several = per_gpu()
    return {name: (values if name in several and len(values) > 1 else values[0])
            for name in order() if (values := out.get(name))}
