"""The live panel: an ipywidgets face of the live model (core/live.py), rendered by render/live_html.py.

Standard ipywidgets 8 only (HTML, Tab, GridBox, Text, Dropdown, Button), so it renders wherever widgets do:
JupyterLab 4, Notebook 7, VS Code. A panel subscribes to the kernel's one model; every open panel shares its
refresher thread, and the last panel closed stops it. Widgets are only ever given new values when their rendered
HTML differs, so a refresh in which nothing changed sends no comm message. The controls apply settings the way the
magic does (core/changes.py parses, context.configure applies), so a value the magic refuses gets the magic's
message, here, and changes nothing; a refusal as too late shows "Restart kernel and apply", as one from any face
does.

While the live model is paused (the kernel idle for ``TfgpuMagics.live_pause_after`` seconds, or every page with
the sidebar hidden: core/live.py) a panel sends nothing but one line, "paused: ...", with a Resume button; a cell,
that button or an Apply resumes it, and it takes the whole state again.

The Settings tab is a form on one grid (a label column as wide as its longest label, so none is ever cut): each
input shows the value in force, from the controller's state (a value it refused never stays in an input), with
what became of it under it in the vocabulary's words (core/words.py); why inputs are disabled is said once, above
the form; the message line under it says what the last action did and is cleared by the next one.
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

from ..core import settings as registry
from ..core import words
from ..core.changes import parse_change
from ..core.i18n import N_, _
from ..core.live import LiveModel, default_model
from ..core.plan import ALL, PlanError
from ..core.saved import first_cell
from ..core.settings.base import Control
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


PLACEMENT = "placement"  # the placement log's switch: a control of the panel's own, beside the settings'
_PLACEMENT_CONTROL = Control(N_("placement log"), "choice", ("on", "off"), "off")


def controls() -> list[tuple[str, Control]]:
    """(subcommand, its control) for each row of the form: every registered setting with a control (core/settings/),
    in apply order, then the placement log."""
    return [*((s.name, s.words.control) for s in registry.settings() if s.words.control), (PLACEMENT,
                                                                                          _PLACEMENT_CONTROL)]


PAUSED = {  # the live model's pause reasons (core/live.PAUSE_REASONS), as the panel says them
    "idle": N_("paused: the kernel is idle, so this panel sends nothing (an idle kernel can then be shut down by the "
               "server's culler); the next cell or Resume refreshes it again"),
    "hidden": N_("paused: the page is hidden, so this panel sends nothing; it refreshes again when the page is shown"),
}
FIXED = N_("TensorFlow's runtime has started, so {names} are fixed until the kernel restarts: restart it and set "
           "them before its first operation (or `%tfgpu export` for a script).")
NEEDS_EXTENSION = N_("The placement log needs the extension: `%load_ext tfgpu_magic`.")
NOT_ASKED = N_("TensorFlow's default")  # after the vocabulary's "not asked"


def _not_asked(control: Control, name: str) -> str:
    if name == PLACEMENT:
        return words.setting_state("not_asked")
    return f"{words.setting_state('not_asked')}: {_(control.not_asked or NOT_ASKED)}"


# label | input | Apply, and under the input what became of it. The label column is as wide as its longest label
# (never cut); the inputs' column is one width for all, narrower only where the panel is; what became of a setting
# wraps under its input, so the form fits a narrow panel without cutting anything off.
SETTINGS_COLUMNS = "max-content minmax(3em, 18em) max-content"
TABS = (N_("Memory"), N_("Devices"), N_("Cells"), N_("Placement"), N_("Settings"))  # translated when a panel is made


@dataclass(frozen=True)
class InForce:
    """One control's value in force (what its input shows) and what became of it, in the vocabulary's words."""

    value: str
    state: str
    level: str = "info"


def in_force(kernel: dict, environ: Any = None, placement: dict | None = None) -> dict[str, InForce]:
    """Each control's value in force, from the controller's state (the snapshot's settings rows; a setting never
    asked has TensorFlow's default, or the environment's where a variable decides it). A value refused as too late
    is not in force: it is said beside the value that is, never shown as the input's value."""
    environ = environ if environ is not None else {}
    rows: dict[str, list[dict]] = {}
    for row in kernel.get("settings") or ():
        rows.setdefault(row["setting"].partition("[")[0], []).append(row)
    refused = {r["setting"]: r["asked"] for r in kernel.get("refused") or ()}
    out = {}
    for name, control in controls():
        asked = rows.get(name)
        default = control.default
        if name == PLACEMENT:
            mode = ((placement or {}).get("status") or {}).get("mode")
            value = mode if mode in ("on", "off") else default
            found = InForce(value, "" if placement is None else _not_asked(control, name) if mode not in ("on", "off")
                            else "capturing" if value == "on" else "not capturing")
        elif asked:
            values = []
            for row in asked:
                gpu = row["setting"].partition("[")[2].rstrip("]")
                values.append(row["asked"] if gpu in ("", ALL) else f"{row['asked']} --gpu {gpu}")
            states = list(dict.fromkeys(row["status"] for row in asked))
            level = max((words.setting_level(s) for s in states), key=LEVELS.index)
            found = InForce("; ".join(values), "; ".join(words.setting_state(s) for s in states), level)
        else:
            value = default
            variable = control.variable
            if variable and environ.get(variable) in ("true", "false"):
                value = "on" if environ[variable] == "true" else "off"
                found = InForce(value, f"{words.setting_state('not_asked')}: {variable}={environ[variable]}")
            else:
                found = InForce(value, _not_asked(control, name))
        if name in refused:
            found = InForce(found.value, f"{found.state}; {refused[name]} {words.setting_state('refused')}: too late "
                            "(it applies after a restart)", "error")
        out[name] = found
    return out


