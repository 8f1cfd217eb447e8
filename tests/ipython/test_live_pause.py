"""The live model pauses its views while the kernel is idle or every page is hidden (core/live.py): comm messages
count as the kernel's activity, so views refreshed forever would keep an idle kernel from being culled. The model
with a fake clock (no ten-minute sleeps), the option's checks in a real shell, the panel's pause line and Resume,
and the sidebar channel's page requests over dummy comms (a real kernel: tests/kernel/test_live_pause_kernel.py)."""

from __future__ import annotations

import time
from dataclasses import replace

import gpu_fakes
import ipywidgets
import pytest
from fakeclock import Clock

from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.live import SECTIONS, LiveModel
from tfgpu_magic.ipython.comm import SidebarChannel
from tfgpu_magic.ipython.panel import Panel

PAUSE = 60.0


def until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Figures:
    """An in-memory NVML whose GPU 0 memory the test moves: every refresh has something new to say."""

    def __init__(self):
        self.used = 30000

    def __call__(self):
        base = gpu_fakes.three_gpus()
        first = replace(base.gpus[0], memory_used_mib=self.used, memory_free_mib=40960 - self.used)
        return replace(base, gpus=(first, *base.gpus[1:]))

    def move(self):
        self.used += 1


@pytest.fixture
def model():
    clock, figures = Clock(), Figures()
    m = LiveModel(Controller(environ={}, nvml_snapshot=figures), interval=0.1, clock=clock, pause_after=PAUSE)
    m.clock, m.figures = clock, figures  # for the test
    yield m
    m.stop()


def idle_for(model, seconds: float) -> None:
    model.clock.now += seconds
    time.sleep(0.35)  # a few refresher passes (interval 0.1)


def paused_messages(got: list[dict]) -> list[dict]:
    return [g["paused"] for g in got if g.get("paused")]


def test_an_idle_kernel_pauses_each_view_once_stops_sampling_and_a_cell_resumes_with_everything(model):
    got: list[dict] = []
    model.subscribe(got.append)
    model.figures.move()
    idle_for(model, PAUSE - 1)
    assert model.paused is None and model.running and got  # young: the new figures went out
    idle_for(model, 2)
    until(lambda: not model.running)  # nothing but paused views: nothing is sampled
    assert model.paused == "idle"
    assert got[-1] == {"paused": {"reason": "idle", "at": PAUSE + 1}} and len(paused_messages(got)) == 1
    told, samples = len(got), model.samples
    model.figures.move()
    assert model.refresh(read_nvml=True)  # a refresh from elsewhere (a cell's end) keeps the state ...
    time.sleep(0.35)
    assert len(got) == told and model.samples == samples + 1  # ... and tells nobody; the refresher is gone

    model.cell_started()  # the per-cell hook: the next cell resumes
    whole = got[-1]
    assert set(SECTIONS) <= set(whole) and whole["paused"] is None and model.paused is None
    assert whole["gpus"]["gpus"][0]["memory_used_mib"] == model.figures.used  # what changed while paused, too
    assert model.running
    idle_for(model, 10 * PAUSE)  # a cell that runs long is not idleness
    assert model.paused is None
    model.cell_finished(1)
    idle_for(model, PAUSE - 1)
    assert model.paused is None
    idle_for(model, 2)
    until(lambda: model.paused == "idle")
    assert len(paused_messages(got)) == 2


def test_a_watcher_keeps_the_refresher_but_paused_views_get_nothing(model):
    watched: list[dict] = []
    got: list[dict] = []
    model.watch(watched.append)  # the kernel's container report (core/handshake.py)
    model.subscribe(got.append)
    idle_for(model, PAUSE + 1)
    until(lambda: model.paused == "idle")
    told, seen = len(got), len(watched)
    model.figures.move()
    time.sleep(0.35)
    assert model.running and len(watched) > seen and len(got) == told
    assert watched[-1]["gpus"]["gpus"][0]["memory_used_mib"] == model.figures.used


