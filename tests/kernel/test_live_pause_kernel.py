"""The live views pause in a real kernel (the user's environment, the fake NVML whose figures the test keeps
moving): jupyter_server counts every comm message as the kernel's activity, so a panel and a sidebar that
refreshed forever would keep an idle kernel from ever being culled. What is counted is what a server would see:
the iopub ``comm_msg`` messages, the panel's widgets and the sidebar's ``tfgpu`` comm together."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid

import pytest
from fakenvml import MIB, three_gpus
from harness import user_env

pytestmark = pytest.mark.kernel


class Session:
    """One kernel, its iopub read here, and the sidebar's comm to it."""

    def __init__(self, env: dict[str, str], cwd: str):
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", env=env, cwd=cwd)
        self.comm_id: str | None = None

    def run(self, source: str) -> list[dict]:
        """Run a cell; the comm_msgs that came while it ran (the cell's start resumes a paused model)."""
        got: list[dict] = []

        def keep(msg):
            if msg["msg_type"] == "comm_msg":
                got.append(msg["content"])

        reply = self.client.execute_interactive(source, timeout=120, output_hook=keep)
        assert reply["content"]["status"] == "ok", (source, reply["content"])
        return got

    def send(self, msg_type: str, content: dict) -> None:
        self.client.shell_channel.send(self.client.session.msg(msg_type, content))

    def open_sidebar(self) -> None:
        self.comm_id = uuid.uuid4().hex
        self.send("comm_open", {"comm_id": self.comm_id, "target_name": "tfgpu",
                                "data": {"request": "subscribe", "version": 1}})

    def request(self, data: dict) -> None:
        self.send("comm_msg", {"comm_id": self.comm_id, "data": data})

    def comm_msgs(self, seconds: float) -> list[dict]:
        """Every comm_msg on iopub for ``seconds``: (comm id, data) of the panel's widgets and the sidebar's comm."""
        got = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(queue.Empty):
                msg = self.client.get_iopub_msg(timeout=min(left, 0.2))
                if msg["msg_type"] == "comm_msg":
                    got.append(msg["content"])
        return got

    def sidebar_until(self, kind: str, timeout: float = 20) -> list[dict]:
        """comm_msgs until the sidebar's comm gets a message of ``kind``; the panel's go in the list too."""
        got = []
        deadline = time.monotonic() + timeout
        while not any(m["comm_id"] == self.comm_id and m["data"].get("type") == kind for m in got):
            assert time.monotonic() < deadline, f"no {kind!r} message; got {[m['data'] for m in got][-5:]}"
            got += self.comm_msgs(0.2)
        return got

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def sidebar(msgs: list[dict], session: Session) -> list[dict]:
    return [m["data"] for m in msgs if m["comm_id"] == session.comm_id]


def panel(msgs: list[dict], session: Session) -> list[dict]:
    return [m for m in msgs if m["comm_id"] != session.comm_id]


@pytest.fixture
def moving_nvml(fake_nvml):
    """The fake NVML with GPU 0's memory moving every 0.1 s, so a live view always has something new to send."""
    stop = threading.Event()

    def move():
        used = 30000
        while not stop.wait(0.1):
            used = used + 1 if used < 30500 else 30000
            config = three_gpus()
            config["gpus"][0]["memory_used"] = used * MIB
            fake_nvml.write(config)

    fake_nvml.write(three_gpus())
    mover = threading.Thread(target=move, daemon=True)
    mover.start()
    yield fake_nvml
    stop.set()
    mover.join()


@pytest.fixture
def session(moving_nvml, tmp_path):
    s = Session(user_env(**moving_nvml.env), str(tmp_path))
    s.nvml_calls = moving_nvml.call_log  # the fake logs each NVML call the kernel makes
    yield s
    s.close()


