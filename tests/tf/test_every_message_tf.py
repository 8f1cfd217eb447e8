"""Every answer the magics and the panel give with real TensorFlow keeps the two rules of issue 37 (first line within
120 characters, a reason said once): before `import tensorflow`, once imported, and after its runtime started (the
"too late" answers), on a laptop (no NVML library), beside four fake GPUs and beside a GPU in MIG mode, in a kernel's
environment as a user has it. The lines come from the registry and the subcommand table (support/message_sweep.py);
the line printed at `import tensorflow` is checked too."""

from __future__ import annotations

import json

import pytest
from fakenvml import mig_config, n_gpus
from harness import SHELL_PRELUDE, SUPPORT, run_tf, user_env
from messages import problems

SWEEP = f"""
import json
sys.path.insert(0, {str(SUPPORT)!r})
import message_sweep
from tfgpu_magic.ipython.panel import Panel
answers = message_sweep.sweep(ip, "before import", without=message_sweep.IMPORTS_TENSORFLOW)
for line in ("visible 1", "growth on", "allocator async", "cpus 2"):
    magic(line)
print("IMPORT LINE")
import tensorflow as tf
print("IMPORTED")
answers += message_sweep.sweep(ip, "imported")
tf.constant(1)
answers += message_sweep.sweep(ip, "initialized")
m = ip.magics_manager.registry["TfgpuMagics"]
panel = Panel(model=m.live, magics=m)
answers += message_sweep.panel_sweep(panel, "initialized")
panel.close()
print(json.dumps(answers))
"""

MACHINES = {"laptop": None, "four GPUs": n_gpus(4), "MIG": mig_config()}


@pytest.mark.parametrize("machine", MACHINES)
def test_every_answer_with_real_tensorflow_keeps_the_rules(fake_nvml, machine):
    config = MACHINES[machine]
    if config is not None:
        fake_nvml.write(config)
    env = user_env(**fake_nvml.env) if config is not None else user_env()
    out = run_tf(SHELL_PRELUDE + SWEEP, env=env, timeout=300).stdout
    answers = json.loads(out.strip().splitlines()[-1])
    notice, import_line = out.split("IMPORT LINE\n", 1)[1].split("IMPORTED\n", 1)[0].split("\n", 1)
    answers += [{"stage": "import", "line": "import tensorflow", "answer": text} for text in (notice, import_line)]
    assert notice == "tfgpu: importing TensorFlow (a few seconds) ..." and \
        import_line.startswith("tfgpu: at `import tensorflow`:"), (notice, import_line)
    assert {a["stage"] for a in answers} == {"before import", "imported", "initialized", "import"}
    broken = [f"{a['stage']} | {a['line']}: {why}" for a in answers for why in problems(a["answer"])]
    assert not broken, "\n".join(broken)
