"""The command line speaks a shell's words: no kernel, no "this kernel", settings set in a notebook, `--version`;
`tfgpu devices --json` answers without importing TensorFlow (its GPU names predicted from CUDA_VISIBLE_DEVICES,
marked so); every answer and every error keeps tests/support/messages.py's rules. A Jupyter server that is gone or
does not answer leaves the program's names, silently. (The notebook names a running server gives:
tests/server/test_cli_notebooks.py; TensorFlow's own view: tests/tf/test_cli_output_tf.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from clipipes import ENTRY_POINTS, assert_quiet
from fakenvml import mig_config, three_gpus
from messages import problems

from tfgpu_magic.core.version import __version__
from tfgpu_magic.render.shell_words import NO_SETTINGS

# Words that only mean something in a notebook.
NOTEBOOK_WORDS = ("this kernel", "`%tfgpu help` lists them", "restart the kernel ", "`%tfgpu visible` sets PCI_BUS_ID")

# `python -c` that runs the command line in-process and then says whether TensorFlow was imported. ``cpu_only``
# stands for the installed build's answer (this venv has tensorflow-cpu: a GPU build predicts names).
_RUN_AND_REPORT = """
import json, sys
import tfgpu_magic.core.no_gpu as no_gpu
no_gpu.installed_cpu_only = lambda: {cpu_only}
from tfgpu_magic.cli import main
status = main({argv!r})
print(json.dumps({{"status": status, "tensorflow_imported": "tensorflow" in sys.modules}}), file=sys.stderr)
"""


def tfgpu(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ENTRY_POINTS["tfgpu"], *args], capture_output=True, text=True, env=env, timeout=120)


def in_process(env: dict[str, str], *args: str, cpu_only: bool | None = None) -> tuple[str, dict]:
    """(stdout, {"status", "tensorflow_imported"}) of the command line run in a fresh Python."""
    code = _RUN_AND_REPORT.format(cpu_only=cpu_only, argv=list(args))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.fixture
def env(fake_nvml):
    config = three_gpus()
    config["gpus"].append(mig_config()["gpus"][0])  # GPU 3: an A100 in MIG mode
    fake_nvml.write(config)
    return fake_nvml.env


def test_version(env):
    proc = tfgpu(env, "--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"tfgpu (tfgpu_magic) {__version__}\n", "")


@pytest.mark.parametrize("view", ["status", "devices"])
def test_the_text_speaks_a_shells_words(env, view):
    proc = tfgpu(env, view)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout
    for words in NOTEBOOK_WORDS:
        assert words not in " ".join(out.split()), (words, out)
    assert "processes (*: this command)" in out
    assert "tfgpu devices --tensorflow" in out.splitlines()[0], out
    assert (NO_SETTINGS in out) is (view == "status"), out
    assert "then restart the kernels that use it" in " ".join(out.split())  # the CPU-only build's fix, said once
    assert "NVIDIA A100-SXM4-40GB (MIG mode)" in out and "MIG 3g.20gb MIG-5e8b0c1a" in out


@pytest.mark.parametrize("args", [
    ("status",), ("devices",), ("status", "--json"), ("devices", "--json"), ("--version",), ("--help",),
    ("bogus",), ("status", "--tensorflow"), ("--nonsense",),
], ids=" ".join)
def test_every_answer_keeps_the_message_rules(env, args):
    """Text for a person keeps the rules; JSON is data, whose fields each carry their own reason (every MIG device's
    missing utilization says why), and only has to parse."""
    proc = tfgpu(env, *args)
    assert_quiet(proc.stderr)
    if "--json" in args:
        assert json.loads(proc.stdout) and proc.stderr == ""
        return
    for said in (proc.stdout, proc.stderr):
        if said.strip():
            assert problems(said) == [], (args, said)


def test_a_mistake_is_argparse_usage_and_one_tfgpu_line(env):
    proc = tfgpu(env, "status", "--tensorflow")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["usage: tfgpu [-h] [--json] [--tensorflow] [--version] [{status,devices}]",
                                        "tfgpu: --tensorflow goes with devices: `tfgpu devices --tensorflow`"]


@pytest.mark.parametrize("view", ["status", "devices"])
def test_no_view_imports_tensorflow_unless_asked(env, view):
    for args in ((view,), (view, "--json")):
        _, report = in_process(env, *args)
        assert report == {"status": 0, "tensorflow_imported": False}, args


def test_devices_json_predicts_tensorflows_names_and_says_so(env):
    """A GPU build, not imported: GPU:k as CUDA will number the visible GPUs (CUDA_VISIBLE_DEVICES=2,0 in PCI bus
    order: GPU 2 is GPU:0, GPU 0 is GPU:1); GPU 3 is in MIG mode, a GPU no CUDA process gets whole."""
    out, report = in_process({**env, "CUDA_VISIBLE_DEVICES": "2,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                             "devices", "--json", cpu_only=False)
    assert report["tensorflow_imported"] is False
    data = json.loads(out)
    assert data["tensorflow"]["state"] == "not_imported"
    named = {g["index"]: (g["tf_name"], g["tf_name_predicted"]) for g in data["gpus"]}
    assert named == {0: ("GPU:1", True), 1: (None, False), 2: ("GPU:0", True), 3: (None, False)}, named
    text, _ = in_process({**env, "CUDA_VISIBLE_DEVICES": "2,0"}, "devices", cpu_only=False)
    assert "its GPU names (column TensorFlow) are predicted from CUDA_VISIBLE_DEVICES" in " ".join(text.split()), text


def test_a_cpu_only_build_lists_no_gpu_names(env):
    out, _ = in_process(env, "devices", "--json", cpu_only=True)
    data = json.loads(out)
    assert [g["tf_name"] for g in data["gpus"]] == [None] * 4
    assert not any(g["tf_name_predicted"] for g in data["gpus"])
    assert "is a CPU-only build" in data["tensorflow"]["no_gpu"]


def test_the_json_keeps_its_shape_and_adds_two_fields(env):
    data = json.loads(tfgpu(env, "status", "--json").stdout)
    assert set(data) == {"schema", "taken_at", "pid", "tfgpu_version", "tensorflow", "settings", "nvml", "gpus",
                         "kernel_gpu_memory", "numbering", "assignment", "claims", "notes", "placement"}
    assert set(data["tensorflow"]) == {"state", "version", "note", "physical_devices", "logical_devices", "memory",
                                       "no_gpu"}
    processes = [p for g in data["gpus"] for p in g["processes"]] + \
        [p for g in data["gpus"] for m in g["mig_devices"] for p in m["processes"]]
    assert processes and all(p["notebook"] is None for p in processes)  # no Jupyter server runs
    assert all("tf_name_predicted" in g for g in data["gpus"])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_is_gone_or_silent_leaves_the_program_names(env, tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    # One server file of a process that has exited, one of a live process whose port nobody listens on.
    (runtime / "jpserver-1.json").write_text(json.dumps({"url": "http://127.0.0.1:1/", "token": "x", "pid": 2**22 + 1}))
    (runtime / "jpserver-2.json").write_text(json.dumps({"url": f"http://127.0.0.1:{_closed_port()}/", "token": "x",
                                                         "pid": os.getpid()}))
    (runtime / "jpserver-3.json").write_text("{not json")
    proc = tfgpu({**env, "JUPYTER_RUNTIME_DIR": str(runtime)}, "status")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "process_api" in proc.stdout and "Notebooks:" not in proc.stdout
