"""Every answer the magics and the panel give before `import tensorflow` keeps the two rules of issue 37 (its first
line within 120 characters, a reason said once: support/messages.py), on a laptop (this machine's real NVML adapter,
which finds no library), beside three GPUs and beside a GPU in MIG mode. The lines come from the settings registry
and the subcommand table (support/message_sweep.py), so a new setting is swept without a change here; after the
import, with real TensorFlow, is tests/tf/test_every_message_tf.py."""

from __future__ import annotations

import gpu_fakes
import pytest
from message_sweep import IMPORTS_TENSORFLOW, lines, panel_sweep, sweep
from messages import problems

from tfgpu_magic.core import nvml
from tfgpu_magic.core import settings as registry
from tfgpu_magic.ipython.panel import Panel

MACHINES = {"laptop": nvml.snapshot, "three GPUs": gpu_fakes.three_gpus, "MIG": gpu_fakes.mig_gpus}


def broken(answers: list[dict]) -> list[str]:
    return [f"{a['line']}: {why}" for a in answers for why in problems(a["answer"])]


def test_the_sweep_covers_every_setting_and_subcommand():
    from tfgpu_magic.ipython import syntax

    swept = {line.split(" ", 1)[0] for line in lines()}
    assert set(registry.names()) <= swept
    assert set(syntax.subcommands()) - swept <= {"device", "panel"}  # a cell magic and a widget: swept apart


@pytest.mark.parametrize("machine", MACHINES)
def test_every_magic_answer_keeps_the_rules(shell, machine):
    shell.tfgpu.controller._nvml_snapshot = MACHINES[machine]
    shell.tfgpu.controller.installed_cpu_only = lambda: True  # this venv's tensorflow-cpu: its words are swept too
    answers = sweep(shell, "before import", without=IMPORTS_TENSORFLOW)
    # Every line answers something (--json returns data, which is no message).
    assert len(answers) > 100 and all(a["answer"] for a in answers if "--json" not in a["line"])
    assert not broken(answers), "\n".join(broken(answers))


@pytest.mark.parametrize("machine", MACHINES)
def test_every_panel_message_keeps_the_rules(shell, machine):
    shell.tfgpu.controller._nvml_snapshot = MACHINES[machine]
    panel = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    try:
        answers = panel_sweep(panel, "before import")
    finally:
        panel.close()
    assert answers and not broken(answers), "\n".join(broken(answers))
