"""What every setting answers, through one interface: a :class:`Setting` per file in this folder, one registry
(``__init__.py``) in the order they apply. The transaction (control.py), the TensorFlow adapter (runtime.py) and
every face ask the setting object and never branch on a setting's name.

A setting answers: its words (usage line, help, examples, Tab words, panel control, the sidebar's placeholder);
its argument text to a :class:`Change` (the magic's argparse form and ``configure()``'s keyword); the plan with
it (checked against the other settings); its check against the inventory (NVML's GPUs, the given set); the
environment variables it sets; the TensorFlow step that applies it; and its lines in ``%tfgpu export``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..i18n import N_, _, width
from ..inputs import printable, shown
from ..plan import ALL, FIRST_LINE, Plan, PlanError, parse_index, sorted_items


class RefusedError(PlanError):
    """The runtime is initialized and the setting would change: nothing was changed."""


def too_late(command: str, why: str, fix: str = "") -> RefusedError:
    """The refusal of a setting TensorFlow has fixed, in one line where it fits in FIRST_LINE columns:
    "tfgpu: `%tfgpu cpus 3` is too late: TensorFlow's runtime has started; restart the kernel and run it first";
    a long command's fix goes on a second line. ``why`` and ``fix`` come translated (core/i18n.py)."""
    fix = fix or _("restart the kernel and run it first")
    first = _("`{command}` is too late: {why}").format(command=command, why=why)
    whole = _("{refusal}; {fix}").format(refusal=first, fix=fix)
    if width(f"tfgpu: {whole}") <= FIRST_LINE:
        return RefusedError(whole)
    return RefusedError(first, more=fix)


@dataclass(frozen=True)
class Change:
    """One requested change, as the faces describe it."""

    setting: str  # a registered setting's name
    value: object  # the setting's parsed value, or None for off
    gpu: int | str = ALL
    command: str = ""  # how the user would type it, for messages: "%tfgpu growth on"

    @property
    def asked(self) -> str:
        """The command's argument text, as saved in a notebook: "2GB --gpu 1" for "%tfgpu limit 2GB --gpu 1"."""
        return self.command.split(" ", 2)[2] if self.command.count(" ") >= 2 else ""


class ArgParser(argparse.ArgumentParser):
    """argparse whose every complaint is one ``tfgpu:`` line (a PlanError) with the usage of that subcommand."""

    def __init__(self, name: str):
        super().__init__(prog=f"%tfgpu {name}", add_help=False, formatter_class=argparse.HelpFormatter)

    def error(self, message):
        usage = " ".join(self.format_usage().split()).replace("usage: ", "")
        # argparse quotes the user's words whole; a 100 KB word is shortened like every other bad value.
        message = _LONG_WORD.sub(lambda m: shown(m.group(0)), " ".join(message.splitlines()))
        message = message.replace("the following arguments are required:", _("missing"))
        for said in _ARGPARSE_WORDS:  # argparse's own words (its catalogue has no Chinese), in tfgpu's
            message = message.replace(said, _(said))
        if message.startswith("argument "):  # "argument --gpu: expected one argument"
            message = _("argument {name}").format(name=message[len("argument "):])
        raise PlanError(f"tfgpu: {self.prog.replace('%tfgpu ', '')}: "
                        + _("{problem}; usage: {usage}").format(problem=message, usage=usage))


_LONG_WORD = re.compile(r"\S{60,}")
# What argparse says most often in a magic's line (Python 3.10 to 3.13), translated where said.
_ARGPARSE_WORDS = (N_("unrecognized arguments:"), N_("expected one argument"), N_("invalid choice:"),
                   N_("not allowed with argument"), N_("ignored explicit argument"), N_("choose from"))


class Once(argparse.Action):
    """An option that may be given once: `--gpu 0 --gpu 1` is a mistake, not "the last one wins"."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            parser.error(_("{option} given twice; give it once").format(option=option_string))
        setattr(namespace, self.dest, values)


def keyword_text(value) -> str:
    """A keyword argument in the magic's form, so both faces share one parser and its messages."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"  # str() of a huge int raises past 4,300 digits
    if isinstance(value, (list, tuple)):
        return ",".join(keyword_text(v) for v in value)
    return str(value)


# Words and controls are NamedTuples: plain data, and about a sixth of a dataclass's cost to define when the first
# `%tfgpu` call loads the registry.
class Control(NamedTuple):
    """A setting's control in the live panel."""

    label: str  # "memory growth" (marked N_, translated where shown)
    kind: str  # "choice" (a toggle of ``hint``'s words) or "text"
    hint: str | tuple[str, ...]  # the choices, or the text input's placeholder
    default: str  # what the input shows when the setting was never asked
    not_asked: str = ""  # what a never-asked setting means ("" : TensorFlow's default); marked N_ like label
    variable: str | None = None  # an environment variable whose true/false decides it when never asked


