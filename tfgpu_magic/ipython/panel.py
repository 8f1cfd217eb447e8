"""The live panel: an ipywidgets face of the live model (core/live.py), rendered by render/live_html.py.

Standard ipywidgets 8 only (HTML, Tab, Text, Dropdown, Button), so it renders wherever widgets do: JupyterLab 4,
Notebook 7, VS Code. A panel subscribes to the kernel's one model; every open panel shares its refresher thread,
and the last panel closed stops it. Widgets are only ever given new values when their rendered HTML differs, so
a refresh in which nothing changed sends no comm message. The controls apply settings the way the magic does
(core/changes.py parses, context.configure applies), so a value the magic refuses gets the magic's message,
here, and changes nothing; a refusal as too late shows "Restart kernel and apply", as one from any face does.
"""

from __future__ import annotations

import contextlib
import io
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
from IPython.core.error import UsageError

from ..core.changes import parse_change
from ..core.live import LiveModel, default_model
from ..core.plan import PlanError
from ..core.saved import first_cell
from ..render import live_html
from ..render.views import inline
from .context import configure, loaded_in

_open: weakref.WeakSet[Panel] = weakref.WeakSet()


@dataclass
class BareExtension:
    """The parts a panel's controls need when the extension is not loaded: a model's controller, no capture."""

    controller: Any
    live: Any
    placement: Any = None
    sidebar: Any = None
    quiet: bool = False
    shell: Any = None


# (subcommand, label, widget kind, choices or placeholder)
CONTROLS = (
    ("visible", "visible GPUs", "text", "0 | 1,3 | all | none | auto:1"),
    ("growth", "memory growth", "choice", ("on", "off")),
    ("limit", "memory limit", "text", "4GB | 40% | off  [--gpu I]"),
    ("cpus", "logical CPUs", "text", "N | off"),
    ("cpumem", "CPU figures", "choice", ("on", "off")),
    ("placement", "placement log", "choice", ("on", "off")),
)
FIXED = ("fixed: TensorFlow's runtime has started; restart the kernel and set it before its first operation "
         "(or `%tfgpu export` for a script)")
TABS = ("Memory", "Devices", "Cells", "Placement", "Settings")


