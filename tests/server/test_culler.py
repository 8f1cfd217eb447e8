"""The GPU-aware culler through a real jupyter_server in this process, with real kernels: an idle kernel holding GPU
memory is shut down after the set time; a busy one holding memory and an idle one holding none are not."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from fakenvml import MIB, three_gpus
from serverapi import start_notebook_session

from tfgpu_magic.server.culler import gpu_holders

pytestmark = [pytest.mark.server, pytest.mark.kernel]

CULLING = {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
           "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0, "cull_idle_gpu_kernels_after": 4.0,
                           "cull_interval": 0.5}}


async def _client(jp_serverapp, kernel_id: str):
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    client = kernel.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    # The server learns the state from the kernel's status messages on its own iopub socket, which may have joined
    # after the first ones (a slow machine): ask again until it has seen "idle".
    deadline = time.monotonic() + 60
    while kernel.execution_state != "idle":
        assert time.monotonic() < deadline, f"the server never saw kernel {kernel_id} idle"
        client.kernel_info()
        await asyncio.sleep(0.3)
    return client


@pytest.mark.parametrize("jp_server_config", [CULLING])
async def test_only_idle_kernels_holding_gpu_memory_are_shut_down(jp_fetch, jp_serverapp, fake_gpus, caplog):
    manager = jp_serverapp.kernel_manager
    # pytest-jupyter never runs the server's event-loop start (ServerApp._post_start), where jupyter_server starts
    # its extensions: started here, as `jupyter server` does once its loop runs.
    jp_serverapp.web_app.settings["tfgpu_extension"].start()
    idle_holder = await start_notebook_session(jp_fetch, "idle holder.ipynb")
    busy_holder = await start_notebook_session(jp_fetch, "busy holder.ipynb")
    idle_empty = await start_notebook_session(jp_fetch, "idle empty.ipynb")
    clients = [await _client(jp_serverapp, k) for k in (idle_holder, busy_holder, idle_empty)]
    clients[1].execute("import time; time.sleep(30)")  # busy for the whole test
    pid = {k: manager.get_kernel(k).provisioner.pid for k in (idle_holder, busy_holder, idle_empty)}
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": pid[idle_holder], "used": 4096 * MIB},
                                      {"pid": pid[busy_holder], "used": 2048 * MIB}]
    fake_gpus.write(config)
    caplog.set_level(logging.WARNING)
    started = time.monotonic()
    while idle_holder in manager.list_kernel_ids():
        assert time.monotonic() - started < 30, "the idle kernel holding GPU memory was not shut down"
        await asyncio.sleep(0.2)
    assert time.monotonic() - started >= 3.0  # not before it had been idle 4 s (it went idle just before)
    await asyncio.sleep(2.0)  # more looks of the culler: the others stay
    assert busy_holder in manager.list_kernel_ids() and idle_empty in manager.list_kernel_ids()
    assert manager.get_kernel(busy_holder).execution_state == "busy"
    culled = [r.getMessage() for r in caplog.records if "tfgpu: shutting down kernel" in r.getMessage()]
    assert len(culled) == 1 and idle_holder in culled[0], culled
    assert "idle holder.ipynb" in culled[0] and "4,096 MiB on GPU 1" in culled[0]
    for client in clients:
        client.stop_channels()


async def test_the_culler_is_off_by_default(jp_serverapp):
    culler = jp_serverapp.web_app.settings["tfgpu_extension"].culler
    assert culler.after == 0 and not culler.running


def test_gpu_holders_count_mig_devices_once():
    kernel = {"id": "k", "sessions": []}
    document = {"gpus": [
        {"index": 0, "processes": [{"pid": 5, "used_mib": 100, "kernel": kernel}], "mig_devices": []},
        {"index": 1, "processes": [{"pid": 5, "used_mib": 300, "kernel": kernel}],  # the devices' union again
         "mig_devices": [{"processes": [{"pid": 5, "used_mib": 200, "kernel": kernel}]},
                         {"processes": [{"pid": 5, "used_mib": 100, "kernel": kernel}]}]},
        {"index": 2, "processes": [{"pid": 6, "used_mib": 0, "kernel": {"id": "empty"}},
                                   {"pid": 7, "used_mib": None, "kernel": {"id": "unknown"}},
                                   {"pid": 8, "used_mib": 50, "kernel": None}], "mig_devices": []},
    ]}
    holders = gpu_holders(document)
    assert set(holders) == {"k"} and holders["k"]["mib"] == 400 and holders["k"]["gpus"] == [0, 1]
