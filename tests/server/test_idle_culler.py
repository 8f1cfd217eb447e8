"""Idle means idle, through a real jupyter_server in this process with real kernels and the fake NVML's per-process
utilization: (a) a kernel whose background child computes at 100 % is never culled, and its GPU work moves the
kernel's and the server's activity; the same child at 0 % with the kernel idle is warned, then shut down, and the
shutdown is kept for the sidebar; (b) an open panel, a sidebar comm and sidebar polling keep jupyter_server's own
figure moving, yet the kernel is culled: their traffic is not activity."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import signal
import time

import pytest
from fakenvml import MIB, fake_env, three_gpus
from prometheus_client.parser import text_string_to_metric_families
from serverapi import get_gpus, get_metrics, start_notebook_session

pytestmark = [pytest.mark.server, pytest.mark.kernel]

CULLING = {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
           "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0, "cull_idle_gpu_kernels_after": 6.0,
                           "cull_warning": 3.0, "cull_interval": 0.5, "activity_interval": 0.5}}


async def _client(jp_serverapp, kernel_id: str):
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    client = kernel.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    return client


async def _run(client, code: str, timeout: float = 60) -> str:
    """Run ``code`` as a cell; its stdout."""
    msg_id = client.execute(code)
    out = []
    deadline = time.monotonic() + timeout
    while True:
        message = await client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            out.append(message["content"]["text"])
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return "".join(out)


def _holding(config: dict, pid: int, sm: int) -> dict:
    config["gpus"][1]["processes"] = [{"pid": pid, "used": 4096 * MIB, "sm": sm}]
    return config


def _idle_metric(metrics: tuple[str, str], kernel_id: str) -> float | None:
    for family in text_string_to_metric_families(metrics[1]):
        for sample in family.samples:
            if sample.name == "tfgpu_kernel_idle_seconds" and sample.labels["kernel_id"] == kernel_id:
                return sample.value
    return None


def _kernel(doc: dict, kernel_id: str) -> dict | None:
    return next((k for k in doc["kernels"] if k["id"] == kernel_id), None)


@pytest.mark.parametrize("jp_server_config", [CULLING])
async def test_a_child_computing_keeps_its_idle_kernel_and_at_zero_it_is_warned_then_shut_down(
        jp_fetch, jp_serverapp, fake_gpus):
    manager = jp_serverapp.kernel_manager
    jp_serverapp.web_app.settings["tfgpu_extension"].start()  # pytest-jupyter never runs the server's start
    kernel_id = await start_notebook_session(jp_fetch, "train in background.ipynb")
    client = await _client(jp_serverapp, kernel_id)
    child = int(await _run(client, "import subprocess, sys\n"
                                   "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
                                   "print(child.pid)"))
    try:
        config = _holding(three_gpus(), child, 100)
        fake_gpus.write(config)
        started = time.monotonic()
        before = manager.get_kernel(kernel_id).last_activity
        # Past the timeout with no cell run: the child computes, so the kernel is busy, never warned.
        while time.monotonic() - started < 8:
            doc = await get_gpus(jp_fetch)
            assert kernel_id in manager.list_kernel_ids(), "a kernel whose child computes on the GPU was culled"
            assert doc["culler"]["warnings"] == []
            await asyncio.sleep(0.5)
        activity = _kernel(doc, kernel_id)["activity"]
        assert activity["state"] == "gpu_busy" and activity["child"] is True and activity["pid"] == child
        assert activity["text"] == f"busy on GPU 1 (child pid {child}, 100% SM)"
        assert doc["all_idle"] is False
        assert _kernel(doc, kernel_id)["idle_s"] is None  # one definition of idle: the kernel's figure is the rule's
        assert _idle_metric(await get_metrics(jp_fetch), kernel_id) == 0.0
        # Its GPU work is activity: the kernel's (jupyter_server's culler) and the server's (JupyterHub).
        now = datetime.datetime.now(datetime.timezone.utc)
        kernel = manager.get_kernel(kernel_id)
        assert kernel.last_activity > before and (now - kernel.last_activity).total_seconds() < 2
        assert (now - jp_serverapp.web_app.settings["tfgpu_last_activity"]).total_seconds() < 2
        assert jp_serverapp.web_app.last_activity() >= jp_serverapp.web_app.settings["tfgpu_last_activity"]

        # The child stops computing but keeps its memory: idle. Warned first, then shut down.
        fake_gpus.write(_holding(config, child, 0))
        idle_from = time.monotonic()
        warned_at = warning = None
        while kernel_id in manager.list_kernel_ids():
            assert time.monotonic() - idle_from < 30, "the idle kernel holding GPU memory was not shut down"
            doc = await get_gpus(jp_fetch)
            if warned_at is None and doc["culler"]["warnings"]:
                warned_at, warning = time.monotonic(), doc["culler"]["warnings"][0]
                assert _kernel(doc, kernel_id)["activity"]["text"].startswith("idle ")
                assert _kernel(doc, kernel_id)["activity"]["text"].endswith("· holds 4.0 GiB")
                assert _idle_metric(await get_metrics(jp_fetch), kernel_id) >= 6.0 - 3.0 - 1.0
            await asyncio.sleep(0.2)
        shut_at = time.monotonic()
        assert warned_at is not None, "shut down without a warning in any answer"
        assert warning["kernel_id"] == kernel_id and warning["notebook"] == "train in background.ipynb"
        assert warning["text"].startswith("train in background.ipynb will be shut down in ")
        assert "holding 4.0 GiB on GPU 1" in warning["text"]
        assert shut_at - warned_at >= 3.0 - 0.5  # the warning time, less one look
        assert warned_at - idle_from >= 6.0 - 3.0 - 1.0  # warned once idle for the timeout less the warning
        doc = await get_gpus(jp_fetch)
        released = doc["culler"]["released"]
        assert len(released) == 1 and released[0]["kernel_id"] == kernel_id and released[0]["freed_mib"] == 4096
        assert released[0]["text"].startswith("Shut down train in background.ipynb at ")
        assert "freed 4.0 GiB on GPU 1" in released[0]["text"]
        assert doc["culler"]["warnings"] == []
    finally:
        client.stop_channels()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@pytest.fixture
def kernel_nvml(fake_gpus, fake_nvml_lib, monkeypatch):
    """Kernels this server starts read the same fake NVML (they inherit this process's environment)."""
    for key, value in fake_env(fake_nvml_lib.parent, fake_gpus.path, base={}).items():
        monkeypatch.setenv(key, value)
    return fake_gpus


@pytest.mark.parametrize("jp_server_config", [CULLING])
async def test_an_open_panel_a_sidebar_comm_and_polling_do_not_keep_an_idle_kernel(jp_fetch, jp_serverapp,
                                                                                    kernel_nvml):
    manager = jp_serverapp.kernel_manager
    jp_serverapp.web_app.settings["tfgpu_extension"].start()
    kernel_id = await start_notebook_session(jp_fetch, "left open.ipynb")
    client = await _client(jp_serverapp, kernel_id)
    pid = manager.get_kernel(kernel_id).provisioner.pid
    await _run(client, "%load_ext tfgpu_magic\n%config TfgpuMagics.refresh_interval = 0.3\n%tfgpu panel")
    comm_id = "sidebar-comm"
    client.session.send(client.shell_channel.socket, "comm_open", {
        "comm_id": comm_id, "target_name": "tfgpu", "data": {"request": "subscribe", "version": 1}})
    config = _holding(three_gpus(), pid, 0)
    traffic, step = 0, 0
    started = time.monotonic()
    first_activity = manager.get_kernel(kernel_id).last_activity
    while kernel_id in manager.list_kernel_ids():
        assert time.monotonic() - started < 40, "an idle kernel with a panel and a sidebar open was never culled"
        step += 1
        config["gpus"][1]["utilization_gpu"] = step % 7  # the figures change: the panel pushes
        config["gpus"][1]["memory_used"] = (20000 + step) * MIB
        kernel_nvml.write(config)
        await get_gpus(jp_fetch)  # the sidebar's polling
        client.session.send(client.shell_channel.socket, "comm_msg", {"comm_id": comm_id,
                                                                     "data": {"request": "state"}})
        while True:
            try:
                message = await client.get_iopub_msg(timeout=0.05)
            except Exception:  # queue.Empty: nothing more now
                break
            traffic += message["msg_type"] == "comm_msg"
        await asyncio.sleep(0.4)
    # The traffic was there, and jupyter_server counted it as the kernel's activity all along.
    assert traffic >= 10, traffic
    assert manager.last_kernel_activity > first_activity
    ended = [r for r in (await get_gpus(jp_fetch))["culler"]["released"] if r["kernel_id"] == kernel_id]
    assert ended and ended[0]["notebook"] == "left open.ipynb"
    client.stop_channels()


@pytest.mark.parametrize("jp_server_config", [CULLING])
async def test_keep_answers_only_for_a_warned_kernel(jp_fetch, jp_serverapp, fake_gpus):
    jp_serverapp.web_app.settings["tfgpu_extension"].start()
    for body, code in ((json.dumps({"kernel_id": "nope"}), 404), ("{}", 400), ("[1]", 400),
                       (json.dumps({"kernel_id": "k", "more": 1}), 400), ("not json", 400)):
        with pytest.raises(Exception) as err:
            await jp_fetch("tfgpu", "api", "keep", method="POST", body=body)
        assert getattr(err.value, "code", None) == code, (body, err.value)
        answer = json.loads(err.value.response.body)
        assert answer["message"].startswith("tfgpu: ") and "\n" not in answer["message"]


@pytest.mark.parametrize("jp_server_config", [CULLING])
async def test_a_kept_kernel_is_not_warned_again_until_idle_a_whole_timeout_more(jp_fetch, jp_serverapp, fake_gpus):
    manager = jp_serverapp.kernel_manager
    jp_serverapp.web_app.settings["tfgpu_extension"].start()
    kernel_id = await start_notebook_session(jp_fetch, "kept.ipynb")
    client = await _client(jp_serverapp, kernel_id)
    fake_gpus.write(_holding(three_gpus(), manager.get_kernel(kernel_id).provisioner.pid, 0))
    deadline = time.monotonic() + 30
    while not (await get_gpus(jp_fetch))["culler"]["warnings"]:
        assert time.monotonic() < deadline, "never warned"
        await asyncio.sleep(0.2)
    response = await jp_fetch("tfgpu", "api", "keep", method="POST", body=json.dumps({"kernel_id": kernel_id}))
    kept = json.loads(response.body)
    kept_at = time.time()
    assert kept["kept"] is True and kept["kernel_id"] == kernel_id
    assert kept["idle_again_at"] == pytest.approx(kept_at + 6.0 - 3.0, abs=1.0)  # warned again from then
    # Not warned again (nor shut down) before it has been idle the whole timeout less the warning once more.
    while time.time() < kept_at + 6.0 - 3.0 - 0.5:
        doc = await get_gpus(jp_fetch)
        assert doc["culler"]["warnings"] == [] and kernel_id in manager.list_kernel_ids()
        assert _kernel(doc, kernel_id)["activity"]["idle_s"] < 6.0 - 3.0
        await asyncio.sleep(0.2)
    while not (await get_gpus(jp_fetch))["culler"]["warnings"]:  # then warned again, as any idle kernel
        assert time.time() < kept_at + 15, "a kept kernel idle again was never warned again"
        await asyncio.sleep(0.2)
    assert kernel_id in manager.list_kernel_ids()
    client.stop_channels()


JUPYTER_CULLER = {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
                  "MappingKernelManager": {"cull_idle_timeout": 5, "cull_interval": 1},
                  "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0, "activity_interval": 0.5}}


@pytest.mark.parametrize("jp_server_config", [JUPYTER_CULLER])
async def test_jupyter_servers_own_culler_spares_a_kernel_whose_child_computes(jp_fetch, jp_serverapp, fake_gpus):
    """tfgpu's culler off, jupyter_server's on (cull_idle_timeout 5 s): the kernel whose background child computes
    on the GPU outlives the timeout several times over; the one whose child holds memory at 0 % is culled."""
    manager = jp_serverapp.kernel_manager
    jp_serverapp.web_app.settings["tfgpu_extension"].start()
    children = {}
    clients = []
    for name in ("computing", "holding"):
        kernel_id = await start_notebook_session(jp_fetch, f"{name}.ipynb")
        client = await _client(jp_serverapp, kernel_id)
        clients.append(client)
        children[name] = (kernel_id, int(await _run(client, (
            "import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\nprint(child.pid)"))))
    try:
        config = three_gpus()
        config["gpus"][1]["processes"] = [{"pid": children["computing"][1], "used": 4096 * MIB, "sm": 90},
                                          {"pid": children["holding"][1], "used": 4096 * MIB, "sm": 0}]
        fake_gpus.write(config)
        started = time.monotonic()
        while children["holding"][0] in manager.list_kernel_ids():
            assert time.monotonic() - started < 30, "jupyter_server's culler never culled the idle kernel"
            await get_gpus(jp_fetch)
            await asyncio.sleep(0.5)
        await asyncio.sleep(8)  # more than the timeout again
        assert children["computing"][0] in manager.list_kernel_ids(), "jupyter_server culled a kernel at work"
    finally:
        for client in clients:
            client.stop_channels()
        for _, pid in children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