def test_hidden_pages_pause_until_one_is_shown_and_a_cell_does_not_resume_them(model):
    got: list[dict] = []
    model.subscribe(got.append)
    model.set_hidden(True)
    assert got[-1] == {"paused": {"reason": "hidden", "at": 0.0}} and model.paused == "hidden"
    until(lambda: not model.running)
    told = len(got)
    model.cell_started()  # a cell while the page is hidden: nobody sees its figures
    model.cell_finished(1)
    idle_for(model, PAUSE + 1)  # idle as well now: still one message, and the page decides
    assert len(got) == told and model.paused == "hidden" and not model.running
    model.set_hidden(False)
    assert got[-1]["paused"] is None and set(SECTIONS) <= set(got[-1]) and model.running
    # Shown again counts as somebody looking: idleness counts from now.
    idle_for(model, PAUSE - 1)
    assert model.paused is None


def test_idle_then_hidden_then_shown_resumes(model):
    got: list[dict] = []
    model.subscribe(got.append)
    idle_for(model, PAUSE + 1)
    until(lambda: model.paused == "idle")
    model.set_hidden(True)
    assert model.paused == "hidden" and len(paused_messages(got)) == 1  # no second message
    model.cell_started()
    assert model.paused == "hidden"
    model.set_hidden(False)
    assert model.paused is None and got[-1]["paused"] is None


def test_a_view_subscribing_while_paused_gets_the_state_with_the_pause_and_starts_nothing(model):
    first: list[dict] = []
    token = model.subscribe(first.append)
    idle_for(model, PAUSE + 1)
    until(lambda: model.paused == "idle" and not model.running)
    model.unsubscribe(token)
    second: list[dict] = []
    model.subscribe(second.append)
    assert not model.running and second == []
    assert model.state()["paused"]["reason"] == "idle"
    assert model.resume() is True and second[-1]["paused"] is None and model.running
    assert model.resume() is False  # not paused: nothing sent
    assert len(second) == 1


def test_zero_never_pauses(model):
    model.pause_after = 0
    got: list[dict] = []
    model.subscribe(got.append)
    idle_for(model, 10**7)
    assert model.paused is None and model.running


# -- the option --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "shown"), [("float('nan')", "nan"), ("float('inf')", "inf"), ("-1", "-1"),
                                              ("'x'", "'x'"), ("3e6", "3000000.0"), ("True", "True")])
def test_a_bad_live_pause_after_is_one_line_and_the_option_keeps_its_value(shell, capsys, value, shown):
    shell.run_line_magic("config", "TfgpuMagics.live_pause_after = 300")
    assert shell.tfgpu.live.pause_after == 300 and capsys.readouterr().err == ""
    shell.run_line_magic("config", f"TfgpuMagics.live_pause_after = {value}")
    # One line per magics object this test process has made (they share the shell's config): the same line.
    (line,) = set(capsys.readouterr().err.splitlines())
    assert line == (f"tfgpu: bad idle pause {shown}: expected seconds without a cell before the live views pause, "
                    "from 0 (never pause) to 2592000 (30 days); TfgpuMagics.live_pause_after stays 300.0")
    assert shell.tfgpu.live_pause_after == 300 and shell.tfgpu.live.pause_after == 300


def test_live_pause_after_reaches_the_model(shell, capsys):
    assert shell.tfgpu.live_pause_after == 600 and shell.tfgpu.live.pause_after == 600
    shell.run_line_magic("config", "TfgpuMagics.live_pause_after = '2592000'")
    assert shell.tfgpu.live.pause_after == 2592000
    shell.run_line_magic("config", "TfgpuMagics.live_pause_after = 0")
    assert shell.tfgpu.live.pause_after == 0 and capsys.readouterr().err == ""


# -- the panel ---------------------------------------------------------------------------------------------------
def test_the_panel_says_paused_sends_nothing_more_and_resume_brings_everything(model, monkeypatch):
    panel = Panel(model=model, magics=None)
    sent: list = []
    monkeypatch.setattr(ipywidgets.Widget, "_send", lambda self, msg, buffers=None: sent.append((self, msg)))
    try:
        assert panel._paused_box.children == ()
        idle_for(model, PAUSE + 1)
        until(lambda: model.paused == "idle")
        # One message at the pause: the line and Resume, in one change of one box.
        assert [w for w, _ in sent] == [panel._paused_box]
        line, button = panel._paused_box.children
        assert "paused: the kernel is idle" in line.value and button.description == "Resume"
        sent.clear()
        model.figures.move()
        model.refresh(read_nvml=True)
        time.sleep(0.35)
        assert sent == []  # nothing while paused, though the figures moved

        button.click()  # the frontend's click
        assert model.paused is None and panel._paused_box.children == ()
        assert f"{model.figures.used:,} / 40,960 MiB" in panel._html["memory"].value

        model.set_hidden(True)
        assert "paused: the page is hidden" in panel._paused_box.children[0].value
        model.set_hidden(False)
        assert panel._paused_box.children == ()
    finally:
        panel.close()
    assert all(w.comm is None for w in panel._pause_widgets)


