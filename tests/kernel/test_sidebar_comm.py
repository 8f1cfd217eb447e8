"""The sidebar's kernel channel (comm.py) in a real kernel through jupyter_client, with the user's environment:
the messages a frontend that opens the ``tfgpu`` comm gets, and what closing it leaves behind."""

from __future__ import annotations

import contextlib
import json
import queue
import time
import uuid

import pytest
from harness import kernel_folder, user_env

from tfgpu_magic.core import words
from tfgpu_magic.ipython.comm import PLACEMENT_TAIL, SECTIONS, TARGET

pytestmark = pytest.mark.kernel


class Frontend:
    """What the sidebar does over the kernel protocol: open, message and close a comm; read iopub."""

    def __init__(self, stderr=None):
        from jupyter_client.manager import start_new_kernel

        # stderr: a file for the kernel process's own stderr, where ipykernel logs a comm handler's traceback.
        self.manager, self.client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder(),
                                                     **({"stderr": stderr} if stderr is not None else {}))
        self.pending: list[dict] = []

    def close(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def run(self, source: str, status: str = "ok") -> str:
        out = []
        reply = self.client.execute_interactive(
            source, timeout=120, output_hook=lambda m: self._keep(m, out))
        assert reply["content"]["status"] == status, (source, reply["content"], out)
        return "".join(out)

    def _keep(self, msg, out):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"].startswith("comm_"):
            self.pending.append(msg)

    def _send(self, msg_type: str, content: dict) -> None:
        self.client.shell_channel.send(self.client.session.msg(msg_type, content))

    def open(self, data: dict | None = None) -> str:
        comm_id = uuid.uuid4().hex
        self._send("comm_open", {"comm_id": comm_id, "target_name": TARGET,
                                 "data": data or {"request": "subscribe", "version": 1}})
        return comm_id

    def message(self, comm_id: str, data: dict) -> None:
        self._send("comm_msg", {"comm_id": comm_id, "data": data})

    def close_comm(self, comm_id: str) -> None:
        self._send("comm_close", {"comm_id": comm_id, "data": {}})

    def comm_messages(self, comm_id: str, until, timeout: float = 60) -> list[dict]:
        """iopub comm messages of ``comm_id`` (data, or {"closed": True}) until ``until(list)`` holds."""
        got: list[dict] = []
        deadline = time.monotonic() + timeout
        while True:
            while self.pending:
                self._take(self.pending.pop(0), comm_id, got)
            if until(got):
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; got {json.dumps(got)[:2000]}")
            with contextlib.suppress(queue.Empty):  # nothing yet
                self._take(self.client.get_iopub_msg(timeout=1), comm_id, got)

    @staticmethod
    def _take(msg, comm_id, got):
        content = msg["content"]
        if content.get("comm_id") != comm_id:
            return
        if msg["msg_type"] == "comm_msg":
            got.append(content["data"])
        elif msg["msg_type"] == "comm_close":
            got.append({"closed": True})


@pytest.fixture
def frontend():
    fe = Frontend()
    yield fe
    fe.close()


def _first(kind):
    return lambda got: any(m.get("type") == kind or (kind == "closed" and m.get("closed")) for m in got)


def threads(fe: Frontend) -> list[str]:
    return json.loads(fe.run("import threading, json; print(json.dumps([t.name for t in threading.enumerate()]))"))


def test_the_channel_in_a_kernel_without_then_with_the_extension(frontend):
    # Not loaded: ipykernel has no such target and closes the comm at once; the sidebar offers %load_ext.
    early = frontend.open()
    assert frontend.comm_messages(early, _first("closed")) == [{"closed": True}]

    frontend.run("%load_ext tfgpu_magic")
    comm_id = frontend.open()
    got = frontend.comm_messages(comm_id, _first("state"))
    state = next(m for m in got if m.get("type") == "state")
    assert state["protocol"] == 1 and set(state["sections"]) == set(SECTIONS)
    assert state["words"] == words.to_dict()  # the sidebar names states with the kernel's vocabulary
    kernel = state["sections"]["kernel"]
    assert kernel["pid"] == frontend.manager.provisioner.pid
    assert kernel["tensorflow"]["state"] in ("not_imported", "not_installed")
    assert "tfgpu-live" in threads(frontend)  # somebody looks: the model samples

    frontend.run("%tfgpu cpus 2")
    changes = frontend.comm_messages(comm_id, lambda got: any(
        "kernel" in m.get("sections", {}) and m["sections"]["kernel"]["settings"] for m in got))
    change = next(m for m in changes if "kernel" in m.get("sections", {}) and m["sections"]["kernel"]["settings"])
    assert change["type"] == "changes"
    assert change["sections"]["kernel"]["settings"] == [
        {"setting": "cpus", "asked": "2", "status": "pending", "detail": "applied when TensorFlow is imported"}]
    assert "history" not in change["sections"] and "gpus" not in change["sections"]

    frontend.message(comm_id, {"request": "state"})
    again = frontend.comm_messages(comm_id, _first("state"))
    assert next(m for m in again if m.get("type") == "state")["sections"]["kernel"]["settings"][0]["setting"] == "cpus"
    frontend.message(comm_id, {"request": "<img src=x>"})
    error = next(m for m in frontend.comm_messages(comm_id, _first("error")) if m.get("type") == "error")
    assert error["message"] == "tfgpu: unknown request '<img src=x>'; valid: state, pause, resume, validate, page"

    # Saved settings checked by the magics' own parsers, applying nothing.
    frontend.message(comm_id, {"request": "validate", "id": 7, "settings": {"cpus": "0", "limit": "2XB",
                                                                              "growth": "on"}})
    checked = next(m for m in frontend.comm_messages(comm_id, _first("validated")) if m.get("type") == "validated")
    assert checked["id"] == 7 and checked["ok"] is False and set(checked["errors"]) == {"cpus", "limit"}
    assert checked["errors"]["cpus"].startswith("tfgpu: ") and "0" in checked["errors"]["cpus"]
    frontend.message(comm_id, {"request": "validate", "id": 9, "settings": {"cpus": "3 4"}})  # argparse's complaint
    checked = next(m for m in frontend.comm_messages(comm_id, lambda got: any(m.get("id") == 9 for m in got))
                   if m.get("id") == 9)
    assert checked["ok"] is False and "unrecognized arguments: 4" in checked["errors"]["cpus"]
    frontend.message(comm_id, {"request": "validate", "id": 8, "settings": {"cpus": "4", "placement": "on"}})
    checked = next(m for m in frontend.comm_messages(comm_id, lambda got: any(m.get("id") == 8 for m in got))
               if m.get("id") == 8)
    # "unchecked": values taken as given where NVML cannot list the GPUs (none named here).
    assert checked == {"type": "validated", "protocol": 1, "id": 8, "ok": True, "errors": {}, "unchecked": {}}

    # Hidden sidebar: paused, nobody samples; shown again: everything once more.
    frontend.message(comm_id, {"request": "pause"})
    time.sleep(0.5)
    assert "tfgpu-live" not in threads(frontend)
    frontend.message(comm_id, {"request": "resume"})
    frontend.comm_messages(comm_id, _first("state"))
    assert "tfgpu-live" in threads(frontend)

    # The sidebar looks elsewhere: the comm closes and nobody samples any more.
    frontend.close_comm(comm_id)
    time.sleep(0.5)
    assert "tfgpu-live" not in threads(frontend)

    # Unloading the extension closes open channels from the kernel's side.
    second = frontend.open()
    frontend.comm_messages(second, _first("state"))
    frontend.run("%unload_ext tfgpu_magic")
    assert frontend.comm_messages(second, _first("closed"))[-1] == {"closed": True}
    assert "tfgpu-live" not in threads(frontend)
    late = frontend.open()
    assert frontend.comm_messages(late, _first("closed")) == [{"closed": True}]


@pytest.mark.tf
def test_tensorflow_state_cells_and_placement_tail_reach_the_sidebar(frontend):
    frontend.run("%load_ext tfgpu_magic\n%tfgpu cpus 2\n%tfgpu placement on")
    comm_id = frontend.open()
    frontend.comm_messages(comm_id, _first("state"))
    frontend.run("import tensorflow as tf\n"
                 "with tf.device('CPU:1'):\n"
                 "    for _ in range(30):\n"
                 "        x = tf.matmul(tf.ones((8, 8)), tf.ones((8, 8)))")

    def seen(got):
        merged = {}
        for m in got:
            merged.update(m.get("sections", {}))
        placement = merged.get("placement") or {}
        return merged.get("cells") and placement.get("records") and merged.get("kernel", {}).get(
            "tensorflow", {}).get("logical_devices")

    got = frontend.comm_messages(comm_id, seen)
    merged = {}
    for m in got:
        merged.update(m.get("sections", {}))
    tensorflow = merged["kernel"]["tensorflow"]
    assert tensorflow["state"] == "initialized" and tensorflow["version"]
    assert [d["name"] for d in tensorflow["logical_devices"]] == ["CPU:0", "CPU:1"]
    assert merged["kernel"]["settings"][0] == {"setting": "cpus", "asked": "2", "status": "applied",
                                               "detail": "2 logical CPUs"}
    assert merged["cells"][-1]["started_runtime"] is True
    records = merged["placement"]["records"]
    assert 0 < len(records) <= PLACEMENT_TAIL < merged["placement"]["total"]
    assert any(r["op_type"].endswith("MatMul") and r["short_device"] == "CPU:1" for r in records), records

    # Too late now: the refusal is in the kernel section, with what a restart would apply, sent also to a paused
    # (hidden) sidebar; the panel's button asks the frontend listening on this channel to restart and apply it.
    frontend.message(comm_id, {"request": "pause"})
    frontend.run("%tfgpu cpus 3", status="error")
    sent = [m for m in frontend.comm_messages(comm_id, lambda got: any(
        m.get("type") == "changes" and (m["sections"].get("kernel") or {}).get("refused") for m in got))
        if m.get("type") == "changes" and "kernel" in m["sections"]]
    kernel = sent[-1]["sections"]["kernel"]
    assert [(r["setting"], r["asked"]) for r in kernel["refused"]] == [("cpus", "3")]
    assert kernel["wanted"] == {"cpus": "3", "placement": "on"}
    said = frontend.run("from tfgpu_magic import Panel\np = Panel()\nprint(p.restart_and_apply())\np.close()")
    assert "asked JupyterLab to restart the kernel and apply the settings" in said
    request = next(m for m in frontend.comm_messages(comm_id, _first("request")) if m.get("type") == "request")
    assert request == {"type": "request", "protocol": 1, "action": "restart-and-apply",
                       "settings": {"cpus": "3", "placement": "on"}}


@pytest.mark.parametrize("payload", [["state"], "state", 42, [], 0])
def test_a_request_that_is_not_an_object_gets_the_one_line_error_and_no_traceback(tmp_path, payload):
    with open(tmp_path / "kernel.err", "w+") as stderr:
        fe = Frontend(stderr=stderr)
        try:
            fe.run("%load_ext tfgpu_magic")
            comm_id = fe.open()
            fe.comm_messages(comm_id, _first("state"))
            fe.message(comm_id, payload)
            error = next(m for m in fe.comm_messages(comm_id, _first("error")) if m.get("type") == "error")
            assert error["message"].startswith("tfgpu: a request is an object such as {\"request\": \"state\"}, not "
                                               f"{type(payload).__name__} "), error
            assert "\n" not in error["message"] and error["message"].endswith("valid requests: state, pause, resume, "
                                                                               "validate, page")
            fe.message(comm_id, {"request": "state"})  # the channel still answers
            assert fe.comm_messages(comm_id, _first("state"))
        finally:
            fe.close()
        stderr.seek(0)
        logged = stderr.read()
    assert "Traceback" not in logged and "AttributeError" not in logged, logged
