"""A real server and real kernels in a PID namespace of their own (a container), NVML reporting host PIDs.

Each server runs under ``unshare --pid --fork --mount-proc`` (support/container.py; CI runs as root). The fake
NVML lists host PIDs, as the driver does: this test, on the host, finds a kernel's host PID in the host /proc and
writes it into the fake's process list. A kernel's host PID appears there while TensorFlow creates its runtime
context: the cell wraps ``TFE_NewContext`` (what a GPU build's context creation runs through) so that it swaps
in a config listing its own host PID, as a real GPU context would make the driver list it.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from container import ContainerServer, execute, unshare_available
from fakenvml import MIB, fake_env, write_config

GPU_UUID = "GPU-5e8b0c2d-aaaa-bbbb-cccc-000000000001"

# The cell a notebook runs: tfgpu loaded, then TensorFlow started, with its host PID appearing on the GPU while
# TensorFlow creates its runtime context. ``{swap}`` is the code that makes it appear.
HANDSHAKE_CELL = """
%load_ext tfgpu_magic
import os, shutil, time
import tensorflow.python.eager.context as _context
_new_context = _context.pywrap_tfe.TFE_NewContext
def _appear(*args):
{swap}
    return _new_context(*args)
_context.pywrap_tfe.TFE_NewContext = _appear
import tensorflow as tf
print("ran", int(tf.constant(1).numpy()))
"""

SWAP_NOW = "    os.replace({prepared!r}, {config!r})"

# Both kernels inside the window at once: each waits for the other before the PIDs appear, and again before
# leaving, so both windows see both new PIDs (two kernels starting at the same moment).
SWAP_TOGETHER = """    deadline = time.monotonic() + 120
    open(os.path.join({flags!r}, "in-{me}"), "w").close()
    while len([f for f in os.listdir({flags!r}) if f.startswith("in-")]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.copy({prepared!r}, {config!r} + ".{me}")
    os.replace({config!r} + ".{me}", {config!r})
    open(os.path.join({flags!r}, "out-{me}"), "w").close()
    while len([f for f in os.listdir({flags!r}) if f.startswith("out-")]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)"""


def gpu_config(processes: list[dict]) -> dict:
    used = sum(p["used"] for p in processes)
    return {"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": GPU_UUID, "memory_total": 81920 * MIB,
                      "memory_used": used, "processes": processes}]}


@pytest.fixture(scope="module")
def namespaces():
    why = unshare_available()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, so the container tests must run: {why}", pytrace=False)
        pytest.skip(why)


@pytest.fixture
def fake(fake_nvml_lib, tmp_path):
    config = tmp_path / "fake_nvml.cfg"
    write_config(config, gpu_config([]))
    return config, fake_env(fake_nvml_lib.parent, config, base={})


def wait_for(what, check, timeout: float = 60, every: float = 0.3):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def rows(document: dict) -> dict[int, dict]:
    return {p["pid"]: p for p in document["gpus"][0]["processes"]}


def report_of(document: dict, kernel: str) -> dict | None:
    return next(k["report"] for k in document["kernels"] if k["id"] == kernel)


def cull_args(after: float) -> list[str]:
    # max age 0: each request reads NVML as the test just wrote it
    return [f"--TfgpuServer.cull_idle_gpu_kernels_after={after}", "--TfgpuServer.cull_interval=0.5",
            "--TfgpuServer.snapshot_max_age=0"]


def test_without_a_host_view_nothing_is_charged_to_a_wrong_kernel_and_bad_reports_attribute_nothing(
        namespaces, fake, tmp_path):
    config, env = fake
    with ContainerServer(env, args=cull_args(1)) as server:
        innocent = server.start_kernel("innocent.ipynb")
        local = server.local_pid(innocent)
        # Another user's 8 GiB job on the host whose PID happens to be the innocent kernel's number here, and one
        # more host process: NVML lists both by their host numbers.
        write_config(config, gpu_config([{"pid": local, "used": 8192 * MIB}, {"pid": 3999000, "used": 4096 * MIB}]))
        document = server.gpus()
        assert document["pids"]["comparable"] is False and document["pids"]["view"] == "none"
        gpu = document["gpus"][0]
        assert gpu["processes"] == []  # no row of a wrong name, user or kernel
        assert gpu["unattributed"] == {
            "count": 2, "used_mib": 12288, "used_bytes": 12288 * MIB,
            "text": "12,288 MiB held by 2 processes this server cannot attribute: its PID namespace differs from the "
                    "driver's"}
        assert report_of(document, innocent) is None

        # Planted reports: each is ignored with one log line and attributes nothing.
        reports = server.runtime / "tfgpu-kernels"
        reports.mkdir(mode=0o700)
        planted = reports / f"{innocent}.json"

        def plant(path: Path, report: dict | str) -> None:
            path.write_text(report if isinstance(report, str) else json.dumps(report))

        claim = {"schema": 1, "kernel_id": innocent, "pid": 1, "notebook": "innocent.ipynb", "host_pid": local,
                 "how": "handshake", "note": "", "gpus": [], "tf_memory": {}, "written_at": 0.0}
        plant(planted, claim)  # the server's PID 1 is alive, and no kernel of it: another's kernel claimed
        plant(reports / "0badc0de.json", "{not json")
        plant(reports / "deadbeef.json", {**claim, "kernel_id": "deadbeef", "pid": 3999999})  # a dead kernel's
        for _ in range(3):
            time.sleep(1.1)  # the reports are read at most once a second
            gpu = server.gpus()["gpus"][0]
            assert gpu["processes"] == [] and gpu["unattributed"]["count"] == 2
        assert not (reports / "deadbeef.json").exists()  # a dead kernel's report is removed
        plant(planted, {**claim, "pid": local})  # the kernel's own number, but written by another user
        os.chown(planted, 65534, 65534)
        time.sleep(1.1)
        assert server.gpus()["gpus"][0]["processes"] == []
        os.chown(planted, 0, 0)
        os.chmod(reports, 0o777)  # a folder others may write: nothing in it is believed
        time.sleep(1.1)
        assert server.gpus()["gpus"][0]["processes"] == []
        log = server.log_tail(200_000)
        for why in ("it names pid 1, but that kernel's pid is", "0badc0de.json is ignored: not JSON",
                    "its pid 3999999 is not alive", "belongs to nobody (uid 65534), not to you",
                    "the folder can be written by other users (mode 777)"):
            assert log.count(why) == 1, (why, log[-3000:])

        time.sleep(3)  # six looks of a culler that shuts down kernels idle for 1 s holding GPU memory
        assert innocent in server.kernel_ids()


def test_after_each_kernels_handshake_its_memory_is_its_own_claims_clear_and_the_culler_works(
        namespaces, fake, tmp_path):
    config, env = fake
    with ContainerServer(env, args=cull_args(8)) as server:
        first, second = server.start_kernel("first.ipynb"), server.start_kernel("second.ipynb")
        host = {k: server.host_pid(server.local_pid(k)) for k in (first, second)}
        # The first kernel claims the GPU (visible auto) before its TensorFlow allocates there.
        execute_in = server.execute
        execute_in(first, "%load_ext tfgpu_magic\n%tfgpu visible auto")
        live_claims = ("from tfgpu_magic.core import nvml, waiting\n"
                       "print(sorted(waiting.live_claims(waiting.Claims(), nvml.snapshot())))")
        assert GPU_UUID in execute_in(second, live_claims)  # claimed, not allocated yet: the second keeps off

        listed: list[dict] = []
        for kernel, notebook in ((first, "first.ipynb"), (second, "second.ipynb")):
            listed.append({"pid": host[kernel], "used": 2048 * MIB})
            prepared = tmp_path / f"{kernel}.cfg"
            write_config(prepared, gpu_config(list(listed)))
            cell = HANDSHAKE_CELL.format(swap=SWAP_NOW.format(prepared=str(prepared), config=str(config)))
            assert "ran 1" in execute_in(kernel, cell)
            row = wait_for(f"{notebook}'s row", lambda kernel=kernel: (rows(server.gpus()).get(host[kernel]) or {})
                           .get("kernel"))
            assert row == {"id": kernel, "relation": "kernel", "how": "handshake"}
            document = server.gpus()
            assert report_of(document, kernel) == {"host_pid": host[kernel], "how": "handshake", "note": ""}
            assert document["gpus"][0]["unattributed"] is None
            if kernel == first:  # its allocation is seen through its report: the claim no longer counts
                assert execute_in(second, live_claims).strip() == "[]"

        # A process nobody here can place (it may be a child of either kernel: no host view) computes on their GPU:
        # both count as busy, never culled on a guess, and the answer says why.
        unplaced = {"pid": 3999001, "used": 1024 * MIB}
        write_config(config, gpu_config([*listed, {**unplaced, "sm": 80}]))
        def all_busy() -> dict | None:
            document = server.gpus()
            return document if all(k["activity"]["state"] == "gpu_busy" for k in document["kernels"]) else None

        document = wait_for("counted busy", all_busy)
        assert {k["activity"]["text"] for k in document["kernels"]} == {
            "counted busy: GPU 0 computes for a process that cannot be placed here (it may be this kernel's child)"}
        assert not any(k["activity"]["measured"] for k in document["kernels"])  # nothing published as activity
        time.sleep(8 + 8 + 2)  # the timeout and the warning time, and more
        assert {first, second} <= server.kernel_ids() and server.gpus()["culler"]["warnings"] == []

        # It stops computing: both idle, both holding memory that is certainly theirs: the culler shuts both down
        # (after its warning), as on the host.
        write_config(config, gpu_config([*listed, {**unplaced, "sm": 0}]))
        wait_for("both kernels culled", lambda: not ({first, second} & server.kernel_ids()), timeout=60)
        assert "tfgpu: shutting down kernel" in server.log_tail(200_000)


def test_two_kernels_starting_at_once_are_ambiguous_not_swapped(namespaces, fake, tmp_path):
    config, env = fake
    with ContainerServer(env, args=cull_args(1)) as server:
        kernels = [server.start_kernel("a.ipynb"), server.start_kernel("b.ipynb")]
        host = [server.host_pid(server.local_pid(k)) for k in kernels]
        prepared = tmp_path / "both.cfg"
        write_config(prepared, gpu_config([{"pid": h, "used": 3072 * MIB} for h in host]))
        flags = tmp_path / "flags"
        flags.mkdir()
        outputs: dict[int, str] = {}
        clients = [server.client(k) for k in kernels]  # made here: only the cells run in the threads

        def run(k: int) -> None:
            swap = SWAP_TOGETHER.format(flags=str(flags), prepared=str(prepared), config=str(config), me=k)
            try:
                outputs[k] = execute(clients[k], HANDSHAKE_CELL.format(swap=swap))
            except Exception as err:  # said in the assertion below
                outputs[k] = f"{type(err).__name__}: {err}"

        threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        for client in clients:
            client.stop_channels()
        assert all("ran 1" in outputs.get(k, "") for k in (0, 1)), outputs

        def both_reported() -> dict | None:
            document = server.gpus()
            return document if all(report_of(document, k) for k in kernels) else None

        document = wait_for("both reports", both_reported)
        for k in kernels:
            report = report_of(document, k)
            assert report["host_pid"] is None and report["how"] is None
            assert report["note"].startswith("ambiguous: 2 processes appeared on its GPUs"), report
        gpu = document["gpus"][0]
        assert gpu["processes"] == [] and gpu["unattributed"]["count"] == 2 and gpu["unattributed"]["used_mib"] == 6144
        time.sleep(3)  # an ambiguous match is no match: the culler (1 s idle) leaves both alone
        assert set(kernels) <= server.kernel_ids()


def test_with_a_host_proc_a_kernels_child_is_attributed_without_tfgpu(namespaces, fake, tmp_path):
    config, env = fake
    host_job = subprocess.Popen(["sleep", "300"])  # a process of the host, in no namespace of the server's
    try:
        with ContainerServer(env, host_proc=True, args=["--TfgpuServer.snapshot_max_age=0"]) as server:
            kernel = server.start_kernel("plain.ipynb")  # never loads tfgpu
            client = server.client(kernel)
            try:
                child = int(execute(client, "import subprocess\nchild = subprocess.Popen(['sleep', '300'])\n"
                                            "print(child.pid)").strip())
                child_host = server.host_pid(child)
                write_config(config, gpu_config([{"pid": child_host, "used": 3072 * MIB},
                                                 {"pid": host_job.pid, "used": 1024 * MIB},
                                                 {"pid": 3999000, "used": 512 * MIB}]))
                document = server.gpus()
                assert document["pids"]["view"] == "host_proc"
                by_pid = rows(document)
                assert by_pid[child_host]["kernel"] == {"id": kernel, "relation": "child", "how": "host_view"}
                assert (by_pid[host_job.pid]["name"], by_pid[host_job.pid]["user"]) == ("sleep", "root")
                assert by_pid[host_job.pid]["kernel"] is None  # a host process: named, and nobody's kernel
                unattributed = document["gpus"][0]["unattributed"]
                assert (unattributed["count"], unattributed["used_mib"]) == (1, 512)  # ended: nothing shows it
                execute(client, "child.kill()")
            finally:
                client.stop_channels()
    finally:
        host_job.kill()
        host_job.wait()
