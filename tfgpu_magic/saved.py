"""Settings a notebook carries in its metadata, and applying them in a kernel all at once.

The notebook's metadata key ``tfgpu`` holds::

    {"version": 1, "apply_on_start": true,
     "settings": {"visible": "1", "cpus": "3", "cpumem": "on", "growth": "on", "limit": "40%",
                  "virtual": "2x2GB", "placement": "on"}}

Each value is the argument text of ``%tfgpu <name>``; a per-GPU setting may be a list of them
(``"limit": ["2GB --gpu 0", "4GB --gpu 1"]``). A missing ``version`` is read as 1. The JupyterLab sidebar
writes the key and, at every kernel start, runs ``apply_json`` silently before any cell of the user; the
value checks are the magics' own, here in the kernel (the sidebar only checks the shape).

Applying is all or nothing: every value is parsed first, and one bad value, or one refused because the
runtime has started, applies none of them.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from .inputs import short_repr, shown

KEY = "tfgpu"
VERSION = 1
# The order they are applied in: the CUDA and CPU settings first, then per-GPU memory, then the log.
ORDER = ("visible", "cpus", "cpumem", "growth", "limit", "virtual", "placement")
PER_GPU = ("limit", "virtual")


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
    unknown = [k for k in settings if k not in ORDER]
    if unknown:
        raise SavedError(f"tfgpu: unknown saved setting {shown(unknown[0])}; valid: {', '.join(ORDER)}")
    out: dict[str, list[str]] = {}
    for name in ORDER:
        value = settings.get(name)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) and v.strip() for v in values) or (
                len(values) > 1 and name not in PER_GPU):
            raise SavedError(f"tfgpu: saved {name} is {json.dumps(value)[:60]}: expected the text after "
                             f"`%tfgpu {name}`" + (", or a list of them, one per GPU" if name in PER_GPU else ""))
        out[name] = [v.strip() for v in values]
    return out


def lines(settings: dict[str, list[str]]) -> list[str]:
    """The ``%tfgpu`` lines (without ``%tfgpu``) for normalised settings, in the order they apply."""
    return [f"{name} {value}" for name in ORDER for value in settings.get(name, ())]


def first_cell(document: Any) -> str:
    """The notebook's first cell for running it where nothing applies saved settings (nbconvert, papermill)."""
    return "\n".join(["%load_ext tfgpu_magic", *(f"%tfgpu {line}" for line in lines(normalise(document)))])


def check_placement(value: str) -> str:
    if value.lower() not in ("on", "off"):
        raise SavedError(f"tfgpu: saved placement is {shown(value)}; valid: on, off")
    return value.lower()


def check(document: Any) -> dict[str, str]:
    """``{setting: the magic's message}`` for each value the magics would refuse to parse; empty when all
    parse. Applies nothing and needs no TensorFlow (whether a GPU index exists is checked when applied)."""
    from IPython.core.error import UsageError

    from .commands import parse_change

    try:
        settings = normalise(document)
    except SavedError as err:
        return {"": str(err)}
    errors: dict[str, str] = {}
    for name, values in settings.items():
        for value in values:
            try:
                check_placement(value) if name == "placement" else parse_change(f"{name} {value}")
            except (UsageError, ValueError) as err:  # argparse's complaints (UsageError); PlanError, SavedError
                errors.setdefault(name, str(err))
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
        out["placement"] = ["on"]
    return {name: (values if name in PER_GPU and len(values) > 1 else values[0])
            for name in ORDER if (values := out.get(name))}


# -- applying, in a kernel ---------------------------------------------------------------------------------------
class Result(dict):
    """The outcome of ``apply_json``, shown to the frontend through ``user_expressions`` as JSON."""

    def _repr_json_(self):
        return dict(self)


_last: Result = Result(ok=False, message="tfgpu: no saved settings were applied in this kernel yet", outcomes=[],
                       placement=None)


def last_result() -> Result:
    return _last


_applied_text: str | None = None  # the document this process applied (a kernel applies at its start, once)


def apply_json(text: str, shell: Any = None) -> Result:
    """Apply the ``tfgpu`` metadata given as JSON text in the running IPython (the sidebar's silent call at
    kernel start). Never raises for a bad value: the result says what was refused, and nothing was applied.

    The frontend also calls this when it reconnects to a kernel that was already running (a page reload): the
    same document again returns the first result; another one, once the user has run cells, is not applied
    (it would silently undo what they typed since): it applies at the next kernel start."""
    global _last, _applied_text
    if text == _applied_text:
        return _last
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if getattr(shell, "execution_count", 1) > 1:
        _last = Result(ok=False, outcomes=[], placement=None,
                      message="tfgpu: this kernel has run cells already, so the saved settings were not applied now: "
                              "they apply at its next start (Restart kernel and apply)")
        return _last
    try:
        document = json.loads(text)
    except ValueError as err:
        _last = Result(ok=False, message=f"tfgpu: the saved settings are not JSON ({err})", outcomes=[],
                       placement=None)
        return _last
    _last = apply(document, shell)
    _applied_text = text
    return _last


def apply(document: Any, shell: Any = None) -> Result:
    """Load the extension in ``shell`` (the running IPython by default) and apply the saved settings, all or
    nothing."""
    from IPython.core.error import UsageError

    from . import commands
    from .magics import extension_magics
    from .runtime import Status

    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    try:
        settings = normalise(document)
    except SavedError as err:
        return Result(ok=False, message=str(err), outcomes=[], placement=None)
    magics = extension_magics(shell)
    configuring = [line for line in lines(settings) if not line.startswith("placement ")]
    placement = settings.get("placement", [None])[0]
    try:
        changes = [commands.parse_change(line) for line in configuring]
        if placement is not None:
            placement = check_placement(placement)
        outcomes = magics.controller.change_all(changes)
    except (UsageError, ValueError) as err:
        magics.live.refresh()
        return Result(ok=False, message=str(err), outcomes=[], placement=None)
    if any(o.status is Status.PENDING for o in outcomes):  # the import's cell then says what became of them
        magics.controller.on_import_report = lambda line: None if magics.quiet else print(line)
    if placement is not None and magics.placement is not None:
        with contextlib.redirect_stdout(io.StringIO()):  # its one line would go nowhere visible anyway
            commands.dispatch(magics, f"placement {placement}", None)
    magics.live.refresh()
    return Result(ok=True, message=None, placement=placement,
                  outcomes=[{**o.to_dict(), "setting": c.setting, "asked": c.asked}
                            for c, o in zip(changes, outcomes, strict=True)])
