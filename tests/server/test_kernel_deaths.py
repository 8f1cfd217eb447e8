"""A dead kernel is explained (issue 36), through a real jupyter_server in this process with real kernels and the fake
NVML: a kernel holding GPU memory killed with SIGKILL (what the system's out-of-memory killer sends) is in the
answer's ``dead_kernels`` with its notebook, the bytes it held, the signal and the likely cause, once, while
jupyter_server restarts it; a kernel that held no GPU memory dying, and a kernel shut down as a user does (DELETE
/api/kernels/ID), are not recorded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import pytest
from fakenvml import MIB, three_gpus
from serverapi import get_gpus, start_notebook_session

pytestmark = [pytest.mark.server, pytest.mark.kernel]

HELD = 4096 * MIB + 123  # exact bytes, not a whole number of MiB: kept exact until display
# The restarter polls every KernelRestarter.time_to_dead (3 s): a death is seen within that, the restart follows.
NOTICED_S = 30


def holding(pid: int | None) -> dict:
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": pid, "used": HELD, "sm": 0}] if pid else []
    return config


def pid_of(jp_serverapp, kernel_id: str) -> int:
    return jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid


async def restarted(jp_serverapp, kernel_id: str, old_pid: int) -> int:
    """The new pid of the kernel jupyter_server's restarter restarted after ``old_pid`` died."""
    deadline = time.monotonic() + NOTICED_S
    while True:
        with contextlib.suppress(KeyError, AttributeError):
            pid = pid_of(jp_serverapp, kernel_id)
            if isinstance(pid, int) and pid != old_pid:
                return pid
        assert time.monotonic() < deadline, "the killed kernel was never restarted"
        await asyncio.sleep(0.2)


def holder(doc: dict, kernel_id: str) -> int:
    return sum(p["used_bytes"] for g in doc["gpus"] for p in g["processes"] or ()
               if (p.get("kernel") or {}).get("id") == kernel_id)


async def test_a_kernel_killed_holding_gpu_memory_is_named_with_what_it_held_and_the_cause(
        jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "work/train big.ipynb")
    pid = pid_of(jp_serverapp, kernel_id)
    fake_gpus.write(holding(pid))
    doc = await get_gpus(jp_fetch)
    assert holder(doc, kernel_id) == HELD and doc["dead_kernels"] == []
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    # The sidebar keeps asking; the fake NVML still lists the dead pid (a real driver frees its memory): it is the
    # restarted kernel's new pid that no longer matches.
    deadline = time.monotonic() + NOTICED_S
    while not doc["dead_kernels"]:
        assert time.monotonic() < deadline, "the kernel's death was never recorded"
        await asyncio.sleep(0.3)
        doc = await get_gpus(jp_fetch)
    new_pid = await restarted(jp_serverapp, kernel_id, pid)
    [death] = doc["dead_kernels"]
    assert death["kernel_id"] == kernel_id and death["notebook"] == "work/train big.ipynb"
    assert death["pid"] == pid
    assert death["last_held_bytes"] == HELD and death["last_held_mib"] == 4096 and death["gpus"] == [1]
    assert death["signal"] == 9 and death["signal_name"] == "SIGKILL" and death["exit_code"] is None
    assert death["cause"] == ("killed by SIGKILL: most often the system's out-of-memory killer (host memory), or "
                              "someone ended it")
    assert death["restarted"] is True
    assert killed_at <= death["died_at"] <= time.time()
    assert death["held_at"] <= death["died_at"]
    # The restarted kernel (same id, new process) holds nothing: it is not recorded again, however long one asks.
    assert kernel_id in jp_serverapp.kernel_manager.list_kernel_ids() and new_pid != pid
    for _ in range(8):
        await asyncio.sleep(0.5)
        doc = await get_gpus(jp_fetch)
    assert [d["kernel_id"] for d in doc["dead_kernels"]] == [kernel_id]


async def test_a_kernel_holding_no_gpu_memory_dying_is_not_recorded(jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "plain.ipynb")
    pid = pid_of(jp_serverapp, kernel_id)
    fake_gpus.write(holding(None))
    assert (await get_gpus(jp_fetch))["dead_kernels"] == []
    os.kill(pid, signal.SIGKILL)
    await restarted(jp_serverapp, kernel_id, pid)  # the death was seen (the restart follows it)
    assert (await get_gpus(jp_fetch))["dead_kernels"] == []


async def test_a_kernel_shut_down_by_its_user_is_not_recorded(jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "done.ipynb")
    pid = pid_of(jp_serverapp, kernel_id)
    fake_gpus.write(holding(pid))
    assert holder(await get_gpus(jp_fetch), kernel_id) == HELD
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert kernel_id not in jp_serverapp.kernel_manager.list_kernel_ids()
    for _ in range(10):  # past a restarter's poll or two
        await asyncio.sleep(0.5)
        doc = await get_gpus(jp_fetch)
    assert doc["dead_kernels"] == []


def zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def test_an_answer_made_after_the_death_showing_no_memory_does_not_hide_what_it_held(
        jp_fetch, jp_serverapp, fake_gpus):
    """A real driver frees a dead process's memory at once: an answer made between the death and the restarter's
    next look shows the kernel holding nothing. What it held before is what is recorded."""
    kernel_id = await start_notebook_session(jp_fetch, "race.ipynb")
    manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    pid = manager.provisioner.pid
    fake_gpus.write(holding(pid))
    assert holder(await get_gpus(jp_fetch), kernel_id) == HELD
    manager.stop_restarter()  # its next look comes after the answer below, whatever the phase of its clock
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not zombie_or_gone(pid):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    fake_gpus.write(holding(None))  # the driver freed it
    doc = await get_gpus(jp_fetch)
    assert holder(doc, kernel_id) == 0 and doc["dead_kernels"] == []
    manager.start_restarter()
    deadline = time.monotonic() + NOTICED_S
    while not doc["dead_kernels"]:
        assert time.monotonic() < deadline, "the kernel's death was never recorded"
        await asyncio.sleep(0.3)
        doc = await get_gpus(jp_fetch)
    [death] = doc["dead_kernels"]
    assert (death["kernel_id"], death["notebook"], death["last_held_bytes"], death["signal"]) == (
        kernel_id, "race.ipynb", HELD, 9)


NO_RESTART = {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
              "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0},
              "KernelRestarter": {"restart_limit": 0}}


@pytest.mark.parametrize("jp_server_config", [NO_RESTART])
async def test_a_kernel_the_restarter_gives_up_on_is_recorded_as_not_restarted(jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "gone.ipynb")
    pid = pid_of(jp_serverapp, kernel_id)
    fake_gpus.write(holding(pid))
    assert holder(await get_gpus(jp_fetch), kernel_id) == HELD
    os.kill(pid, signal.SIGSEGV)
    deadline = time.monotonic() + NOTICED_S
    doc = await get_gpus(jp_fetch)
    while not doc["dead_kernels"]:
        assert time.monotonic() < deadline, "the kernel's death was never recorded"
        await asyncio.sleep(0.3)
        doc = await get_gpus(jp_fetch)
    [death] = doc["dead_kernels"]
    assert death["kernel_id"] == kernel_id and death["restarted"] is False
    assert death["signal"] == 11 and death["cause"].startswith("crashed (SIGSEGV): ")
    assert kernel_id not in jp_serverapp.kernel_manager.list_kernel_ids()  # jupyter_server removed it