def test_an_idle_kernel_sends_no_comm_message_until_a_cell_runs(session):
    session.run("%load_ext tfgpu_magic")
    session.run("%config TfgpuMagics.live_pause_after = 3\n%config TfgpuMagics.refresh_interval = 0.3")
    session.run("%tfgpu panel")
    session.open_sidebar()
    session.sidebar_until("state")
    session.run("x = 1")  # young: the figures flow
    young = session.comm_msgs(1.5)
    assert len(panel(young, session)) >= 2, young

    paused = session.sidebar_until("paused")  # 3 s after the cell's end
    assert sidebar(paused, session)[-1] == {"type": "paused", "protocol": 1, "reason": "idle"}
    session.comm_msgs(0.5)  # the panel's own one message at the pause
    calls = session.nvml_calls.stat().st_size
    assert calls > 0  # the young kernel read the fake
    quiet = session.comm_msgs(4)
    assert quiet == [], quiet  # nothing at all, though the figures keep moving
    assert session.nvml_calls.stat().st_size == calls  # and nothing sampled: the refresher stopped

    resumed = session.run("x = 2")  # the next cell resumes: the whole state, then the figures again
    resumed += session.comm_msgs(1.5)
    assert [m["type"] for m in sidebar(resumed, session)][:1] == ["state"], resumed
    assert len(panel(resumed, session)) >= 2, resumed


def test_a_hidden_page_pauses_the_panel_too_and_visible_resumes(session):
    session.run("%load_ext tfgpu_magic")
    session.run("%config TfgpuMagics.live_pause_after = 0\n%config TfgpuMagics.refresh_interval = 0.3")
    session.run("%tfgpu panel")
    session.open_sidebar()
    session.sidebar_until("state")
    assert len(panel(session.comm_msgs(1.5), session)) >= 2  # never idle-paused: the figures flow

    session.request({"request": "page", "visible": "no"})
    error = next(m for m in session.sidebar_until("error") if m["data"].get("type") == "error")["data"]
    assert error["message"] == ("tfgpu: bad \"visible\" 'no' in a page request: expected true or false, as in "
                                "{\"request\": \"page\", \"visible\": false}")

    session.request({"request": "page", "visible": False})
    paused = session.sidebar_until("paused")
    assert sidebar(paused, session)[-1]["reason"] == "hidden"
    session.comm_msgs(0.5)
    assert session.comm_msgs(4) == []

    session.request({"request": "page", "visible": True})
    resumed = session.sidebar_until("state")
    resumed += session.comm_msgs(1.5)
    assert len(panel(resumed, session)) >= 2, resumed


def test_an_administrators_kernel_config_sets_the_pause_for_every_kernel(tmp_path):
    """`c.TfgpuMagics.live_pause_after` in a kernel config file (an administrator's, for every kernel; here the
    profile's, through IPYTHONDIR, as the system-wide one is read the same way) reaches the live model; a bad value
    there is one tfgpu line, and the default stays."""
    for value, expected in (("42", 42.0), ("float('nan')", 600.0)):
        ipython = tmp_path / f"ipython-{expected:g}"
        (ipython / "profile_default").mkdir(parents=True)
        (ipython / "profile_default" / "ipython_kernel_config.py").write_text(
            f"c.TfgpuMagics.live_pause_after = {value}\n")
        session = Session(user_env(IPYTHONDIR=str(ipython)), str(tmp_path))
        try:
            out: list[str] = []
            reply = session.client.execute_interactive(
                "%load_ext tfgpu_magic\n"
                "magics = get_ipython().magics_manager.registry['TfgpuMagics']\n"
                "print(magics.live_pause_after, magics.live.pause_after)", timeout=120,
                output_hook=lambda m, out=out: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream"
                else None)
            assert reply["content"]["status"] == "ok"
            text = "".join(out)
            option, model = (float(v) for v in text.splitlines()[0].split())
            assert option == model == expected, text
            if value.startswith("float"):
                assert "tfgpu: bad idle pause nan" in text and "TfgpuMagics.live_pause_after stays 600" in text, text
        finally:
            session.close()
