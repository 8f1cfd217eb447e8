"""``%tfgpu``: the IPython face, and loading and unloading the extension. Loading it is cheap: the subcommands
and the core they call are imported on the first ``%tfgpu`` call (commands.py routes them; syntax.py is
their table). Every user mistake is a one-line ``UsageError`` starting ``tfgpu:``; nothing here decides
what a setting means."""

from __future__ import annotations

import argparse
import sys

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.text import dedent
from traitlets import Any, observe, validate

from ..core.i18n import _
from ..core.inputs import OFF_WORDS, ON_WORDS, short_repr
from .context import LOADED, configure


@magics_class
class TfgpuMagics(Magics):
    """The ``%tfgpu`` magic. Options a user sets once per machine are traitlets: set them with
    ``%config TfgpuMagics.default_growth = True`` or in ``ipython_config.py``."""

    # Any, not Bool/Int: a config file or %config may hold any value, and a wrong type must get the
    # magic's one-line message, not a TraitError that stops %load_ext. _check_option validates.
    default_growth = Any(False, help="Turn memory growth on when the extension loads (True/False, on/off)."
                         ).tag(config=True)
    default_cpus = Any(0, help="Split the CPU into this many logical devices when the extension loads "
                              "(1 to 256; 0: leave TensorFlow's default).").tag(config=True)
    quiet = Any(False, help="Do not print a line after each configuring magic (True/False).").tag(config=True)
    refresh_interval = Any(1.0, help="Seconds between the live panel's refreshes (0.1 to 3600).").tag(config=True)
    # Comm messages count as the kernel's activity: live views that never stop would keep an idle kernel from culling.
    live_pause_after = Any(600, help="Seconds without a cell after which the live panel and the sidebar's kernel "
                           "channel stop refreshing until the next cell or Resume (0 to 2592000; 0: never)."
                           ).tag(config=True)
    log_mode = Any("quiet", help="How TensorFlow's own log shows under a cell: quiet (warnings and errors shown, "
                                 "information folded), all (every line, in one block) or raw (as without tfgpu)."
                   ).tag(config=True)
    # The sidebar's language (JupyterLab's, over the comm) wins over this; this wins over the locale (core/i18n.py).
    language = Any("", help="The language of tfgpu's messages and panel: a code such as zh_CN or en (\"\": the "
                   "language JupyterLab shows, else the locale's).").tag(config=True)

    def __init__(self, shell=None, controller=None, **kwargs):
        # Set before Magics.__init__, which loads the config and so runs the validators and observers.
        self._controller = controller
        self._ready = False
        self._good_options: dict[str, object] = {}
        self.placement = None  # the placement face, attached by load_extension when available
        self._live = None  # the live model, made on first use (a panel, or a cell once the extension is loaded)
        self.sidebar = None  # the sidebar's comm target (comm.py), registered by load_extension in a kernel
        self._panel = None  # what `%tfgpu panel` shows, again and again, until it is closed
        self.oom_watch = None  # the out-of-memory card's watch (ipython/oom.py), made by load_extension
        super().__init__(shell=shell, **kwargs)
        self._ready = True

    @property
    def controller(self):
        if self._controller is None:
            from ..core.control import default_controller

            self._controller = default_controller()
        return self._controller

    @controller.setter
    def controller(self, value):
        self._controller = value

    @property
    def live(self):
        """The kernel's live model: the process's own for the kernel's controller, else one of this object's."""
        if self._live is None:
            from ..core.control import default_controller
            from ..core.live import LiveModel, default_model

            if self._controller is None or self._controller is default_controller():
                self._live = default_model(self.controller)
            else:
                self._live = LiveModel(self.controller)
            self._live.interval = self.refresh_interval
            self._live.pause_after = self.live_pause_after
        return self._live

    # -- the panel ---------------------------------------------------------------------------------
    def shown_panel(self):
        """What `%tfgpu panel` shows, again and again, until it is closed."""
        from .panel import Panel

        if self._panel is None or self._panel.closed:
            self._panel = Panel(model=self.live, magics=self)
        return self._panel

    def close_panels(self) -> int:
        """Close every panel and stop the live model's refresher; returns how many panels were open."""
        from .panel import close_all

        closed = close_all()
        if self._live is not None:
            self._live.stop()
        return closed

    # -- traitlets ---------------------------------------------------------------------------------
    @validate("default_growth", "default_cpus", "quiet", "log_mode", "refresh_interval", "live_pause_after",
              "language")
    def _check_option(self, proposal):
        """The magic's own parsing for every option, from %config or a config file alike. A bad value
        is reported in one line and the option keeps its value: the load goes on."""
        name, value = proposal["trait"].name, proposal["value"]
        try:
            good = self._good_options[name] = _option_value(name, value)
            return good
        except ValueError as err:
            # Validators run after traitlets stored the new value: the last good one is kept apart.
            current = self._good_options.get(name, proposal["trait"].default_value)
            print(_("{error}; TfgpuMagics.{name} stays {value}").format(error=err, name=name, value=repr(current)),
                  file=sys.stderr)
            return current

    def apply_defaults(self) -> None:
        if not (self.default_growth or self.default_cpus):
            return  # the usual case: keep %load_ext from importing the core
        from ..core.settings.cpus import CPUS
        from ..core.settings.growth import GROWTH

        for setting, value in ((GROWTH, self.default_growth and True), (CPUS, self.default_cpus)):
            if value and not setting.asked(self.controller.plan):
                configure(self, setting.from_keyword(value, None, {}))

    @observe("refresh_interval")
    def _refresh_interval_changed(self, change):
        if self._live is not None:
            self._live.interval = change["new"]

    @observe("live_pause_after")
    def _live_pause_after_changed(self, change):
        if self._live is not None:
            self._live.pause_after = change["new"]

    @observe("language")
    def _language_changed(self, change):
        from ..core import i18n

        i18n.set_option(change["new"])

    @observe("log_mode")
    def _log_mode_changed(self, change):
        if self.placement is not None:
            self.placement.set_log_mode(change["new"])

    @observe("default_growth", "default_cpus")
    def _defaults_changed(self, change):
        if self._ready and self.shell is not None:
            try:
                self.apply_defaults()
            except UsageError as err:
                print(err, file=sys.stderr)

    # -- the magic ---------------------------------------------------------------------------------
    @magic_arguments()
    @argument("subcommand", nargs="?", default="status", help="a subcommand of the table below (`%%tfgpu help`)")
    @argument("args", nargs=argparse.REMAINDER, help="the subcommand's arguments (`%%tfgpu help`)")
    @line_cell_magic
    # Arguments as written: a saved value such as "{__import__('os').system(...)}" written as a first cell must
    # stay text, never be evaluated by IPython's {} and $ expansion (a GPU spec or size never needs it).
    @no_var_expand
    def tfgpu(self, line: str = "", cell: str | None = None):
        """Configure TensorFlow's GPUs before its first use, and see its devices, memory and placement.

        See `%tfgpu help` for every subcommand."""
        from .commands import dispatch

        return dispatch(self, line, cell)

