"""The handshake with real TensorFlow, in a real PID namespace (``unshare --pid``, root: CI runs as root): the
window is read around the first thing that creates TensorFlow's devices (the eager runtime context, or a TF1
``Session`` in graph mode, which never creates the eager context), once, and then TensorFlow's own functions are
back in place; a runtime started before tfgpu was loaded is said so. The fake NVML lists the process's host PID
from inside TensorFlow's context creation (the test wraps ``TFE_NewContext`` / ``TF_NewSessionRef``), as a GPU
context makes the driver list it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from fakenvml import MIB, write_config

pytestmark = pytest.mark.tf

PRELUDE = """
import json, os, sys
sys.argv = ["ipykernel_launcher", "-f", "/run/kernel-4f2c8a1e-0000.json"]  # as a Jupyter kernel is started
from tfgpu_magic.core import handshake, pidns
host_pid = int(os.environ["HOST_PID"])
def appear_then(original):
    def created(*args):
        os.replace(os.environ["PREPARED"], os.environ["FAKE_NVML_CONFIG"])  # the driver lists us now
        return original(*args)
    return created
"""

EAGER = PRELUDE + """
assert handshake.install()
import tensorflow as tf
from tensorflow.python.eager import context
context.pywrap_tfe.TFE_NewContext = appear_then(context.pywrap_tfe.TFE_NewContext)
tf.constant(1)
restored = not hasattr(context.Context.ensure_initialized, "__wrapped__")
with open(os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "tfgpu-kernels", "4f2c8a1e-0000.json")) as f:
    report = json.load(f)  # removed when the process ends
print(json.dumps({"learned": handshake.learned(), "restored": restored, "self": pidns.view().self_host_pid(),
                  "report": report}))
"""

GRAPH = PRELUDE + """
assert handshake.install()
import tensorflow as tf
from tensorflow.python.client import session
session.tf_session.TF_NewSessionRef = appear_then(session.tf_session.TF_NewSessionRef)
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float32)
with tf.compat.v1.Session() as s:
    assert s.run(x * 2, {x: 3.0}) == 6.0
restored = not hasattr(session.BaseSession.__init__, "__wrapped__")
print(json.dumps({"learned": handshake.learned(), "restored": restored, "self": pidns.view().self_host_pid()}))
"""

LATE = PRELUDE + """
import tensorflow as tf
tf.constant(1)
handshake.install()
print(json.dumps({"learned": handshake.learned(), "restored": True, "self": pidns.view().self_host_pid()}))
"""


@pytest.fixture
def namespace():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true, so the PID namespace tests must run: needs root and unshare", pytrace=False)
        pytest.skip("needs root and unshare(1): CI runs as root")


def run_in_namespace(fake_nvml, tmp_path, code: str) -> dict:
    """Run ``code`` as a child of ``unshare --pid``; the fake lists the child's host PID (read from this, the host's
    /proc) with 1 GiB once the child's TensorFlow creates its devices."""
    prepared = tmp_path / "prepared.cfg"
    gpu = {"name": "NVIDIA A100", "uuid": "GPU-a", "memory_total": 40960 * MIB, "memory_used": 0}
    fake_nvml.write({"gpus": [{**gpu, "processes": []}]})
    env = {**fake_nvml.env, "PREPARED": str(prepared), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    env.pop("PYTHONUNBUFFERED", None)
    # The child waits for its host PID on stdin: only this side can read it.
    child = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                              "import os, sys\nos.environ['HOST_PID'] = sys.stdin.readline().strip()\n" + code],
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    host_pid = _inner_host_pid(child.pid)
    write_config(prepared, {"gpus": [{**gpu, "processes": [{"pid": host_pid, "used": 1024 * MIB}]}]})
    out, err = child.communicate(f"{host_pid}\n", timeout=240)
    assert child.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    result["host_pid"] = host_pid
    return result


def _inner_host_pid(unshare_pid: int, timeout: float = 30) -> int:
    """The host PID of the namespace's PID 1 (the python child of ``unshare --fork``)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task in os.listdir(f"/proc/{unshare_pid}/task"):
            with open(f"/proc/{unshare_pid}/task/{task}/children") as f:
                children = [int(c) for c in f.read().split()]
            if children:
                return children[0]
        time.sleep(0.05)
    raise AssertionError("unshare started no child")


def test_the_eager_runtime_context_is_watched_once(namespace, fake_nvml, tmp_path):
    result = run_in_namespace(fake_nvml, tmp_path, EAGER)
    assert result["learned"] == [result["host_pid"], "handshake", ""]
    assert result["restored"] and result["self"] == result["host_pid"]
    report = result["report"]
    assert not (tmp_path / "runtime" / "tfgpu-kernels" / "4f2c8a1e-0000.json").exists()  # gone with the process
    assert (report["host_pid"], report["how"], report["kernel_id"]) == (result["host_pid"], "handshake",
                                                                         "4f2c8a1e-0000")


def test_a_tf1_session_in_graph_mode_is_watched_too(namespace, fake_nvml, tmp_path):
    result = run_in_namespace(fake_nvml, tmp_path, GRAPH)
    assert result["learned"] == [result["host_pid"], "handshake", ""]
    assert result["restored"]


def test_a_runtime_started_before_tfgpu_is_said_not_guessed(namespace, fake_nvml, tmp_path):
    result = run_in_namespace(fake_nvml, tmp_path, LATE)
    host_pid, how, note = result["learned"]
    assert host_pid is None and how is None and note.startswith("TensorFlow's runtime started before tfgpu was loaded")
    assert result["self"] is None