class Words(NamedTuple):
    """What the faces say of a setting."""

    usage: str  # its line of the usage table, left column: "%tfgpu growth on|off"
    summary: str  # right column
    help: str  # what `%tfgpu help NAME` says beyond the usage
    examples: tuple[str, ...]
    tab: tuple[str, ...] = ()  # the values Tab offers (a per-GPU setting's --gpu offers GPU indices besides)
    placeholder: str = ""  # the sidebar's saved-settings editor: the values it takes
    control: Control | None = None  # None: no control in the panel


class Setting:
    """One setting. Subclasses set ``name`` and ``words`` and override what differs from these defaults."""

    name: str = ""
    words: Words
    per_gpu: bool = False  # its value is per GPU: ``--gpu I``, and ``((gpu, value), ...)`` in the plan
    value_name: str = "value"  # the positional argument's name in its usage
    options: tuple[str, ...] = ()  # configure() keywords that go with it beside gpu (visible: min_free, wait)
    env_vars: tuple[str, ...] = ()  # the environment variables it sets
    # TensorFlow reads its variables when it reaches this state (runtime.TFState); before, reset can put them back.
    read_at: int | None = None
    without_tensorflow: bool = False  # its variable is the whole setting in a kernel without TensorFlow
    needs_given: bool = False  # refused whole when this kernel's given set of GPUs cannot be matched
    holds_claims: bool = False  # a new value replaces the GPU claims an older choice holds
    # What a setting is to its peers, which find each other by these and never by name.
    grows_memory: bool = False  # memory growth: excludes the memory splits on one GPU
    splits_memory: bool = False  # a memory split (limit, virtual): excludes growth, and each other on one GPU

    # -- text to a Change ------------------------------------------------------------------------------------
    def parse(self, text: str):
        """The value of the magic's positional argument (None for off)."""
        raise NotImplementedError

    def add_arguments(self, parser: ArgParser) -> None:
        parser.add_argument(self.value_name)
        if self.per_gpu:
            parser.add_argument("--gpu", default=None, action=Once,
                                help="physical GPU index; default: every visible GPU")

    def from_args(self, args: argparse.Namespace, command: str) -> Change:
        gpu = getattr(args, "gpu", None)
        return Change(self.name, self.parse(getattr(args, self.value_name)),
                      ALL if gpu is None else parse_index(gpu), command)

    def from_keyword(self, value, gpu_text: str | None, options: dict) -> Change:
        """``configure(name=value, gpu=..., **options)`` as the magic would parse it."""
        text = keyword_text(value)
        gpu_text = gpu_text if self.per_gpu else None
        command = f"%tfgpu {self.name} {text}" + (f" --gpu {gpu_text}" if gpu_text is not None else "")
        return self.from_args(argparse.Namespace(**{self.value_name: text, "gpu": gpu_text}), command)

    def tab_words(self, fragment: str, gpus: list[str]) -> list[str]:
        """The values Tab offers for ``fragment``; ``gpus``: the machine's GPU indices, as text."""
        return list(self.words.tab)

    # -- the plan ----------------------------------------------------------------------------------------------
    def value(self, plan: Plan):
        return getattr(plan, self.name)

    def asked(self, plan: Plan) -> bool:
        return self.value(plan) is not None

    def planned(self, plan: Plan, value, gpu) -> Plan:
        """``plan`` with this change, checked against the other settings in it; raises PlanError."""
        if not self.per_gpu:
            return plan.replaced(self.name, value)
        values = plan.per_gpu(self.name)
        if value is None:
            values.pop(gpu, None)
        else:
            values[gpu] = value
        return plan.replaced(self.name, sorted_items(values))

    def text(self, value) -> str:
        """A value as the magic takes it."""
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)

    def describe(self, plan: Plan) -> list[tuple[str, str]]:
        """(row key, asked value) pairs: ``name``, or ``name[gpu]`` per GPU for a per-GPU setting."""
        value = self.value(plan)
        if value is None:
            return []
        if self.per_gpu:
            return [(f"{self.name}[{gpu}]", self.text(v)) for gpu, v in value]
        return [(self.name, self.text(value))]

    def gpus(self, plan: Plan) -> list[int | str]:
        """The GPUs a per-GPU setting names in ``plan`` (ALL among them)."""
        return [gpu for gpu, _size in self.value(plan) or ()] if self.per_gpu else []

    def reset(self, plan: Plan) -> Plan:
        return plan.replaced(self.name, None)

    # -- checks against the machine ------------------------------------------------------------------------
    def needs_inventory(self, change: Change) -> bool:
        """Whether the change is checked against NVML's GPUs (indices, sizes against totals)."""
        return change.gpu != ALL

    def named_gpus(self, change: Change, value) -> list[int]:
        """The physical GPU indices a change names: checked to exist and to be this kernel's."""
        return [change.gpu] if change.gpu != ALL else []

    def check(self, change: Change, value, snap, plan: Plan) -> None:
        """Refuse what the machine cannot do (sizes against totals); NVML is available here."""

    def check_unlisted(self, change: Change, value, why: str) -> None:
        """Refuse what cannot be checked without NVML's list of GPUs (a percentage needs a total)."""

    def check_environment(self, change: Change, value, environ) -> None:
        """Refuse what an environment variable would overrule."""

    def environment_note(self, value, environ) -> str:
        return ""

    def notes(self, environ) -> list[str]:
        """Sentences on environment variables that change what this setting does, for every view."""
        return []

    # -- choosing, the environment, TensorFlow -----------------------------------------------------------
    def chooses(self, change: Change) -> bool:
        """Whether the change is chosen by the moment (free memory), with claims (``choose``)."""
        return False

    def choose(self, controller, change: Change):
        """A change chosen by the moment with claims: (change with the devices named, claims taken, a note)."""
        raise NotImplementedError

    def resolve(self, controller, change: Change, value, snap, given) -> tuple[object, str]:
        """The value with what NVML names resolved (auto's choice, a MIG prefix), and a note on a choice made
        outside its rule ("" for none)."""
        return value, ""

    def without_tensorflow_detail(self, env) -> str:
        """What a kernel without TensorFlow is told of it (only for ``without_tensorflow`` settings)."""
        return ""

    def after_apply(self, change: Change, value, outcome, env: dict, changed: dict, read: dict, state):
        """The outcome once TensorFlow took it: ``env`` the variables it asked for (``changed`` those set now: none
        once TensorFlow has read them; ``read`` their values before). May raise RefusedError (the controller then
        puts the variables back)."""
        return outcome

    def env(self, controller, value, plan: Plan, state, given, snap) -> dict[str, str | None]:
        """The environment variables this change sets now (None: unset)."""
        return {}

    def settle(self, controller, asked: Change, outcome, chose_note: str, claims_off: str | None):
        """The outcome as said to the user, once accepted (``asked``: the change before any choice was made)."""
        return outcome

    def step(self, adapter, plan: Plan):
        raise NotImplementedError

    def read_back(self, tf, state, plan: Plan, outcome):
        """What TensorFlow has, where the notebook set it itself: (plan, outcome) to record, or None."""
        return None

    # -- %tfgpu export -----------------------------------------------------------------------------------
    def export_env(self, plan: Plan) -> list[str]:
        return []

    def export_tf2(self, plan: Plan, totals_mib: dict) -> list[str]:
        return []

    def export_tf1(self, plan: Plan, totals_mib: dict) -> list[str]:
        return []