# magic_arguments starts the docstring with "::", an RST literal block marker; %tfgpu? shows plain text.
TfgpuMagics.tfgpu.__doc__ = dedent(TfgpuMagics.tfgpu.__doc__ or "").removeprefix("::").lstrip()


def _full_doc() -> str:
    """`%tfgpu?`: the docstring with the usage table, whose settings' lines come from the registry. IPython's
    inspector asks an object's getdoc() first; made when asked, %load_ext stays free of the core."""
    from .syntax import usage

    return TfgpuMagics.tfgpu.__doc__ + "\n" + usage()


TfgpuMagics.tfgpu.getdoc = _full_doc

_OFF = (*OFF_WORDS, "")  # an empty option means its default, off


def _option_value(name: str, value):
    """An option's value as the magic would read it: a bool for the switches, 0..256 for default_cpus.
    Raises ValueError with a one-line ``tfgpu:`` message. The bound is the one ``%tfgpu cpus`` uses
    (plan.parse_count), imported only when a CPU count is actually set, so %load_ext stays cheap."""
    if name == "refresh_interval":
        from ..core.live import check_interval

        return check_interval(value)
    if name == "live_pause_after":
        from ..core.live import check_pause_after

        return check_pause_after(value)
    if name == "log_mode":
        from ..core.tflog import MODES  # small, and loaded by %load_ext anyway (the placement face uses it)

        if isinstance(value, str) and value.strip().lower() in MODES:
            return value.strip().lower()
        raise ValueError("tfgpu: " + _("bad TfgpuMagics.log_mode {value}: expected {modes}").format(
            value=short_repr(value), modes=", ".join(MODES)))
    if name == "language":
        # A language without a catalogue reads English, as gettext does: only a value that is no code is refused.
        if value is None or (isinstance(value, str) and len(value) <= 40 and
                             all(c.isalnum() or c in "_-.@" for c in value.strip())):
            return (value or "").strip()
        raise ValueError("tfgpu: " + _("bad TfgpuMagics.language {value}: expected a language code such as zh_CN or "
                                       "en, or \"\" for automatic").format(value=short_repr(value)))
    if name != "default_cpus":
        text = str(value).strip().lower() if isinstance(value, (str, bool, int)) else None
        if text in ON_WORDS:
            return True
        if text in _OFF:
            return False
        raise ValueError("tfgpu: " + _("bad TfgpuMagics.{name} {value}: expected True or False").format(
            name=name, value=short_repr(value)))
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in _OFF) or (
            type(value) is int and value == 0):
        return 0
    if not isinstance(value, (int, str)) or isinstance(value, bool):
        raise ValueError("tfgpu: " + _("bad TfgpuMagics.default_cpus {value}: expected a whole number from 1 to 256 (0 "
                                       "leaves TensorFlow's default)").format(value=short_repr(value)))
    from ..core.plan import PlanError, parse_count

    text = value if isinstance(value, str) else str(value) if value.bit_length() < 64 else "a 20+ digit number"
    try:
        return parse_count(text, what="TfgpuMagics.default_cpus")
    except PlanError as err:
        raise ValueError(_("{error} (0 leaves TensorFlow's default)").format(error=err)) from None



