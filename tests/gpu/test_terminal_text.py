"""Names from NVML and /proc reach terminals escaped: any user can name their process (15 bytes through prctl), and a
GPU process named ``ESC[2J ESC]0;pwn BEL`` must not clear the reader's screen or set their window title through
`tfgpu status`, `%tfgpu devices` in terminal IPython or a refusal's message. JSON keeps the names as they are
(JSON escapes control characters itself)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fakenvml import three_gpus

HOSTILE = b"\x1b[2J\x1b]0;pwn\x07"  # clear the screen, set the window title: 11 bytes, within prctl's 15
GPU_NAME = "A100\x1b[31mRED\u009b2J".encode()  # an SGR sequence and a C1 CSI (as UTF-8) in the GPU's name


@pytest.fixture
def hostile_process():
    """A live process whose name (its /proc/<pid>/comm) is HOSTILE."""
    code = ("import ctypes, sys, time\n"
            "ctypes.CDLL(None).prctl(15, ctypes.c_char_p(bytes.fromhex(sys.argv[1])), 0, 0, 0)\n"  # PR_SET_NAME
            "print('named', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, HOSTILE.hex()], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "named"
    with open(f"/proc/{proc.pid}/comm", "rb") as comm:
        assert comm.read().rstrip(b"\n") == HOSTILE
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def hostile_gpus(fake_nvml, hostile_process):
    config = three_gpus()
    config["gpus"][0]["name"] = GPU_NAME
    config["gpus"][0]["processes"] = [{"pid": hostile_process, "used": 1000 * 2**20}]
    fake_nvml.write(config)
    return fake_nvml


def run(fake, *command: str) -> bytes:
    proc = subprocess.run([sys.executable, *command], capture_output=True, timeout=120,
                          env={**fake.env, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def assert_escaped(out: bytes) -> None:
    assert b"\x1b" not in out and b"\x07" not in out and "\u009b".encode() not in out, out
    text = out.decode()
    assert "\\x1b[2J\\x1b]0;pwn\\x07" in text, text  # the process, named as Python writes it
    assert "A100\\x1b[31mRED\\x9b2J" in text, text  # the GPU


@pytest.mark.parametrize("view", ["status", "devices"])
def test_the_cli_escapes_control_characters_in_names(hostile_gpus, view):
    assert_escaped(run(hostile_gpus, "-m", "tfgpu_magic", view))


def test_json_keeps_the_names_as_they_are(hostile_gpus):
    out = run(hostile_gpus, "-m", "tfgpu_magic", "status", "--json")
    assert b"\x1b" not in out  # JSON's own escapes: \u001b
    gpu = json.loads(out)["gpus"][0]
    assert gpu["name"] == GPU_NAME.decode()
    assert gpu["processes"][0]["name"] == HOSTILE.decode()


def test_terminal_ipython_escapes_them_in_views_and_in_a_refusal(hostile_gpus):
    code = ("get_ipython().run_line_magic('load_ext', 'tfgpu_magic')\n"
            "get_ipython().run_line_magic('tfgpu', 'devices')\n"
            "get_ipython().run_line_magic('tfgpu', 'status')\n"
            "try:\n"
            "    get_ipython().run_line_magic('tfgpu', 'visible 7')\n"
            "except Exception as err:\n"
            "    print(err)\n")
    out = run(hostile_gpus, "-m", "IPython", "--no-banner", "--simple-prompt", "--HistoryManager.hist_file=:memory:",
              "-c", code)
    assert_escaped(out)
    assert "GPU 7 does not exist: this machine's GPUs are 0 (A100\\x1b[31mRED\\x9b2J)" in out.decode()
