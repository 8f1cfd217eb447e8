"""Every answer the magics and the panel can give, for the message rules of issue 37 (support/messages.py): the lines
are made from the settings registry and the magic's subcommand table, so a new setting or subcommand is swept
without a change here. Runs in the test process (an in-memory NVML) or in a child with real TensorFlow (the
module is then imported from this folder: ``sys.path`` gets it, nothing of the package)."""

from __future__ import annotations

import contextlib
import io
import re

# Values no setting or subcommand takes: each must be refused in one line naming it.
BAD_VALUES = ("bogus", "-3", "999", "1,1", "2x", "on off", "--nonsense")
# A cell for `%%tfgpu device DEVICE` (an op, so placement has something to say).
DEVICE_CELL = "import tensorflow as tf\n_ = tf.constant(1) + 1"


def one_answer(text: str) -> bool:
    """A message's shape: one line, or one more indented line with what did not fit in the first (a value's own line
    breaks are escaped, never kept). The length rules are messages.problems'."""
    lines = text.split("\n")
    return len(lines) <= 2 and all(line.startswith("  ") for line in lines[1:])


def _without_magic(example: str) -> str | None:
    """``%tfgpu limit 4GB`` -> ``limit 4GB``; examples that are no line of ``%tfgpu`` (``%config ...``) -> None."""
    match = re.match(r"^(?:\w+ = )?%tfgpu(?: (.*))?$", example)
    return (match.group(1) or "") if match else None


def lines() -> list[str]:
    """The ``%tfgpu`` lines to try: each subcommand's examples and Tab words, and bad values for each; never a
    ``--wait`` (it waits for a GPU)."""
    from tfgpu_magic.core import settings as registry
    from tfgpu_magic.ipython import syntax

    found = ["", "bogus", "help", "status"]
    for name in syntax.subcommands():
        if name == "device":
            continue  # a cell magic: cell_lines()
        examples: list[str] = []
        if name in registry.names():
            setting = registry.get(name)
            examples += [e for e in map(_without_magic, setting.words.examples) if e is not None]
            examples += [f"{name} {word}" for word in setting.words.tab]
            examples += [f"{name} {bad}" for bad in BAD_VALUES] + [name]
            if setting.per_gpu:
                examples += [f"{name} 1GB --gpu 99", f"{name} 1GB --gpu x", f"{name} off --gpu 1"]
        else:
            examples += [e for e in map(_without_magic, syntax.DETAILS.get(name, ("", ()))[1]) if e is not None]
            examples += [f"{name} bogus", f"{name} --nonsense", f"help {name}"]
        # `NAME?` is IPython's help syntax, for a cell, not a line of the magic; the panel is a widget, swept apart.
        found += [e for e in examples if "--wait" not in e and not e.endswith("?") and e.split(" ", 1)[0] != "panel"]
    return list(dict.fromkeys(found))


def cell_lines() -> list[str]:
    return ["device /CPU:0", "device /GPU:0", "device /GPU:9", "device bogus", "device"]


def _answer(run) -> str:
    from IPython.core.error import UsageError

    out, err = io.StringIO(), io.StringIO()
    shown = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result = run()
        if result is not None and not isinstance(result, dict | list) and type(result).__module__.startswith(
                "tfgpu_magic"):
            shown = repr(result)  # what the cell shows for it (a status, a devices view)
    except UsageError as error:
        shown = str(error)
    return "".join(part for part in (out.getvalue(), err.getvalue(), shown) if part)


# Subcommands that import TensorFlow when it is not yet: never in the test process (tests/conftest.py).
IMPORTS_TENSORFLOW = ("strategy",)


def sweep(ip, stage: str, without: tuple[str, ...] = ()) -> list[dict]:
    """Run every line in ``ip`` (the extension loaded), but those of the subcommands ``without``; each answer as
    {stage, line, answer}. After each, the settings that have not taken effect are dropped, so every line meets the
    same kernel."""
    answers = []

    def reset():
        _answer(lambda: ip.run_line_magic("tfgpu", "reset"))

    for line in lines():
        if line.split(" ", 1)[0] in without:
            continue
        answers.append({"stage": stage, "line": f"%tfgpu {line}",
                        "answer": _answer(lambda line=line: ip.run_line_magic("tfgpu", line))})
        reset()
    for line in cell_lines() if stage != "before import" else ():  # its cell imports TensorFlow
        answers.append({"stage": stage, "line": f"%%tfgpu {line}",
                        "answer": _answer(lambda line=line: ip.run_cell_magic("tfgpu", line, DEVICE_CELL))})
    return answers


def panel_sweep(panel, stage: str) -> list[dict]:
    """Each panel control with its Tab words and bad values: the message the panel shows (and returns)."""
    from tfgpu_magic.ipython.panel import controls

    answers = []
    for name, control in controls():
        values = list(control.hint) if isinstance(control.hint, tuple) else []
        values += [v.partition(" ")[2] for v in lines() if v.startswith(f"{name} ")]
        for value in dict.fromkeys(values):
            if "--wait" in value:
                continue
            answers.append({"stage": stage, "line": f"panel {name} {value}", "answer": panel.apply(name, value)})
            with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
                panel.model.controller.reset()
    return answers