class _CellMemory:
    """Per-cell memory around each cell (the live model reads TensorFlow's allocators once its runtime runs),
    and, while a panel is open, its refresh right after the cell. Never raises into the user's cell."""

    def __init__(self, magics: TfgpuMagics):
        self.magics = magics

    def pre_run_cell(self, info=None) -> None:
        # Also before TensorFlow is imported: the cell that imports it and starts its runtime is recorded too.
        try:
            self.magics.live.cell_started()
        except Exception as err:  # shown in the panel's error line instead
            self.magics.live.refresh_failed(err)

    def post_run_cell(self, result=None) -> None:
        try:
            self.magics.controller.read_back()  # the cell may have configured TensorFlow itself
            live = self.magics.live
            live.cell_finished(getattr(result, "execution_count", None), bool(getattr(result, "success", True)))
            if live.subscribers:
                if self.magics.placement is not None:
                    live.set_placement(self.magics.placement.live_section())
                live.refresh()
        except Exception as err:
            self.magics.live.refresh_failed(err)


def extension_magics(shell) -> TfgpuMagics:
    """The shell's %tfgpu, loading the extension first if needed (saved settings at kernel start). Not through
    IPython's extension manager: a lesson's own `%load_ext tfgpu_magic` then finds nothing to say ("already
    loaded"), and registers it with the manager, so `%unload_ext` works from there on."""
    if id(shell) not in LOADED:
        load_extension(shell)
    return LOADED[id(shell)]