LEVELS = ("ok", "info", "warn", "error")  # words.setting_level's, least first


DEAD_NOTE = ("This panel belonged to a kernel that has restarted: its figures are from before the restart. Run "
             "`%tfgpu panel` for a live one.")
# ipywidgets also puts a broken-link sign before every disconnected view, which in the form's grid is one more grid
# item (the form falls apart): the note says it once instead, and the old figures are dimmed.
DEAD_NOTE_HTML = ("<style>.tfgpu-dead-note{display:none}.jupyter-widgets-disconnected .tfgpu-dead-note{display:block}"
                  ".tfgpu-panel.jupyter-widgets-disconnected::before,.tfgpu-panel .jupyter-widgets-disconnected::before"
                  "{content:none;display:none}.tfgpu-panel.jupyter-widgets-disconnected>:not(.tfgpu-dead){opacity:.5}"
                  "</style><div class='tfgpu-dead-note' role='status' style='margin:0 0 6px 0;padding:4px 8px;"
                  "border-left:3px solid var(--jp-warn-color1,#f57c00);color:var(--jp-ui-font-color1,#212121);"
                  f"font-family:var(--jp-ui-font-family,sans-serif)'>{inline(DEAD_NOTE)}</div>")


def with_fallback(data: dict[str, Any]) -> dict[str, Any]:
    """A panel's mime bundle with its text for where the widget cannot be drawn. The sidebar's extension finds a
    saved panel by the class of its HTML (labextension/src/model/savedpanel.ts) and shows the text there too."""
    return {**data, "text/plain": Panel.DEAD_TEXT,
            "text/html": ("<div class='tfgpu-panel-fallback' style='font-family:var(--jp-ui-font-family,"
                          "sans-serif);color:var(--jp-ui-font-color1,#212121)'>" + inline(Panel.DEAD_TEXT) + "</div>")}


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
        self._device_filter = widgets.Dropdown(options=[(_("every device"), "")], value="", description=_("device"),
                                               layout=widgets.Layout(width="220px"))
        self._op_filter = widgets.Text(value="", placeholder=_("op or op type contains"), description="op",
                                       continuous_update=True, layout=widgets.Layout(width="260px"))
        for control in (self._device_filter, self._op_filter):
            control.observe(self._filter_changed, names="value")
        self._inputs: dict[str, widgets.Widget] = {}
        self._buttons: dict[str, widgets.Button] = {}
        self._states: dict[str, widgets.HTML] = {}
        self._shown: dict[str, str] = {}  # the value in force each input was last given
        self._syncing = False  # True while the panel itself sets an input (not the user's edit)
        self._tf_state: str | None = None
        html["notice"] = widgets.HTML()  # why inputs are disabled: once, for the whole tab
        cells: list[widgets.Widget] = []
        for name, control in controls():
            cells += self._control_row(name, _(control.label), control.kind, control.hint, control.default)
        form = widgets.GridBox(cells, layout=widgets.Layout(grid_template_columns=SETTINGS_COLUMNS,
                                                            grid_gap="2px 10px", align_items="center",
                                                            width="100%", margin="4px 0"))
        close = widgets.Button(description=_("Close panel"), tooltip=_("close every view of this panel and stop its "
                                                                       "refresh"), layout=widgets.Layout(width="auto"))
        close.on_click(lambda _button: self.close())
        # Shown once a setting was refused as too late (by any face): the frontend restarts and applies it.
        self._restart = widgets.Button(description=_("Restart kernel and apply"), button_style="danger",
                                       tooltip=_("restart this kernel (its variables are lost) and apply the settings "
                                                 "asked for, the refused ones included, before anything else"),
                                       layout=widgets.Layout(width="auto", display="none", align_self="flex-start",
                                                             margin="8px 0 0 0"))
        self._restart.on_click(lambda _button: self.restart_and_apply())
        # While paused: one line and Resume, each made once; pausing and resuming set only the box's children, so
        # each is one comm message per view.
        resume = widgets.Button(description=_("Resume"), tooltip=_("refresh this panel again (it pauses again after "
                                                                   "the idle time without a cell)"),
                                layout=widgets.Layout(width="auto", margin="0 0 0 10px"))
        resume.on_click(lambda _button: self.resume())
        self._paused_lines = {reason: widgets.HTML(value=live_html.message_html(_(text), False))
                              for reason, text in PAUSED.items()}
        self._resume = resume
        self._pause_widgets = [*self._paused_lines.values(), resume]
        self._paused_box = widgets.HBox([], layout=widgets.Layout(align_items="center"))
        tabs = widgets.Tab(children=[
            widgets.VBox([html["memory"], html["chart"]]),
            html["devices"],
            html["cells"],
            widgets.VBox([html["summary"], widgets.HBox([self._device_filter, self._op_filter]), html["records"]]),
            widgets.VBox([html["notice"], form, self._restart, html["message"]]),
        ], titles=[_(title) for title in TABS])
        # Hidden while the kernel lives: when it restarts, ipywidgets marks every view of this panel
        # `jupyter-widgets-disconnected` and keeps it on screen with its old figures; the rule then shows this line.
        dead = widgets.HTML(value=DEAD_NOTE_HTML, layout=widgets.Layout(margin="0"))
        dead.add_class("tfgpu-dead")
        super().__init__(children=[dead, html["header"], self._paused_box, tabs, widgets.HBox([html["error"], close])],
                         **kwargs)
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
        return None if data is None else with_fallback(data)

    # -- building ------------------------------------------------------------------------------------------
    def _control_row(self, name: str, label: str, kind: str, hint, default: str) -> list[widgets.Widget]:
        """Two rows of the form: label, input (showing the value in force), Apply; under the input, what became of
        the setting."""
        fill = widgets.Layout(width="100%", margin="0")
        # The label is a widget of its own (one column of the grid), so the input's own description is empty and its
        # <label> hidden: the tooltip, which ipywidgets then puts on the <select>/<input> itself, names it for screen
        # readers (axe's select-name).
        if kind == "text":
            control = widgets.Text(value=default, placeholder=hint, layout=fill, tooltip=label)
        else:
            control = widgets.Dropdown(options=list(hint), value=default, layout=fill, tooltip=label)
        control.observe(self._edited, names="value")
        button = widgets.Button(description=_("Apply"), tooltip=f"%tfgpu {name} ...",
                                layout=widgets.Layout(width="auto", margin="0"))
        button.on_click(lambda _button, n=name: self.apply(n))
        # In the inputs' column only: spanning the Apply column too would widen that (max-content) column to the
        # state's whole text. grid_area, not grid_column: the frontend sets each layout property in turn, and
        # clearing the (unset) grid-area shorthand after would clear a grid-column set before it.
        state = widgets.HTML(layout=widgets.Layout(margin="0 0 6px 0", grid_area="auto / 2 / auto / span 1",
                                                   min_width="0"))
        self._inputs[name], self._buttons[name], self._states[name] = control, button, state
        self._shown[name] = default
        # overflow initial (CSS's initial value, visible): a Label cuts its text with an ellipsis when its box is
        # narrower (the column is not).
        label_ = widgets.Label(label, layout=widgets.Layout(width="auto", overflow="initial", margin="0"))
        return [label_, control, button, _spacer(), state, _spacer()]

    # -- the controls ----------------------------------------------------------------------------------------
    def apply(self, name: str, value: str | None = None) -> str:
        """Run ``%tfgpu NAME VALUE`` (VALUE: the control's, by default) as the magic would, show its line (or the
        refusal) in the panel, and return it."""
        value = self._inputs[name].value if value is None else value
        line = f"{name} {value or ''}".strip()
        self._say("")  # the last action's message goes with the next action
        self.model.resume()  # somebody uses the panel: it refreshes again
        out = io.StringIO()
        refused = False
        try:
            with contextlib.redirect_stdout(out):
                self._run(name, line)
            # Its lines as the magic printed them: a detail too long for the first is on an indented second line.
            text = "\n".join(shown.rstrip() for shown in out.getvalue().splitlines() if shown.strip()) or \
                f"tfgpu: %tfgpu {line}: done"
        except UsageError as err:
            text, refused = str(err), True
        except Exception as err:  # a bug must show in the panel, not vanish in a comm handler
            text, refused = f"tfgpu: %tfgpu {line} failed: {type(err).__name__}: {err}", True
        self._push_placement()
        self.model.refresh()
        with self._render_lock:  # the refresher may be syncing the inputs too
            self._sync_inputs(force=True)  # a refused value leaves the input: it shows the value in force again
        self._say(text, refused)
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
            # One line a line, as they must be typed: joined with "; " the cell was one line, which fails
            # (`%load_ext` takes the rest of its line as the module's name).
            text = (f"tfgpu: no GPUs sidebar is listening to this kernel; do it in two steps: restart the kernel "
                    f"(Kernel > Restart Kernel), then run this cell first:\n{first_cell({'settings': wanted})}")
        self._say(text)
        return text

    def resume(self) -> None:
        """The Resume button: the model refreshes every view again, this one with the whole state."""
        self.model.resume()

    def _say(self, text: str, refused: bool = False) -> None:
        self._html["message"].value = live_html.message_html(text, refused)

    def _edited(self, change=None) -> None:
        """The user changed an input: the message about the last action is stale now."""
        if not self._syncing and self._html["message"].value:
            self._say("")

    def _run(self, name: str, line: str) -> None:
        ext = self._magics or BareExtension(controller=self.model.controller, live=self.model)
        if name == PLACEMENT:
            if ext.placement is None:
                raise UsageError("tfgpu: " + _("placement capture is not available in this installation"))
            ext.placement.command(line.split()[1:])
            return
        # One entry per GPU, as the input shows several ("4GiB --gpu 0; 2GiB --gpu 1"): each its own change.
        per_gpu = name != PLACEMENT and registry.get(name).per_gpu
        parts = [p.strip() for p in line.removeprefix(name).split(";")] if per_gpu else [None]
        try:
            changes = [parse_change(line if p is None else f"{name} {p}") for p in parts if p != ""] or \
                [parse_change(line)]  # nothing given: the magic's own one-line refusal
        except PlanError as err:
            raise UsageError(str(err)) from None
        for change in changes:
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
            if kernel is not None:
                self._sync_inputs()
        if "error" in changes:
            html["error"].value = live_html.error_html(state.get("error"))
        if "paused" in changes:
            paused = changes["paused"]
            line = self._paused_lines.get(paused["reason"]) if paused else None
            self._paused_box.children = (line, self._resume) if line is not None else ()

    def _enable_controls(self, kernel: dict) -> None:
        self._restart.layout.display = "" if kernel.get("refused") else "none"
        state = kernel["tensorflow"]["state"]
        if self._tf_state is not None and state != self._tf_state:
            self._say("")  # "waiting for import" and the like no longer say how things are
        self._tf_state = state
        started = state == "initialized"
        capture = getattr(self._magics, "placement", None) is not None
        for name, control in self._inputs.items():
            off = not capture if name == PLACEMENT else started
            control.disabled = self._buttons[name].disabled = off
        reasons = []
        if started:
            # Every setting's control: TensorFlow reads them all when its runtime starts.
            labels = [_(control.label) for name, control in controls() if name != PLACEMENT]
            reasons.append(_(FIXED).format(names=_("{names} and {last}").format(names=", ".join(labels[:-1]),
                                                                                 last=labels[-1])))
        if not capture:
            reasons.append(_(NEEDS_EXTENSION))
        self._html["notice"].value = live_html.notice_html(reasons)
        self._sync_inputs()

    def _sync_inputs(self, force: bool = False) -> None:
        """Each input shows the value in force; one the user is editing is left alone until that value changes."""
        kernel = self._state.get("kernel")
        if kernel is None:
            return
        environ = getattr(self.model.controller, "environ", None)
        found = in_force(kernel, environ, self._state.get("placement") if self._placement_known() else None)
        self._syncing = True
        try:
            for name, control in self._inputs.items():
                now = found[name]
                if force or now.value != self._shown[name]:
                    if isinstance(control, widgets.Dropdown) and now.value not in control.options:
                        continue
                    control.value = now.value
                    self._shown[name] = now.value
                self._states[name].value = live_html.in_force_html(now.state, now.level)
        finally:
            self._syncing = False

    def _placement_known(self) -> bool:
        return getattr(self._magics, "placement", None) is not None

    # -- closing -------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every view of this panel; the last panel closed stops the refresher."""
        token, self._token = getattr(self, "_token", None), None
        if token is not None:
            self.model.unsubscribe(token)
        _open.discard(self)
        # ipywidgets does not close a box's children with it; the pause's widgets are children only while paused.
        for widget in [*_descendants(self), *getattr(self, "_pause_widgets", ())]:
            widget.close()
        super().close()

    @property
    def closed(self) -> bool:
        return self.comm is None


def _spacer() -> widgets.HTML:
    """An empty cell of the Settings form (under a label, under an Apply button)."""
    return widgets.HTML(layout=widgets.Layout(margin="0"))


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
