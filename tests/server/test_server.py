"""The server extension through a real jupyter_server (pytest-jupyter's ``jp_fetch``, in this process, under the
base URL ``/a%40b/``), reading the fake NVML library handed to pynvml in this process (``fakenvml.in_process``).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import tornado.httpclient
from fakenvml import MIB, graphics_gpus, mig_gpu, three_gpus
from serverapi import get_gpus, start_notebook_session

import tfgpu_magic.server
from tfgpu_magic.core import nvml
from tfgpu_magic.server import gpus as gpu_doc
from tfgpu_magic.server import handlers
from tfgpu_magic.server.feed import GpuFeed

pytestmark = pytest.mark.server
SERVER_SOURCES = sorted(Path(tfgpu_magic.server.__file__).parent.glob("*.py"))
VERBS = ("get", "post", "put", "patch", "delete", "head", "options")


# ---- authentication ---------------------------------------------------------------------------------------------


async def test_unauthenticated_request_is_refused(jp_fetch, fake_gpus):
    with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
        await jp_fetch("tfgpu", "api", "gpus", headers={"Authorization": ""})
    assert refused.value.code == 403
    with pytest.raises(tornado.httpclient.HTTPClientError) as wrong:
        await jp_fetch("tfgpu", "api", "gpus", headers={"Authorization": "token not-the-token"})
    assert wrong.value.code == 403


def _routes(router, found):
    for rule in getattr(router, "rules", ()):
        target = rule.target
        if inspect.isclass(target) and target.__module__.startswith("tfgpu_magic"):
            found.append((rule.matcher.regex.pattern, target))
        elif hasattr(target, "rules"):
            _routes(target, found)
    return found


async def test_every_route_of_the_package_refuses_every_verb_without_a_token(jp_serverapp, jp_fetch, jp_base_url):
    """Walks the server's routing table, so a handler added later without HANDLERS, or a verb added without
    ``@tornado.web.authenticated``, fails here."""
    routes = _routes(jp_serverapp.web_app.default_router, [])
    assert {cls for _, cls in routes} == {cls for _, cls in handlers.HANDLERS}, routes
    checked = 0
    for pattern, cls in routes:
        path = pattern.rstrip("$").replace("\\", "")
        assert path.startswith(jp_base_url.replace("%40", "%40")) and "/tfgpu/api/" in path, path
        parts = path[len(jp_base_url):].split("/")
        for verb in VERBS:
            if verb not in cls.__dict__:
                continue
            body = None if verb in ("get", "head", "delete", "options") else "{}"
            with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
                await jp_fetch(*parts, method=verb.upper(), body=body, headers={"Authorization": ""})
            assert refused.value.code == 403, (path, verb)
            checked += 1
    assert checked >= 1


@pytest.mark.parametrize("source", SERVER_SOURCES, ids=lambda p: p.name)
def test_every_verb_in_the_server_sources_is_decorated_authenticated(source):
    """The static twin of the test above (the extension template's check_auth): any handler class in the
    server package, routed or not, has ``@tornado.web.authenticated`` on each HTTP verb it defines."""
    tree = ast.parse(source.read_text())
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in VERBS:
                names = {ast.unparse(d) for d in fn.decorator_list}
                assert "tornado.web.authenticated" in names, f"{source.name}: {cls.name}.{fn.name} is not authenticated"


# ---- the document -----------------------------------------------------------------------------------------------


async def test_nvml_is_not_touched_until_the_first_request_then_initialised_once(jp_fetch, fake_gpus):
    import pynvml

    assert nvml._nv is None  # the server is up, its extension loaded: NVML not initialised
    for _ in range(4):
        await get_gpus(jp_fetch)
    assert nvml._nv is not None
    assert pynvml._nvmlLib_refcount == 1


async def test_document_shape_for_three_gpus(jp_fetch, fake_gpus):
    doc = await get_gpus(jp_fetch)
    assert doc["schema"] == 1
    assert doc["nvml"] == {"available": True, "error": None, "driver_version": "550.54.15",
                           "cuda_driver_version": "12.4"}
    assert [g["name"] for g in doc["gpus"]] == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "Tesla T4"]
    a100, h100, t4 = doc["gpus"]
    assert (a100["index"], a100["memory_total_mib"], a100["memory_used_mib"]) == (0, 40960, 30000)
    assert (a100["utilization_gpu_pct"], a100["temperature_c"]) == (97, 66)
    assert set(a100) == {*gpu_doc._GPU_FIELDS, "processes", "hidden_processes", "kernel_note", "mig_mode",
                         "mig_devices", "unattributed"}
    # pid 1 exists here (not a kernel); 3999901 does not: said per GPU, not guessed
    assert [(p["pid"], p["used_mib"], p["kernel"]) for p in a100["processes"]] == [(1, 1000, None),
                                                                                  (3999901, 29000, None)]
    assert a100["processes"][0]["name"] and a100["processes"][0]["user"]
    assert "1 process is not visible from this server" in a100["kernel_note"]
    # GPU 1's "self" is the server itself (this test process): listed, matched to no kernel
    assert [(p["pid"], p["used_mib"]) for p in h100["processes"]] == [(os.getpid(), 1024), (3999902, None)]
    assert t4["processes"] == [] and t4["kernel_note"] == "" and t4["hidden_processes"] is None
    assert doc["kernels"] == [] and doc["kernel_note"] == "" and doc["other_users"] == "shown"


@pytest.mark.kernel
async def test_a_gpu_process_of_a_kernel_is_mapped_to_its_notebook(jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "work/train.ipynb")
    pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": pid, "used": 2048 * MIB}, {"pid": 1, "used": 100 * MIB}]
    fake_gpus.write(config)

    doc = await get_gpus(jp_fetch)
    kernel_process, other = doc["gpus"][1]["processes"]
    assert kernel_process["pid"] == pid and kernel_process["used_mib"] == 2048
    # the rest once, in "kernels"
    assert kernel_process["kernel"] == {"id": kernel_id, "relation": "kernel", "how": "pid"}
    kernel = doc["kernels"][0]
    assert kernel["name"] == "python3" and kernel["execution_state"] and "idle_s" in kernel
    assert kernel["sessions"] == [{"path": "work/train.ipynb", "name": "train.ipynb", "type": "notebook"}]
    assert other["kernel"] is None
    assert [(k["id"], k["pid"]) for k in doc["kernels"]] == [(kernel_id, pid)]
    assert doc["kernels"][0]["sessions"][0]["path"] == "work/train.ipynb"

    # The notebook is renamed: the next answer has the new path.
    session_id = json.loads((await jp_fetch("api", "sessions")).body)[0]["id"]
    await jp_fetch("api", "sessions", session_id, method="PATCH", body=json.dumps({"path": "work/renamed.ipynb"}))
    doc = await get_gpus(jp_fetch)
    assert doc["gpus"][1]["processes"][0]["kernel"]["id"] == kernel_id
    assert doc["kernels"][0]["sessions"][0]["path"] == "work/renamed.ipynb"

    # The kernel dies under the server: the endpoint keeps answering.
    os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        doc = await get_gpus(jp_fetch)
        if not doc["kernels"] or doc["kernels"][0]["execution_state"] in ("dead", None):
            break
        await asyncio.sleep(0.1)
    assert [g["name"] for g in doc["gpus"]][1] == "NVIDIA H100 80GB HBM3"

    # The notebook is closed (its session and kernel deleted): its process is nobody's.
    await jp_fetch("api", "sessions", session_id, method="DELETE")
    doc = await get_gpus(jp_fetch)
    assert doc["kernels"] == []
    assert doc["gpus"][1]["processes"][0]["kernel"] is None


async def test_graphics_processes_are_in_the_document_typed(jp_fetch, fake_gpus):
    """NVML's graphics list is read too: a graphics-only process is listed, typed "G"; one on both lists is one row,
    "C+G", its memory once; a graphics process in no server's kernel is another process like a compute one."""
    fake_gpus.write(graphics_gpus())
    a100, h100, t4 = (await get_gpus(jp_fetch))["gpus"]
    assert [(p["pid"], p["used_mib"], p["type"], p["kernel"]) for p in a100["processes"]] == [
        (1, 1000, "C", None), (3999901, 29000, "C", None), (3999911, 180, "G", None)]
    assert [(p["pid"], p["used_mib"], p["type"]) for p in h100["processes"]] == [(os.getpid(), 1024, "C+G"),
                                                                               (3999902, None, "C")]
    assert [(p["pid"], p["type"]) for p in t4["processes"]] == [(3999912, "G")]
    assert "1 process is not visible from this server" in t4["kernel_note"]  # graphics counts there too


async def test_graphics_processes_of_a_mig_device_are_in_the_document(jp_fetch, fake_gpus):
    devices = [{"profile": "3g.20gb", "memory_total": 19968 * MIB, "memory_used": 100 * MIB,
                "processes": [{"pid": 3999913, "used": 40 * MIB, "type": "G"}]}]
    fake_gpus.write({"gpus": [mig_gpu(devices=devices)]})
    gpu, = (await get_gpus(jp_fetch))["gpus"]
    assert [(p["pid"], p["used_mib"], p["type"]) for p in gpu["mig_devices"][0]["processes"]] == [(3999913, 40, "G")]


def test_a_kernels_graphics_process_belongs_to_it_and_hidden_ones_are_counted():
    snap = {"gpus": [{"index": 0, "processes": [
        {"pid": 300, "used_mib": 10, "name": "python", "user": "ann", "type": "C+G", "is_self": False},
        {"pid": 301, "used_mib": 5, "name": "egl-worker", "user": "ann", "type": "G", "is_self": False},
        {"pid": 400, "used_mib": 200, "name": "Xorg", "user": "root", "type": "G", "is_self": False},
    ]}]}
    kernels = [{"id": "k", "name": "python3", "pid": 300, "execution_state": "idle", "sessions": []}]
    doc = gpu_doc.gpu_document(snap, kernels, user="ann", parent_of={301: 300, 400: 1}.get)
    rows = {p["pid"]: (p["type"], (p["kernel"] or {}).get("relation")) for p in doc["gpus"][0]["processes"]}
    assert rows == {300: ("C+G", "kernel"), 301: ("G", "child"), 400: ("G", None)}
    hidden = gpu_doc.gpu_document(snap, kernels, user="ann", show_other_users=False, parent_of={301: 300}.get)
    # No byte figure in this hand-made reading: the byte sum is missing, never a partial sum.
    assert hidden["gpus"][0]["hidden_processes"] == {"count": 1, "used_mib": 200, "used_bytes": None}
    # A process dict without a type (an older adapter's) is a compute process.
    bare = {"gpus": [{"index": 0, "processes": [{"pid": 5, "used_mib": 1, "name": "p", "user": "ann"}]}]}
    assert gpu_doc.gpu_document(bare, [], user="ann", parent_of=lambda pid: None)["gpus"][0]["processes"][0][
        "type"] == "C"


async def test_index_filter_and_malformed_queries(jp_fetch, fake_gpus):
    doc = await get_gpus(jp_fetch, index="2,0")
    assert [g["index"] for g in doc["gpus"]] == [0, 2]
    assert (await get_gpus(jp_fetch, index="7"))["gpus"] == []
    for bad in ("x", "-1", "1,,2", "", "1.5", "０", "9" * 5000, "0," + "1" * 11):
        with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
            await jp_fetch("tfgpu", "api", "gpus", params={"index": bad})
        assert refused.value.code == 400, bad
        body = json.loads(refused.value.response.body)
        assert body["reason"] == "bad_query"
        assert body["message"].startswith("tfgpu: bad index") and "?index=0,2" in body["message"], body
        assert "Exceeds the limit" not in body["message"] and len(body["message"]) < 300, body
    with pytest.raises(tornado.httpclient.HTTPClientError) as twice:
        await jp_fetch("tfgpu", "api", "gpus", params=[("index", "1"), ("index", "2")])
    assert twice.value.code == 400
    assert json.loads(twice.value.response.body)["message"] == (
        "tfgpu: index given more than once; give it once, e.g. ?index=0,2")


# ---- faults: always 200 with the reasons ---------------------------------------------------------------------


async def test_nvml_library_missing(jp_fetch):
    import pynvml

    nvml.shutdown()
    assert pynvml.nvmlLib is None
    doc = await get_gpus(jp_fetch)
    assert doc["nvml"]["available"] is False
    assert doc["nvml"]["error"]["unavailable"] == "error"
    assert "libnvidia-ml.so.1" in doc["nvml"]["error"]["detail"]
    assert doc["gpus"] == []


def _lost_and_unsupported() -> dict:
    config = three_gpus()
    config["gpus"][0]["lost"] = True
    del config["gpus"][2]["power_mw"]
    config["errors"] = {
        "nvmlDeviceGetTemperature": {"gpu": 2, "code": "NOT_SUPPORTED"},
        "nvmlDeviceGetComputeRunningProcesses_v3": {"gpu": 1, "code": "NO_PERMISSION"},
    }
    return config


async def test_a_lost_gpu_an_unsupported_field_and_a_forbidden_process_list(jp_fetch, fake_gpus):
    fake_gpus.write(_lost_and_unsupported())
    doc = await get_gpus(jp_fetch)
    lost, forbidden, t4 = doc["gpus"]
    assert lost["error"]["unavailable"] == "gpu_lost"
    assert lost["memory_used_mib"]["unavailable"] == "gpu_lost"
    assert lost["processes"]["unavailable"] == "gpu_lost"
    assert "NVML gives no process list for this GPU" in lost["kernel_note"]
    assert forbidden["name"] == "NVIDIA H100 80GB HBM3" and forbidden["memory_used_mib"] == 2048
    assert forbidden["processes"]["unavailable"] == "no_permission"
    assert "its memory cannot be matched to notebooks" in forbidden["kernel_note"]
    assert t4["power_w"]["unavailable"] == "not_supported"
    assert t4["temperature_c"]["unavailable"] == "not_supported"
    assert t4["memory_total_mib"] == 15360


async def test_driver_not_loaded(jp_fetch, fake_gpus):
    fake_gpus.write({"errors": {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"}, "gpus": []})
    doc = await get_gpus(jp_fetch)
    assert doc["nvml"]["available"] is False
    assert doc["nvml"]["error"]["detail"], doc["nvml"]
    assert doc["gpus"] == []


async def test_a_failure_inside_the_extension_is_a_reason_not_a_500(jp_fetch, jp_serverapp, fake_gpus):
    def broken():
        raise RuntimeError("the NVML binding changed")

    feed = jp_serverapp.web_app.settings["tfgpu_feed"]
    feed.worker.read = broken
    doc = await get_gpus(jp_fetch)
    assert doc["nvml"]["available"] is False
    assert doc["nvml"]["error"] == {
        "unavailable": "error", "detail": "the tfgpu server extension failed: RuntimeError: the NVML binding changed"}


# ---- the feed: off the event loop, shared -------------------------------------------------------------------


async def test_concurrent_requests_share_one_answer_whose_reading_is_made_off_the_event_loop():
    threads, listed = [], []

    def slow_read():
        threads.append(threading.current_thread().name)
        time.sleep(0.3)  # a GPU slow to answer: the loop must stay free meanwhile
        return {"taken_at": 1.0, "available": True, "gpus": []}

    async def kernels():
        listed.append(1)
        return []

    feed = GpuFeed(0.0, kernels, lambda reading, kernel_list: dict(reading), read=slow_read)
    ticks = 0

    async def ticker():
        nonlocal ticks
        for _ in range(20):
            await asyncio.sleep(0.01)
            ticks += 1

    *answers, _ = await asyncio.gather(*(feed.answer() for _ in range(20)), ticker())
    assert all(a is answers[0] for a in answers)
    assert json.loads(answers[0].body) == answers[0].document and answers[0].document["taken_at"] == 1.0
    assert feed.readings == 1 and len(threads) == 1 and len(listed) == 1
    assert threads[0].startswith("tfgpu-nvml") and threads[0] != threading.main_thread().name
    assert ticks == 20  # the loop ran while NVML was being read

    feed.max_age = 60.0
    assert await feed.answer() is answers[0] and await feed.answer() is answers[0]  # still young: served as made
    feed.max_age = 0.0
    assert await feed.answer() is not answers[0] and feed.readings == 2
    feed.close()


# ---- other users' processes -----------------------------------------------------------------------------------


HIDING = {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
          "TfgpuServer": {"snapshot_max_age": 0.0, "show_other_users": False, "history_interval": 0.0}}


@pytest.mark.parametrize("jp_server_config", [HIDING])
async def test_an_administrator_can_hide_other_users_processes(jp_fetch, fake_gpus):
    doc = await get_gpus(jp_fetch)
    assert doc["other_users"] == "hidden"
    a100, h100, _ = doc["gpus"]
    me = os.environ.get("USER") or __import__("getpass").getuser()
    # pid 1 and this process belong to the server's user here; the invisible pids are nobody's we know
    assert all(p["user"] == me for gpu in (a100, h100) for p in gpu["processes"]), (a100, h100)
    assert a100["hidden_processes"] == {"count": 1, "used_mib": 29000, "used_bytes": 29000 * MIB}
    assert h100["hidden_processes"] == {"count": 1, "used_mib": None, "used_bytes": None}


def test_hiding_other_users_counts_them_and_keeps_the_servers_own():
    snap = {"gpus": [{"index": 0, "processes": [
        {"pid": 10, "used_mib": 100, "name": "python", "user": "ann"},
        {"pid": 11, "used_mib": 200, "name": "python", "user": "bob"},
        {"pid": 12, "used_mib": None, "name": None, "user": None},
        {"pid": 13, "used_mib": 300, "name": "python", "user": "bob"},
    ]}]}
    kernels = [{"id": "k1", "name": "python3", "pid": 13, "sessions": []}]
    doc = gpu_doc.gpu_document(snap, kernels, user="ann", show_other_users=False, parent_of=lambda pid: None)
    gpu = doc["gpus"][0]
    assert [p["pid"] for p in gpu["processes"]] == [10, 13]  # own process, and this server's kernel
    # One of the two has unknown memory (and none has a byte figure in this hand-made reading).
    assert gpu["hidden_processes"] == {"count": 2, "used_mib": None, "used_bytes": None}
    assert doc["other_users"] == "hidden"
    shown = gpu_doc.gpu_document(snap, kernels, user="ann", show_other_users=True, parent_of=lambda pid: None)
    assert [p["pid"] for p in shown["gpus"][0]["processes"]] == [10, 11, 12, 13]
    assert shown["gpus"][0]["hidden_processes"] is None


# ---- matching, as pure data -------------------------------------------------------------------------------------


def test_a_kernels_child_process_is_matched_through_its_parents():
    parents = {500: 400, 400: 300, 300: 1, 600: 601, 601: 600}  # 600 <-> 601: a corrupt loop
    snap = {"gpus": [{"index": 0, "processes": [
        {"pid": 500, "used_mib": 10, "name": "worker", "user": "ann"},
        {"pid": 600, "used_mib": 20, "name": "loop", "user": "ann"},
    ]}]}
    kernels = [{"id": "k", "name": "python3", "pid": 300, "execution_state": "busy",
                "sessions": [{"path": "a.ipynb", "name": "a.ipynb", "type": "notebook"}]},
               {"id": "k2", "name": "python3", "pid": None, "execution_state": "starting", "sessions": []}]
    doc = gpu_doc.gpu_document(snap, kernels, user="ann", parent_of=parents.get)
    child, looped = doc["gpus"][0]["processes"]
    assert child["kernel"]["id"] == "k" and child["kernel"]["relation"] == "child"
    assert looped["kernel"] is None
    assert doc["kernel_note"].startswith("1 kernel has no known PID")


def test_parent_pid_reads_proc_and_says_none_for_a_missing_process():
    assert gpu_doc.parent_pid(os.getpid()) == os.getppid()
    assert gpu_doc.parent_pid(3999999) is None


@pytest.mark.parametrize("raw, expected", [("0", (0,)), ("2,0,2", (2, 0)), (" 1 , 3 ", (1, 3))])
def test_parse_indices(raw, expected):
    assert gpu_doc.parse_indices(raw) == expected


# ---- a hung driver delays nothing but its own figures -----------------------------------------------------------


async def test_a_hung_driver_is_answered_at_once_with_the_last_figures_marked_old(jp_fetch, jp_serverapp, fake_gpus):
    """The driver stops answering while memory goes from 30,000 to 39,000 MiB: each request is answered within the
    bound with the last figures, their age and the reason; no second reading starts beside the stuck one; once
    the driver answers again the next request has the new figures at once."""
    feed = jp_serverapp.web_app.settings["tfgpu_feed"]
    feed.stale_after = 0.5
    first = await get_gpus(jp_fetch)
    assert first["stale"] is None and first["gpus"][0]["memory_used_mib"] == 30000
    hung = three_gpus()
    hung["gpus"][0]["memory_used"] = 39000 * MIB
    fake_gpus.write({**hung, "delays": {"nvmlDeviceGetCount_v2": 3000}})
    readings = feed.readings
    for _ in range(3):
        started = time.monotonic()
        doc = await get_gpus(jp_fetch)
        assert time.monotonic() - started < 1.5
        assert doc["gpus"][0]["memory_used_mib"] == 30000, doc["gpus"][0]  # the last figures, not made up
        assert doc["stale"]["reason"].startswith("the driver has not answered for "), doc["stale"]
        assert doc["stale"]["age_s"] >= 0
    assert feed.readings == readings + 1  # one stuck reading, waited on, never duplicated
    fake_gpus.write(hung)  # the driver answers again
    deadline = time.monotonic() + 10
    while (doc := await get_gpus(jp_fetch))["stale"] is not None:
        assert time.monotonic() < deadline, doc["stale"]
        await asyncio.sleep(0.2)
    assert doc["gpus"][0]["memory_used_mib"] == 39000


async def test_a_first_reading_that_hangs_says_why_there_are_no_figures(jp_fetch, jp_serverapp, fake_gpus):
    feed = jp_serverapp.web_app.settings["tfgpu_feed"]
    feed.stale_after = 0.3
    fake_gpus.write({**three_gpus(), "delays": {"nvmlDeviceGetCount_v2": 1500}})
    doc = await get_gpus(jp_fetch)
    assert doc["gpus"] == [] and doc["nvml"]["available"] is False
    assert doc["nvml"]["error"]["detail"].startswith("no GPU figures yet: the driver has not answered for ")
    assert doc["stale"]["age_s"] is None


def test_parents_are_read_once_per_reading_however_many_processes_share_them():
    """8 GPUs x 64 processes under 16 shared parents, half of them a kernel's: every parent chain is read once."""
    parents = {**{2000 + i: 1500 + i % 16 for i in range(512)},
               **{1500 + j: (700 if j % 2 == 0 else 600) for j in range(16)}, 700: 1, 600: 1}
    asked: list[int] = []

    def parent_of(pid):
        asked.append(pid)
        return parents.get(pid)

    snap = {"gpus": [{"index": g, "processes": [{"pid": 2000 + g * 64 + k, "used_mib": 1, "name": "w", "user": "ann"}
                                                for k in range(64)]} for g in range(8)]}
    kernels = [{"id": "k", "name": "python3", "pid": 700, "execution_state": "idle", "sessions": []}]
    doc = gpu_doc.gpu_document(snap, kernels, user="ann", parent_of=parent_of)
    assert len(asked) == len(set(asked))  # no PID read twice
    relation = {p["pid"]: (p["kernel"] or {}).get("relation") for g in doc["gpus"] for p in g["processes"]}
    assert all(relation[2000 + i] == ("child" if (i % 16) % 2 == 0 else None) for i in range(512))


def test_processes_of_the_same_os_user_are_not_this_servers_under_own_processes_server():
    snap = {"gpus": [{"index": 0, "processes": [
        {"pid": 300, "used_mib": 10, "name": "python", "user": "jovyan"},  # this server's kernel
        {"pid": 400, "used_mib": 20, "name": "python", "user": "jovyan"},  # another Hub user's kernel, same OS user
        {"pid": 500, "used_mib": 30, "name": "python", "user": "ann"},
    ]}]}
    kernels = [{"id": "k", "name": "python3", "pid": 300, "execution_state": "idle", "sessions": []}]

    def mine(doc):
        return {p["pid"]: p["mine"] for p in doc["gpus"][0]["processes"]}

    by_user = gpu_doc.gpu_document(snap, kernels, user="jovyan", parent_of=lambda pid: None)
    assert mine(by_user) == {300: True, 400: True, 500: False} and by_user["own_processes"] == "user"
    by_server = gpu_doc.gpu_document(snap, kernels, user="jovyan", own_processes="server", parent_of=lambda pid: None)
    assert mine(by_server) == {300: True, 400: False, 500: False}
    hidden = gpu_doc.gpu_document(snap, kernels, user="jovyan", own_processes="server", show_other_users=False,
                                  parent_of=lambda pid: None)
    assert [p["pid"] for p in hidden["gpus"][0]["processes"]] == [300]
    assert hidden["gpus"][0]["hidden_processes"] == {"count": 2, "used_mib": 50, "used_bytes": None}


@pytest.mark.parametrize("hub_user, option, expected", [
    (None, "auto", "user"), ("alice", "auto", "server"), ("alice", "user", "user"), (None, "server", "server")])
def test_own_processes_auto_means_server_under_jupyterhub(monkeypatch, hub_user, option, expected):
    from tfgpu_magic.server.options import TfgpuServer

    if hub_user is None:
        monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    else:
        monkeypatch.setenv("JUPYTERHUB_USER", hub_user)
    assert TfgpuServer(own_processes=option).own() == expected


def test_idle_seconds_count_only_while_idle():
    now = 1000.0
    kernels = [{"id": "a", "pid": None, "execution_state": "idle", "last_activity": 880.0, "sessions": []},
               {"id": "b", "pid": None, "execution_state": "busy", "last_activity": 100.0, "sessions": []},
               {"id": "c", "pid": None, "execution_state": "idle", "last_activity": None, "sessions": []}]
    doc = gpu_doc.gpu_document({"gpus": []}, kernels, user=None, now=now)
    assert [k["idle_s"] for k in doc["kernels"]] == [120.0, None, None]


def test_mig_devices_processes_are_matched_to_kernels():
    process = {"pid": 300, "used_mib": 10, "name": "p", "user": "u"}
    snap = {"gpus": [{"index": 0, "mig_mode": True, "processes": [process],
                      "mig_devices": [{"uuid": "MIG-a", "index": 0, "profile": "3g.20gb", "memory_total_mib": 19968,
                                       "memory_used_mib": 10,
                                       "processes": [process]},
                                      {"uuid": "MIG-b", "index": 1, "profile": "2g.10gb", "processes": []}]}]}
    kernels = [{"id": "k", "pid": 300, "execution_state": "idle", "sessions": [{"path": "a.ipynb"}]}]
    doc = gpu_doc.gpu_document(snap, kernels, user="u", parent_of=lambda pid: None)
    gpu = doc["gpus"][0]
    assert gpu["mig_mode"] is True and [m["uuid"] for m in gpu["mig_devices"]] == ["MIG-a", "MIG-b"]
    assert gpu["mig_devices"][0]["processes"][0]["kernel"]["id"] == "k"
    assert gpu["mig_devices"][0]["profile"] == "3g.20gb" and gpu["mig_devices"][1]["processes"] == []