def load_extension(shell) -> None:
    if id(shell) in LOADED:
        return
    magics = TfgpuMagics(shell=shell)
    shell.register_magics(magics)
    shell.configurables.append(magics)
    try:
        from .placement import PlacementController
    except ImportError:
        PlacementController = None
    if PlacementController is not None:
        magics.placement = PlacementController(shell, log_mode=magics.log_mode)
        magics.placement.register()
    LOADED[id(shell)] = magics
    cells = magics._cell_memory = _CellMemory(magics)
    shell.events.register("pre_run_cell", cells.pre_run_cell)
    shell.events.register("post_run_cell", cells.post_run_cell)  # after placement's: its summary is ready
    from .oom import OomWatch

    magics.oom_watch = OomWatch(magics)  # the card under a cell that ran out of memory (TensorFlow's own error)
    shell.events.register("post_run_cell", magics.oom_watch.post_run_cell)
    from .completion import register as register_completion

    register_completion(shell)
    from .comm import SidebarChannel

    magics.sidebar = SidebarChannel(magics)
    magics.sidebar.register(shell)  # only in a kernel: the JupyterLab sidebar's channel to the live model
    _register_html_forms(shell, magics.placement)
    magics.apply_defaults()
    from ..core import handshake

    handshake.install()  # in a container only: an import hook that learns the kernel's host PID (no thread)
    from . import import_notice

    magics.import_notice = import_notice.install(lambda: magics.quiet)


def _html_form(obj) -> str:
    from ..render.placement import html_of  # the renderers load with the first summary shown, not at %load_ext

    return html_of(obj)


def _register_html_forms(shell, placement) -> None:
    """The core's placement summaries and log blocks are data with a text repr; the shell shows them as HTML.
    Their classes are loaded already (the placement face uses them), so this imports nothing."""
    if placement is None:
        return
    from ..core.placement.summary import CellSummary, RecordTable
    from ..core.tflog import LogBlock

    formatter = shell.display_formatter.formatters["text/html"]
    for kind in (CellSummary, RecordTable, LogBlock):
        formatter.for_type(kind, _html_form)


def _unregister_html_forms(shell) -> None:
    formatter = shell.display_formatter.formatters["text/html"]
    for kind in list(formatter.type_printers):
        if formatter.type_printers[kind] is _html_form:
            formatter.pop(kind)


def unload_extension(shell) -> None:
    magics = LOADED.pop(id(shell), None)
    if magics is None:
        return
    from .completion import unregister as unregister_completion

    unregister_completion(shell)
    cells = getattr(magics, "_cell_memory", None)
    for name in ("pre_run_cell", "post_run_cell"):
        if cells is not None and getattr(cells, name) in shell.events.callbacks[name]:
            shell.events.unregister(name, getattr(cells, name))
    watch = getattr(magics, "oom_watch", None)
    if watch is not None and watch.post_run_cell in shell.events.callbacks["post_run_cell"]:
        shell.events.unregister("post_run_cell", watch.post_run_cell)
    if magics.sidebar is not None:
        magics.sidebar.unregister()
    if magics._live is not None:
        magics.close_panels()
    capturing = magics.placement is not None and magics.placement.mode == "on"
    if magics.placement is not None:
        magics.placement.unregister()
    dropped = _drop_pending(magics.controller) if magics._controller is not None else []
    if dropped or capturing:
        said = [f"dropped settings that had not taken effect: {', '.join(dropped)}"] if dropped else []
        said += ["placement capture is off (`%tfgpu placement on` after loading again)"] if capturing else []
        print(f"tfgpu: unloaded; {'; '.join(said)}")
    for kind in ("line", "cell"):
        shell.magics_manager.magics[kind].pop("tfgpu", None)
    from . import import_notice

    import_notice.uninstall(getattr(magics, "import_notice", None))
    if magics in shell.configurables:
        shell.configurables.remove(magics)
    _unregister_html_forms(shell)
    from ..core import i18n

    i18n.set_option("")  # the option and the sidebar's language went with the extension: the locale decides
    i18n.set_language(None)


def _drop_pending(controller) -> list[str]:
    """Without the extension nothing would report on settings waiting for import: drop them and remove
    the import hook. Returns what was dropped, for the caller to say."""
    from ..core.runtime import TFState

    dropped = []
    if controller.probe().state < TFState.IMPORTED and not controller.plan.is_empty():
        dropped = controller.reset()
    controller.unhook()
    return dropped


__all__ = ["TfgpuMagics", "load_extension", "unload_extension"]