def gpu_list(snap) -> str:
    """"0 (NVIDIA A100), 1 (...)": the machine's GPUs as a refusal names them (a message may reach a terminal)."""
    names = [f"{g.index} ({printable(g.name)})" for g in snap.gpus]
    return ", ".join(names) if names else _("none")


def no_such_gpu(index: int, snap) -> PlanError:
    """The refusal of a physical index NVML does not list, whichever check met it."""
    listed, numbering = gpu_list(snap), _("physical indices, as nvidia-smi numbers them")
    head = _("GPU {index} does not exist: this machine's GPUs are").format(index=index)
    if width(f"tfgpu: {head} {listed} ({numbering})") <= FIRST_LINE:
        return PlanError(f"{head} {listed} ({numbering})")
    if width(f"tfgpu: {head} {listed}") <= FIRST_LINE:  # what the numbers are, on a line of its own
        return PlanError(f"{head} {listed}", more=numbering)
    # Many GPUs: their numbers first, their names on a line of their own.
    return PlanError(f"{head} {', '.join(str(g.index) for g in snap.gpus)} ({numbering})", more=listed)


def nvml_why(error) -> str:
    """Why NVML could not answer, in a refusal's words."""
    if error is None:
        return _("NVML was not asked")
    return getattr(error, "detail", "") or getattr(error, "reason", str(error))


def with_detail(outcome, *parts: str):
    return replace(outcome, detail=joined(*parts))


def joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


# The registered settings in apply order, filled by the registry (__init__.py): a setting that must know its peers
# (growth and the memory splits exclude each other; visible must not hide a GPU a per-GPU setting names) finds
# them here by what they are, never by name.
_registered: list[Setting] = []


def registered() -> tuple[Setting, ...]:
    return tuple(_registered)


# The line that names TensorFlow's GPUs in an exported script; a setting's lines that use `gpus` start with it.
GPUS_LINE = 'gpus = tf.config.list_physical_devices("GPU")'