# -- the sidebar's channel: page requests ------------------------------------------------------------------------
class DummyComm:
    """The parts of ipykernel's Comm the channel uses; what it sends is kept."""

    def __init__(self, comm_id: str):
        self.comm_id = comm_id
        self.sent: list[dict] = []
        self.on_close_cb = self.on_msg_cb = None

    def send(self, data):
        self.sent.append(data)

    def on_close(self, cb):
        self.on_close_cb = cb

    def on_msg(self, cb):
        self.on_msg_cb = cb

    def request(self, data):
        self.on_msg_cb({"content": {"data": data}})

    def close(self):
        pass


@pytest.fixture
def channel(shell, model):
    shell.tfgpu._live = model
    channel = SidebarChannel(shell.tfgpu)
    comms = []

    def open_comm(name: str) -> DummyComm:
        comm = DummyComm(name)
        channel._opened(comm, {})
        comms.append(comm)
        return comm

    channel.open_comm = open_comm
    yield channel
    channel.unregister()


def kinds(comm: DummyComm) -> list[str]:
    return [m["type"] for m in comm.sent]


def test_every_page_hidden_pauses_one_shown_resumes_and_a_closed_one_no_longer_counts(channel, model):
    a, b = channel.open_comm("a"), channel.open_comm("b")
    a.request({"request": "page", "visible": False})
    assert model.paused is None  # b's page has said nothing: visible
    b.request({"request": "page", "visible": False})
    assert model.paused == "hidden"
    assert kinds(a)[-1] == kinds(b)[-1] == "paused" and a.sent[-1] == {"type": "paused", "protocol": 1,
                                                                         "reason": "hidden"}
    a.sent.clear(), b.sent.clear()
    b.request({"request": "page", "visible": True})
    assert model.paused is None and kinds(a) == kinds(b) == ["state"]  # the whole state, as after opening
    b.request({"request": "page", "visible": False})
    assert model.paused == "hidden"
    b.on_close_cb({})  # b goes: a's page alone counts, and it is hidden still
    assert model.paused == "hidden"
    a.on_close_cb({})  # nobody left: nothing says a page is hidden
    assert model.paused is None


def test_a_comm_opened_beside_hidden_pages_resumes_and_an_idle_one_opens_paused(channel, model):
    a = channel.open_comm("a")
    a.request({"request": "page", "visible": False})
    assert model.paused == "hidden"
    b = channel.open_comm("b")
    assert model.paused is None and kinds(b) == ["state"] and kinds(a)[-1] == "state"
    idle_for(model, PAUSE + 1)
    until(lambda: model.paused == "idle")
    c = channel.open_comm("c")
    assert kinds(c) == ["state", "paused"] and c.sent[-1]["reason"] == "idle"
    c.sent.clear(), a.sent.clear()
    c.request({"request": "state"})  # the sidebar asks: the model resumes, each comm gets one state
    assert kinds(c) == ["state"] and kinds(a) == ["state"] and model.paused is None


def test_the_per_comm_pause_still_works_and_resume_resumes_the_model(channel, model):
    a = channel.open_comm("a")
    a.request({"request": "pause"})  # the sidebar hidden inside a visible page
    until(lambda: not model.running)
    a.sent.clear()
    model.figures.move()
    model.refresh(read_nvml=True)
    assert a.sent == []
    a.request({"request": "resume"})
    assert kinds(a) == ["state"] and model.running


@pytest.mark.parametrize("visible", [None, "false", 0, 1, [], {"v": 1}])
def test_a_bad_page_request_gets_the_one_line_error(channel, model, visible):
    a = channel.open_comm("a")
    request = {"request": "page"} if visible is None else {"request": "page", "visible": visible}
    a.request(request)
    error = a.sent[-1]
    assert error["type"] == "error" and "\n" not in error["message"]
    assert error["message"] == (f"tfgpu: bad \"visible\" {visible!r} in a page request: expected true or false, as "
                                "in {\"request\": \"page\", \"visible\": false}")
    assert model.paused is None
