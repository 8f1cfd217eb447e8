"""The arguments of the placement face's words (``%tfgpu placement on|off|show|clear|status``, ``%tfgpu log``,
``%%tfgpu device``): an argparse parser that says each mistake in the one line these words have always said,
and ``placement show``'s filter with its values checked.

syntax.parsers() makes the parsers; the router (commands.py) parses with them as with every other subcommand's.
Imported with the first of those parsers, not at ``%load_ext``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..core.changes import ArgParser
from ..core.i18n import _
from ..core.inputs import MAX_INDEX, shown, whole_number
from ..core.placement import DEVICE_FORMS, device_matcher
from ..core.plan import PlanError

DEFAULT_SHOW_LIMIT = 50

# What a word says of arguments that do not fit it (a word too many, a missing or bad positional), given the
# words after the subcommand and those argparse could not place.
Mistake = Callable[[list[str], list[str]], str]


class _Misfit(Exception):
    """argparse's own complaint (a required positional missing), said in the word's terms by parse_args."""


class WordParser(ArgParser):
    """argparse whose every mistake is one ``tfgpu:`` line (a PlanError) in the word's own terms: an option
    without its value, or with a value it takes none of; an option given twice (:class:`Once`); and
    ``mistake`` for the rest. No abbreviations: ``--dev`` is not ``--device``."""

    def __init__(self, name: str, mistake: Mistake):
        super().__init__(name)
        self.command = name  # "placement show", as messages name it
        self.mistake = mistake
        self.allow_abbrev = False
        self.exit_on_error = False  # an option's fault reaches parse_args as an ArgumentError that names it

    def parse_args(self, args=None, namespace=None):
        argv = [] if args is None else list(args)
        try:
            parsed, extra = self.parse_known_args(argv, namespace)
        except argparse.ArgumentError as err:
            raise PlanError(self._option_fault(err, argv)) from None
        except _Misfit:
            raise PlanError(self.mistake(argv, argv)) from None
        if extra:
            raise PlanError(self.mistake(argv, extra))
        return parsed

    def error(self, message):
        raise _Misfit(message)

    def _option_fault(self, err: argparse.ArgumentError, argv: list[str]) -> str:
        option = err.argument_name or ""
        action = self._option_string_actions.get(option)
        if action is None:  # a positional's value (a log mode not among the choices): the word's mistake
            return self.mistake(argv, argv)
        if action.nargs == 0:
            given = next((word for word in argv if word.startswith(f"{option}=")), option)
            return _("{command} {option} takes no value, got {given}").format(command=self.command, option=option,
                                                                              given=shown(given))
        return _("{command} {option} needs a value").format(command=self.command, option=option)


class Once(argparse.Action):
    """An option that may be given once (``--cell 1 --cell 2`` is a mistake, not "the last one wins"); with
    ``nargs=0`` a switch, True once given."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            raise PlanError(_("{command} {option} given twice; give it once").format(command=parser.command,
                                                                                     option=option_string))
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def no_arguments(name: str) -> WordParser:
    """A word that takes nothing more (``placement on``)."""
    return WordParser(name, lambda argv, extra: f"{name} takes no arguments, got {shown(' '.join(argv))}")


# placement show's options: what each is for, and the metavar of its value (None: a switch).
_SHOW = {"--device": ("records on this device (GPU:0, /CPU:1), or on every device of a kind (GPU, CPU)", "DEVICE"),
         "--op": ("records of this op, by name or type (MatMul)", "OP"),
         "--cell": ("records of this cell, by its execution count", "N"),
         "--limit": (f"the last N rows (default {DEFAULT_SHOW_LIMIT})", "N"),
         "--all": ("every record, TensorFlow's internal ones too, one a row", None)}


def show_parser(options: tuple[str, ...]) -> WordParser:
    """``placement show``'s parser: ``options`` (syntax.SHOW_OPTIONS, what Tab offers), each given once."""
    made = WordParser("placement show", lambda argv, extra: f"unknown option {shown(extra[0])} for placement show; "
                                                            f"valid: {', '.join(options)}")
    for option in options:
        what, metavar = _SHOW[option]
        # --limit is the number of rows shown (dest "rows"), not the memory setting of that name.
        made.add_argument(option, action=Once, nargs=0 if metavar is None else None, metavar=metavar, help=what,
                          **({"dest": "rows"} if option == "--limit" else {}))
    return made


def log_parser(modes: tuple[str, ...]) -> WordParser:
    """``log [MODE]``: the mode in any case; none shows the recent cells' full log."""
    made = WordParser("log", lambda argv, extra: f"bad log setting {shown(' '.join(argv))}; valid: {', '.join(modes)} "
                                                 "(or nothing, to show the recent cells' full TensorFlow log)")
    made.add_argument("mode", nargs="?", type=str.lower, choices=modes, metavar="|".join(modes),
                      help="how TensorFlow's log shows under each cell from the next one; nothing: the recent cells' "
                           "full log")
    return made


def device_parser() -> WordParser:
    """``%%tfgpu device DEVICE``: one device, checked when the cell runs."""
    made = WordParser("device", lambda argv, extra: f"device takes one device like /GPU:0 or /CPU:1, "
                                                    f"got {shown(' '.join(argv))}")
    made.add_argument("device", metavar="DEVICE", help=f"where the cell's ops are asked to run: {DEVICE_FORMS}")
    return made


def show_filter(args: argparse.Namespace) -> dict[str, Any]:
    """``placement show``'s parsed options with their values checked: device, op, cell, rows (--limit), all."""
    if args.device is not None:
        try:
            device_matcher(args.device)
        except ValueError:
            raise PlanError(_("bad --device {value}; use a device like {forms}, or CPU / GPU for all of a kind").format(
                value=shown(args.device), forms=DEVICE_FORMS)) from None
    numbers: dict[str, int | None] = {"cell": None, "rows": DEFAULT_SHOW_LIMIT}
    for key, option, lowest in (("cell", "--cell", 0), ("rows", "--limit", 1)):
        text = getattr(args, key)
        if text is not None:
            numbers[key] = whole_number(text, low=lowest, high=MAX_INDEX)
            if numbers[key] is None:
                raise PlanError(_("bad {option} {value}; use a whole number >= {lowest}").format(
                    option=option, value=shown(text), lowest=lowest))
    return {"device": args.device, "op": args.op, **numbers, "all": bool(args.all)}