class Panel(widgets.VBox):
    """``tfgpu_magic.Panel()``: the kernel's devices, memory (with history), recent cells, placement log and
    settings, live. ``model``: a LiveModel (default: the kernel's); ``magics``: the ``%tfgpu`` magics object whose
    controller and placement capture the controls use (default: the loaded extension's, if any)."""

    def __init__(self, model: LiveModel | None = None, magics: Any = None, **kwargs):
        magics = magics if magics is not None else _loaded_magics()
        self._magics = magics
        self.model = model if model is not None else (magics.live if magics is not None else default_model())
        html = {name: widgets.HTML() for name in ("header", "memory", "chart", "devices", "cells", "summary",
                                                   "records", "message", "error")}
        self._html = html
        self._device_filter = widgets.Dropdown(options=[("every device", "")], value="", description="device",
                                               layout=widgets.Layout(width="220px"))
        self._op_filter = widgets.Text(value="", placeholder="op or op type contains", description="op",
                                       continuous_update=True, layout=widgets.Layout(width="260px"))
        for control in (self._device_filter, self._op_filter):
            control.observe(self._filter_changed, names="value")
        self._inputs: dict[str, widgets.Widget] = {}
        self._buttons: dict[str, widgets.Button] = {}
        self._reasons: dict[str, widgets.HTML] = {}
        rows = [self._control_row(*spec) for spec in CONTROLS]
        close = widgets.Button(description="Close panel", tooltip="close every view of this panel and stop its "
                               "refresh", layout=widgets.Layout(width="auto"))
        close.on_click(lambda _: self.close())
        # Shown once a setting was refused as too late (by any face): the frontend restarts and applies it.
        self._restart = widgets.Button(description="Restart kernel and apply", button_style="warning",
                                       tooltip="restart this kernel (its variables are lost) and apply the settings "
                                       "asked for, the refused ones included, before anything else",
                                       layout=widgets.Layout(width="auto", display="none"))
        self._restart.on_click(lambda _: self.restart_and_apply())
        tabs = widgets.Tab(children=[
            widgets.VBox([html["memory"], html["chart"]]),
            html["devices"],
            html["cells"],
            widgets.VBox([html["summary"], widgets.HBox([self._device_filter, self._op_filter]), html["records"]]),
            widgets.VBox([*rows, self._restart, html["message"]]),
        ], titles=TABS)
        super().__init__(children=[html["header"], tabs, widgets.HBox([html["error"], close])], **kwargs)
        self.add_class("tfgpu-panel")
        self._state: dict[str, Any] = {}
        self._render_lock = threading.Lock()  # the refresher and a cell's end may both hand over changes
        self._push_placement()
        # Subscribed first: the model's refresher reads NVML, so a hung driver does not hold the panel's opening.
        self._token: int | None = self.model.subscribe(self._render)
        self._render(self.model.state())
        _open.add(self)

    # What a page shows where the live view cannot be drawn: a notebook saved and opened again, nbconvert's HTML,
    # GitHub. The text is the whole message: a kernel that restarted has no model behind this output any more.
    DEAD_TEXT = ("tfgpu live panel. If this is not live, the kernel it belonged to has restarted (or this is a saved "
                 "copy): run `%tfgpu panel` for a live one.")

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if data is None:
            return None
        data["text/plain"] = self.DEAD_TEXT
        data["text/html"] = ("<div class='tfgpu-panel-fallback' style='font-family:var(--jp-ui-font-family,"
                             "sans-serif);color:var(--jp-ui-font-color1,#212121)'>"
                             + inline(self.DEAD_TEXT) + "</div>")
        return data

    # -- building ------------------------------------------------------------------------------------------
    def _control_row(self, name: str, label: str, kind: str, hint) -> widgets.HBox:
        if kind == "text":
            control = widgets.Text(value="", placeholder=hint, layout=widgets.Layout(width="240px"))
        else:
            control = widgets.Dropdown(options=list(hint), value=None, layout=widgets.Layout(width="240px"))
        button = widgets.Button(description="Apply", tooltip=f"%tfgpu {name} ...", layout=widgets.Layout(width="80px"))
        button.on_click(lambda _, n=name: self.apply(n))
        reason = widgets.HTML()
        self._inputs[name], self._buttons[name], self._reasons[name] = control, button, reason
        return widgets.HBox([widgets.Label(label, layout=widgets.Layout(width="120px")), control, button, reason])

    # -- the controls ----------------------------------------------------------------------------------------
    def apply(self, name: str, value: str | None = None) -> str:
        """Run ``%tfgpu NAME VALUE`` (VALUE: the control's, by default) as the magic would, show its line (or the
        refusal) in the panel, and return it."""
        value = self._inputs[name].value if value is None else value
        line = f"{name} {value or ''}".strip()
        out = io.StringIO()
        refused = False
        try:
            with contextlib.redirect_stdout(out):
                self._run(name, line)
            text = " ".join(out.getvalue().split()) or f"tfgpu: %tfgpu {line}: done"
        except UsageError as err:
            text, refused = str(err), True
        except Exception as err:  # a bug must show in the panel, not vanish in a comm handler
            text, refused = f"tfgpu: %tfgpu {line} failed: {type(err).__name__}: {err}", True
        self._html["message"].value = live_html.message_html(text, refused)
        self._push_placement()
        self.model.refresh()
        return text

    def restart_and_apply(self) -> str:
        """Ask the JupyterLab sidebar (through its kernel channel) to restart the kernel and apply the settings
        wanted; where no frontend with the extension listens, say the two steps. Returns what it showed."""
        wanted = (self._state.get("kernel") or {}).get("wanted") or {}
        sidebar = getattr(self._magics, "sidebar", None)
        asked = sidebar.ask_restart_and_apply(wanted) if sidebar is not None else 0
        if asked:
            text = ("tfgpu: asked JupyterLab to restart the kernel and apply the settings: confirm in its dialog "
                    "(this kernel's variables are lost)")
        else:
            cell = first_cell({"settings": wanted}).replace("\n", "; ")
            text = (f"tfgpu: no GPUs sidebar is listening to this kernel; do it in two steps: restart the kernel "
                    f"(Kernel > Restart Kernel), then run first: {cell}")
        self._html["message"].value = live_html.message_html(text, False)
        return text

    def _run(self, name: str, line: str) -> None:
        ext = self._magics or BareExtension(controller=self.model.controller, live=self.model)
        if name == "placement":
            if ext.placement is None:
                raise UsageError("tfgpu: placement capture is not available in this installation")
            ext.placement.command(line.split()[1:])
            return
        try:
            change = parse_change(line)
        except PlanError as err:
            raise UsageError(str(err)) from None
        configure(ext, change)

    def _filter_changed(self, change=None) -> None:
        self._html["records"].value = live_html.records_html(self._state.get("placement"), self._device_filter.value,
                                                             self._op_filter.value)

    # -- the model -----------------------------------------------------------------------------------------------
    def _push_placement(self) -> None:
        placement = getattr(self._magics, "placement", None)
        if placement is not None:
            self.model.set_placement(placement.live_section())

    def _render(self, changes: dict[str, Any]) -> None:
        with self._render_lock:
            self._render_locked(changes)

    def _render_locked(self, changes: dict[str, Any]) -> None:
        self._state.update(changes)
        state = self._state
        html = self._html
        kernel, gpus, memory = state.get("kernel"), state.get("gpus"), state.get("memory")
        if kernel is not None and ("kernel" in changes or "gpus" in changes):
            html["header"].value = live_html.header_html(kernel)
            html["devices"].value = live_html.devices_html(kernel, gpus or {})
            self._enable_controls(kernel)
        if gpus is not None and memory is not None and ("gpus" in changes or "memory" in changes):
            html["memory"].value = live_html.memory_html(gpus, memory)
        if "history" in changes:
            html["chart"].value = live_html.chart_html(state["history"])
        if "cells" in changes or "memory" in changes:
            html["cells"].value = live_html.cells_html(state.get("cells") or [], memory)
        if "placement" in changes:
            placement = state.get("placement")
            html["summary"].value = live_html.placement_summary_html(placement)
            devices = sorted({r["short_device"] for r in (placement or {}).get("records") or ()})
            kinds = sorted({d.split(":")[0] for d in devices})
            options = [("every device", ""), *((f"every {k}", k) for k in kinds), *((d, d) for d in devices)]
            if list(self._device_filter.options) != options:
                keep = self._device_filter.value if self._device_filter.value in dict(options).values() else ""
                self._device_filter.options = options
                self._device_filter.value = keep
            self._filter_changed()
        if "error" in changes:
            html["error"].value = live_html.error_html(state.get("error"))

    def _enable_controls(self, kernel: dict) -> None:
        self._restart.layout.display = "" if kernel.get("refused") else "none"
        started = kernel["tensorflow"]["state"] == "initialized"
        capture = getattr(self._magics, "placement", None) is not None
        for name, control in self._inputs.items():
            if name == "placement":
                off = not capture
                why = "" if capture else "placement capture needs the extension: `%load_ext tfgpu_magic`"
            else:
                off, why = started, FIXED if started else ""
            control.disabled = self._buttons[name].disabled = off
            self._reasons[name].value = f"<span style='font-size:11px'>{live_html.esc(why)}</span>" if why else ""

    # -- closing -------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every view of this panel; the last panel closed stops the refresher."""
        token, self._token = getattr(self, "_token", None), None
        if token is not None:
            self.model.unsubscribe(token)
        _open.discard(self)
        for widget in list(_descendants(self)):  # ipywidgets does not close a box's children with it
            widget.close()
        super().close()

    @property
    def closed(self) -> bool:
        return self.comm is None


def _descendants(widget: widgets.Widget):
    for child in getattr(widget, "children", ()):
        yield child
        yield from _descendants(child)


def close_all() -> int:
    """Close every open panel (``%tfgpu panel --close``, ``%unload_ext``); returns how many."""
    panels = list(_open)
    for panel in panels:
        panel.close()
    return len(panels)


def _loaded_magics():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return loaded_in(get_ipython())


__all__ = ["Panel", "close_all"]
