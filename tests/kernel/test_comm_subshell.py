"""The sidebar's requests on a kernel subshell, as JupyterLab 4.6 sends them with ipykernel 7 (its comm messages go
to a subshell per comm target, `CommsOverSubshells.PerCommTarget`): a `create_subshell_request` on the control
channel, then each `comm_msg` with `subshell_id` in its header, built with jupyter_client's Session. The requests
run on the subshell's thread beside the cells of the main shell: `import tensorflow`, `%tfgpu` changes made and
refused, the start-up apply. Every request gets its one answer while the cell still runs, every answer is whole
(no error section, no traceback, no request lost), and `validate` gives the verdict a quiet kernel gives."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid

import pytest
from harness import frontend_code, kernel_folder, user_env

from tfgpu_magic.ipython.comm import SECTIONS, TARGET

pytestmark = [pytest.mark.kernel, pytest.mark.tf]

CELLS = [
    "%tfgpu cpus 3",
    "import tensorflow as tf\nx = tf.reduce_sum(tf.ones((200, 200)))",
    "%tfgpu growth on",
    "try:\n    get_ipython().run_line_magic('tfgpu', 'cpus 4')\nexcept Exception as err:\n    print(err)",
    "%tfgpu placement on\ny = tf.matmul(tf.ones((3, 3)), tf.ones((3, 3)))",
    "%tfgpu memory",
]
GOOD, BAD = {"cpus": "2", "growth": "on"}, {"cpus": "0"}


class SubshellFrontend:
    def __init__(self):
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
        self.session = self.client.session
        self.replies: dict[str, dict] = {}  # the shell replies, by their request's msg_id
        self.comm: list[tuple[float, dict]] = []  # (arrival, data) of every comm message from the kernel
        self.streams: list[str] = []
        self._stop = threading.Event()
        self._readers = [threading.Thread(target=self._read_iopub, daemon=True),
                         threading.Thread(target=self._read_shell, daemon=True)]
        for reader in self._readers:
            reader.start()

    def close(self):
        self._stop.set()
        for reader in self._readers:
            reader.join(timeout=5)
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def _read_iopub(self):
        while not self._stop.is_set():
            with contextlib.suppress(queue.Empty):
                msg = self.client.get_iopub_msg(timeout=0.2)
                if msg["msg_type"] == "comm_msg":
                    self.comm.append((time.monotonic(), msg["content"]["data"]))
                elif msg["msg_type"] == "stream":
                    self.streams.append(msg["content"]["text"])
                elif msg["msg_type"] == "error":
                    self.streams.append("\n".join(msg["content"]["traceback"]))

    def _read_shell(self):
        while not self._stop.is_set():
            with contextlib.suppress(queue.Empty):
                msg = self.client.get_shell_msg(timeout=0.2)
                self.replies[msg["parent_header"]["msg_id"]] = {**msg["content"], "at": time.monotonic()}

    def subshell(self) -> str:
        request = self.session.msg("create_subshell_request", {})
        self.client.control_channel.send(request)
        reply = self.client.get_control_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == request["header"]["msg_id"]
        assert reply["content"]["status"] == "ok", reply["content"]
        return reply["content"]["subshell_id"]

    def send(self, msg_type: str, content: dict, subshell_id: str | None = None) -> str:
        msg = self.session.msg(msg_type, content)
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        self.client.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def execute(self, code: str, **options) -> str:
        return self.send("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": False,
                                             **options})

    def wait_reply(self, msg_id: str, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while msg_id not in self.replies:
            assert time.monotonic() < deadline, f"no reply to {msg_id}"
            time.sleep(0.02)
        return self.replies[msg_id]

    def wait_comm(self, until, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, f"timed out; comm messages: {[d for _, d in self.comm][-5:]}"
            time.sleep(0.02)


@pytest.fixture
def fe():
    frontend = SubshellFrontend()
    yield frontend
    frontend.close()


def _answers(fe, comm_from: int, kind: str) -> list[tuple[float, dict]]:
    return [(t, d) for t, d in fe.comm[comm_from:] if d.get("type") == kind]


def test_requests_on_a_subshell_are_answered_beside_running_cells(fe):
    subshell = fe.subshell()
    fe.wait_reply(fe.execute("%load_ext tfgpu_magic"))
    comm_id = uuid.uuid4().hex
    fe.send("comm_open", {"comm_id": comm_id, "target_name": TARGET, "data": {"request": "subscribe", "version": 1}})
    fe.wait_comm(lambda: _answers(fe, 0, "state"))
    quiet = {}  # the verdicts of a kernel that runs nothing, asked on the main shell's turn
    for name, settings in (("good", GOOD), ("bad", BAD)):
        start = len(fe.comm)
        fe.send("comm_msg", {"comm_id": comm_id, "data": {"request": "validate", "id": name, "settings": settings}},
                subshell)
        fe.wait_comm(lambda s=start: _answers(fe, s, "validated"))
        quiet[name] = _answers(fe, start, "validated")[0][1]
    assert quiet["good"]["ok"] is True and quiet["bad"]["ok"] is False

    sent = answered_during = 0
    ids: list[int] = []
    cells = CELLS + CELLS[2:] * 4  # once TensorFlow runs, the same changes and refusals again
    for cell in cells:
        start = len(fe.comm)
        cell_id = fe.execute(cell)
        while cell_id not in fe.replies:  # requests as fast as a busy sidebar sends them, while the cell runs
            sent += 1
            if sent % 3:
                ids.append(sent)
                settings = GOOD if sent % 2 else BAD
                data = {"request": "validate", "id": sent, "settings": settings}
            else:
                data = {"request": "state"}
            fe.send("comm_msg", {"comm_id": comm_id, "data": data}, subshell)
            time.sleep(0.01)
        reply = fe.replies[cell_id]
        assert reply["status"] == "ok", (cell, reply)
        answered_during += sum(t < reply["at"] for t, _ in _answers(fe, start, "validated"))
    fe.wait_comm(lambda: {d.get("id") for _, d in fe.comm if d.get("type") == "validated"} >= set(ids), 60)
    # The last request may be a `state` sent after the last `validate`: its answer may come after theirs.
    fe.wait_comm(lambda: sum(d.get("type") == "state" for _, d in fe.comm) >= 1 + sent - len(ids), 60)

    validated = [d for _, d in fe.comm if d.get("type") == "validated" and isinstance(d.get("id"), int)]
    assert sorted(d["id"] for d in validated) == ids  # one answer each, none lost, none twice
    for answer in validated:
        expected = quiet["good"] if answer["id"] % 2 else quiet["bad"]
        assert (answer["ok"], answer["errors"]) == (expected["ok"], expected["errors"]), answer
    states = [d for _, d in fe.comm if d.get("type") == "state"]
    assert len(states) == 1 + sent - len(ids)
    assert all(set(s["sections"]) == set(SECTIONS) and s["sections"].get("error") in (None, {}) for s in states), [
        s["sections"].get("error") for s in states if s["sections"].get("error")]
    assert not [d for _, d in fe.comm if d.get("type") == "error"]
    assert answered_during >= len(cells), "answers came while the cells ran, not after"
    print(f"{sent} requests beside {len(cells)} cells; {answered_during} validate answers before their cell ended")
    assert not [s for s in fe.streams if "Traceback" in s], fe.streams
    # The kernel's own record after all that is what the cells did.
    final = states[-1]["sections"]["kernel"]
    assert final["tensorflow"]["state"] == "initialized"
    assert {r["setting"]: r["asked"] for r in final["settings"]}.get("cpus") == "3"
    assert [r["setting"] for r in final["refused"]] == ["cpus"]


def test_requests_on_a_subshell_beside_the_start_up_apply(fe):
    """The sidebar's comm can be open while the start-up apply of a restart runs (a second frontend, or the
    kernel's comm opened first): requests beside it are answered while it runs, each with the settings of a real
    moment (none, then each one added in the order they apply)."""
    subshell = fe.subshell()
    fe.wait_reply(fe.execute("%load_ext tfgpu_magic", silent=True, store_history=False))
    comm_id = uuid.uuid4().hex
    fe.send("comm_open", {"comm_id": comm_id, "target_name": TARGET, "data": {"request": "subscribe", "version": 1}})
    fe.wait_comm(lambda: _answers(fe, 0, "state"))
    code, expression = frontend_code({"version": 1, "settings": {"cpus": "2", "growth": "on", "placement": "on"}})
    apply_id = fe.execute(code, silent=True, store_history=False, user_expressions={"tfgpu": expression})
    sent = 0
    while apply_id not in fe.replies and sent < 2000:
        sent += 1
        fe.send("comm_msg", {"comm_id": comm_id, "data": {"request": "state"}}, subshell)
        time.sleep(0.005)
    done = fe.wait_reply(apply_id)
    result = done["user_expressions"]["tfgpu"]["data"]["application/json"]
    assert result["ok"] is True, result
    fe.wait_comm(lambda: len(_answers(fe, 0, "state")) >= 1 + sent)
    assert sum(t < done["at"] for t, _ in _answers(fe, 1, "state")) >= 1, "answered while the apply ran"
    for _, state in _answers(fe, 0, "state"):
        settings = {r["setting"]: r["asked"] for r in state["sections"]["kernel"]["settings"]}
        assert settings in ({}, {"cpus": "2"}, {"cpus": "2", "growth": "on"}), settings  # each a real moment
        assert not state["sections"].get("error"), state["sections"]["error"]
