"""``%tfgpu`` at the keyboard: Tab completion, ``%tfgpu help SUBCOMMAND`` and ``%tfgpu SUBCOMMAND?``.

Tab goes through IPython's completer, which terminal IPython and ipykernel (so JupyterLab) share. On
IPython 8.6 and later the completer is a matcher of API v2: it names the text it replaces (``/C`` in
``%%tfgpu device /C``, which IPython's own splitting would cut at the slash) and suppresses IPython's
other matchers whenever it has something to offer, so no Python keyword or file name shows up after
``%tfgpu``. Older IPython only has the ``complete_command`` hook, used there instead.

Loading this module imports nothing of the core. The first Tab on a ``%tfgpu`` line imports the
subcommands (their parsers list the options) and asks NVML for the GPUs through the magic's own
controller, at most every few seconds; nothing here imports TensorFlow or starts its runtime.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from . import syntax

# A longer line is no one typing: answering nothing at once beats parsing it on every key.
MAX_LINE = 1000
# A completer runs on every Tab, and an NVML snapshot reads every GPU (its first also loads the library):
# the GPU list is read at most this often.
GPU_CACHE_S = 5.0

_LINE = re.compile(r"^\s*(?P<assign>[A-Za-z_]\w*\s*=\s*)?(?P<escape>%%|%)tfgpu\s(?P<rest>.*)$")
# `%tfgpu visible?` reaches IPython's object inspector as `visible`, the magic lost: the line is read
# as `%tfgpu help visible` before IPython's own `?` handling sees it.
_QUESTION = re.compile(r"^(?P<indent>\s*)%tfgpu\s+(?P<name>[A-Za-z]+)\s*\?\??\s*$")

# -- what a line can go on with ---------------------------------------------------------------------
class _Spec:
    """What a subcommand takes: ``positionals`` words from ``words(fragment)``, and options, each
    mapped to the values it offers (``None``: a flag that takes no value)."""

    def __init__(self, positionals: int, words: Callable[[str], list[str]],
                 options: dict[str, Callable[[str], list[str]] | None]):
        self.positionals = positionals
        self.words = words
        self.options = options


def _none(fragment: str) -> list[str]:
    return []


class TfgpuCompleter:
    """Completions for one shell's ``%tfgpu`` lines, with the GPUs of the controller its magic uses."""

    def __init__(self, shell):
        self.shell = shell
        self._gpus: tuple[float, tuple[str, ...], tuple[str, ...]] | None = None

    # -- the whole line ----------------------------------------------------------------------------
    def complete(self, line: str) -> tuple[str, list[str]] | None:
        """``line`` is the text before the cursor. Returns the fragment to replace (the word being
        typed) and what can replace it, or None when this is no ``%tfgpu`` line."""
        if len(line) > MAX_LINE:
            return None
        match = _LINE.match(line)
        if match is None or self._magics() is None:
            return None
        cell = match["escape"] == "%%"
        if cell and match["assign"]:
            return None
        rest = match["rest"]
        words = rest.split()
        fragment = words.pop() if rest and not rest[-1].isspace() else ""
        if not words:
            return fragment, _starting(self._subcommands(cell), fragment)
        name, args = words[0].lower(), words[1:]
        if name not in self._subcommands(cell):
            return fragment, []
        if name == "placement" and [a.lower() for a in args[:1]] == ["show"]:
            name, args = "placement show", args[1:]
        return fragment, _starting(self._continue(self._spec(name), args, fragment), fragment)

    @staticmethod
    def _subcommands(cell: bool) -> tuple[str, ...]:
        # Only `device` runs a cell, and it runs nothing else.
        return ("device",) if cell else tuple(s for s in syntax.SUBCOMMANDS if s != "device")

    @staticmethod
    def _continue(spec: _Spec, args: list[str], fragment: str) -> list[str]:
        """What may follow ``args`` (the subcommand's words before the fragment): the value of the
        option just given, unused options, or a positional word. A line that is already a mistake (an
        unknown or repeated option, an option without its value, a word too many) gets nothing."""
        given: set[str] = set()
        positionals = 0
        wants_value = None
        for word in args:
            if wants_value is not None:
                if word.startswith("-"):
                    return []  # the option before it has no value: a mistake to fix, not to extend
                wants_value = None
            elif word.startswith("-"):
                option, equals, _ = word.partition("=")
                if option not in spec.options or option in given:
                    return []
                given.add(option)
                if spec.options[option] is not None and not equals:
                    wants_value = option
            else:
                positionals += 1
                if positionals > spec.positionals:
                    return []
        if wants_value is not None:
            return spec.options[wants_value](fragment)
        unused = [option for option in spec.options if option not in given]
        if fragment.startswith("-"):
            return unused
        if positionals < spec.positionals:
            return spec.words(fragment) + ([] if fragment else unused)
        return [] if fragment else unused

    # -- each subcommand ---------------------------------------------------------------------------
    def _spec(self, name: str) -> _Spec:
        from ..core import settings as registry

        words: dict[str, Callable[[str], list[str]]] = {
            setting.name: lambda f, setting=setting: setting.tab_words(f, self._choosable())
            for setting in registry.settings()}
        words.update({
            "panel": lambda f: list(syntax.PANEL_OPTIONS),
            "placement": lambda f: list(syntax.PLACEMENT_WORDS),
            "log": lambda f: list(_log_words()),
            "help": lambda f: list(syntax.SUBCOMMANDS),
            "device": lambda f: self._devices(slash=not f or f.startswith("/")),
        })
        if name == "placement show":
            options = {option: _none for option in syntax.SHOW_OPTIONS}
            options["--device"] = lambda f: self._devices(slash=f.startswith("/"))
            options["--all"] = None  # a switch: no value to complete
            return _Spec(0, _none, options)
        parser = syntax.parsers().get(name)
        if parser is None:  # a subcommand with its own argument reading: one word at most
            return _Spec(1 if name in words else 0, words.get(name, _none), {})
        values = {"--gpu": self._gpu_words}
        options: dict[str, Callable[[str], list[str]] | None] = {}
        positionals = 0
        for action in parser._actions:
            if not action.option_strings:
                positionals += 1
            for option in action.option_strings:
                if option.startswith("--"):
                    options[option] = None if action.nargs == 0 else values.get(option, _none)
        return _Spec(positionals, words.get(name, _none), options)

    # -- the machine -------------------------------------------------------------------------------
    def _magics(self):
        """The magics object that answers ``%tfgpu`` in this shell now, or None."""
        method = self.shell.magics_manager.magics["line"].get("tfgpu")
        return getattr(method, "__self__", None)

    def _controller(self):
        magics = self._magics()
        return magics.controller if magics is not None else None

    def _gpu_words(self, fragment: str) -> list[str]:
        """The machine's GPU indices, as text (``--gpu``'s values)."""
        return list(self._machine()[0])

    def _choosable(self) -> list[str]:
        """What a setting's value may name a GPU by: a whole GPU's index, or for a GPU in MIG mode the UUIDs of its
        MIG devices (MIG-..., as CUDA_VISIBLE_DEVICES takes them; the GPU's own index is refused there)."""
        return list(self._machine()[1])

    def _machine(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        now = time.monotonic()
        if self._gpus is None or now - self._gpus[0] > GPU_CACHE_S:
            controller = self._controller()
            snapshot = controller.nvml() if controller is not None else None
            gpus = snapshot.gpus if snapshot is not None else ()
            choosable: list[str] = []
            for gpu in gpus:
                if gpu.mig_mode is True:
                    choosable += [m.uuid for m in gpu.mig_devices if isinstance(m.uuid, str)]
                else:
                    choosable.append(str(gpu.index))
            self._gpus = (now, tuple(str(g.index) for g in gpus), tuple(choosable))
        return self._gpus[1], self._gpus[2]

    def _devices(self, slash: bool) -> list[str]:
        names = _running_devices()
        if names is None:
            # Before TensorFlow's runtime starts, its devices are what the plan and NVML say they will be.
            from ..core.settings.cpus import CPUS

            controller = self._controller()
            cpus = (CPUS.value(controller.plan) if controller is not None else None) or 1
            names = [f"CPU:{n}" for n in range(cpus)] + [f"GPU:{n}" for n in range(len(self._gpu_words("")))]
        return [f"/{name}" if slash else name for name in names]


def _starting(words: list[str], fragment: str) -> list[str]:
    lowered = fragment.lower()
    return [w for w in dict.fromkeys(words) if w.lower().startswith(lowered)]


def _log_words() -> tuple[str, ...]:
    try:
        from ..core.tflog import MODES
    except ImportError:  # a tfgpu_magic without the log subcommand
        return ()
    return MODES


def _running_devices() -> list[str] | None:
    """TensorFlow's logical devices if its runtime already runs, else None. Without TensorFlow
    imported it cannot run, and the placement module need not be imported to say so."""
    import sys

    if "tensorflow" not in sys.modules:
        return None
    from ..core.placement import logical_devices

    return logical_devices()


# -- IPython's side -------------------------------------------------------------------------------
def _matcher_v2(completer: TfgpuCompleter):
    from IPython.core.completer import SimpleCompletion, context_matcher

    @context_matcher(identifier="tfgpu_magic.completion")
    def tfgpu_matcher(context):
        found = _safely(completer, context.text_until_cursor)
        if not found or not found[1]:
            # Nothing to offer (a free-form value, a mistake): IPython goes on as without the extension.
            return {"completions": [], "suppress": False}
        fragment, words = found
        return {
            "completions": [SimpleCompletion(w, type="param" if w.startswith("-") else "keyword") for w in words],
            "matched_fragment": fragment,
            "suppress": True,
            "ordered": True,  # subcommands in the order of the usage, on before off
        }

    return tfgpu_matcher


def _hook(completer: TfgpuCompleter):
    from IPython.core.error import TryNext

    def complete_command(shell, event):
        found = _safely(completer, event.text_until_cursor)
        if not found or not found[1]:
            raise TryNext
        fragment, words = found
        # This API replaces only IPython's token, the end of the fragment after a delimiter like / or ,
        cut = len(fragment) - len(event.symbol)
        if cut < 0 or not fragment.endswith(event.symbol):
            raise TryNext
        return [w[cut:] for w in words]

    return complete_command


def _safely(completer: TfgpuCompleter, line: str) -> tuple[str, list[str]] | None:
    # Tab must never print a traceback: IPython shows one for any exception a matcher raises.
    try:
        return completer.complete(line)
    except Exception:
        return None


def _question_to_help(lines: list[str]) -> list[str]:
    if not lines or lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its own
    out = []
    for line in lines:
        match = _QUESTION.match(line) if "?" in line else None
        if match is not None:
            line = f"{match['indent']}%tfgpu help {match['name']}" + ("\n" if line.endswith("\n") else "")
        out.append(line)
    return out


_registered: dict[int, tuple[TfgpuCompleter, object]] = {}


def register(shell) -> None:
    """Add the completer and the ``%tfgpu NAME?`` reading to ``shell``; ``unregister`` takes them away."""
    if id(shell) in _registered or getattr(shell, "Completer", None) is None:
        return
    completer = TfgpuCompleter(shell)
    import IPython.core.completer as ipcompleter

    if hasattr(ipcompleter, "context_matcher"):  # IPython >= 8.6
        hook = _matcher_v2(completer)
        shell.Completer.custom_matchers.append(hook)
    else:
        hook = _hook(completer)
        for key in ("%tfgpu", "%%tfgpu"):
            shell.set_hook("complete_command", hook, str_key=key)
    shell.input_transformers_cleanup.append(_question_to_help)
    _registered[id(shell)] = (completer, hook)


def unregister(shell) -> None:
    entry = _registered.pop(id(shell), None)
    if entry is None:
        return
    _, hook = entry
    matchers = shell.Completer.custom_matchers
    if hook in matchers:
        matchers.remove(hook)
    # set_hook keeps no handle to remove a hook by: take it out of the dispatcher's chains.
    dispatcher = getattr(shell, "strdispatchers", {}).get("complete_command")
    for key in ("%tfgpu", "%%tfgpu"):
        chain = dispatcher.strs.get(key) if dispatcher is not None else None
        if chain is not None:
            chain.chain[:] = [(p, f) for p, f in chain.chain if getattr(f, "__func__", f) is not hook]
            if not chain.chain:
                del dispatcher.strs[key]
    while _question_to_help in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(_question_to_help)


__all__ = ["TfgpuCompleter", "register", "unregister"]
