"""PID namespaces (issue 33), the pure parts: the PID view, the handshake's judgement, the kernels' reports, the
server's join through them, and claims recognised through reports. The real thing (a server and kernels under
``unshare --pid``) is tests/server/test_containers.py."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tfgpu_magic.core import handshake, pidns, reports, waiting
from tfgpu_magic.core.nvml_values import Gpu, GpuProcess, NvmlSnapshot
from tfgpu_magic.core.pidns import Identity, PidView
from tfgpu_magic.core.reports import Reporter, ReportReader
from tfgpu_magic.server.gpus import gpu_document

CONTAINER = {"comparable": False, "view": "none", "note": "this process's PID namespace differs from the driver's"}


# -- the view -------------------------------------------------------------------------------------------------
def test_on_the_host_nvmls_numbers_are_ours():
    view = PidView()
    assert view.mode == "host" and view.comparable and view.note == ""
    assert view.self_host_pid() == os.getpid()
    me = view.identify(os.getpid())
    assert me.local_pid == os.getpid() and me.name and me.user


def test_in_another_namespace_no_number_is_read_as_a_local_process():
    view = PidView(initial_inode=0)  # this namespace is not the initial one: as in a container
    assert view.mode == "none" and not view.comparable and "differs from the driver's" in view.note
    assert view.identify(os.getpid()) == Identity(None, None, None)  # our own number means nothing to NVML
    assert view.identify(1) == Identity(None, None, None)
    assert view.self_host_pid() is None
    view.learn_self(424242)
    assert view.self_host_pid() == 424242
    assert view.identify(424242).local_pid == os.getpid()


def fake_host_proc(tmp_path: Path, entries: dict[int, tuple[list[int], bool]], self_nspid: list[int]) -> Path:
    """A host /proc: each host PID's status (Name, Uid, NSpid) and ns/pid, ours (a link to this namespace) or not."""
    root = tmp_path / "hostproc"
    elsewhere = tmp_path / "another-namespace"
    elsewhere.write_text("")
    for name, (numbers, ours) in {"self": (self_nspid, True), **entries}.items():
        folder = root / str(name)
        (folder / "ns").mkdir(parents=True)
        (folder / "status").write_text(f"Name:\tjob{name}\nUid:\t0\t0\t0\t0\nNSpid:\t" +
                                       "\t".join(map(str, numbers)) + "\n")
        (folder / "ns" / "pid").symlink_to("/proc/self/ns/pid" if ours else elsewhere)
    return root


def test_a_host_proc_maps_our_processes_and_names_the_others(tmp_path):
    root = fake_host_proc(tmp_path, {5994: ([5994, 5], True), 7001: ([7001, 12], False), 8000: ([8000], False)},
                          self_nspid=[5990, 3])
    view = PidView(root, initial_inode=0)
    assert view.mode == "host_proc" and view.host_proc == root
    assert view.self_host_pid() == 5990
    assert view.identify(5994) == Identity(5, "job5994", "root")  # ours: its number here is the last NSpid
    assert view.identify(7001) == Identity(None, "job7001", "root")  # another container's: named, never mapped
    assert view.identify(8000) == Identity(None, "job8000", "root")  # the host's own
    assert view.identify(3999000) == Identity(None, None, None)  # nothing shows it


@pytest.mark.parametrize("make, why", [
    (lambda tmp: tmp / "missing", "no readable self/status"),
    (lambda tmp: Path("/proc"), "this namespace's own /proc"),
])
def test_a_host_proc_that_is_none_is_said_and_not_used(tmp_path, make, why):
    view = PidView(make(tmp_path), initial_inode=0)
    assert view.mode == "none" and why in view.note and "TFGPU_HOST_PROC=" in view.note


# -- the handshake's judgement ------------------------------------------------------------------------------------
@pytest.mark.parametrize("before, after, expected", [
    ({10: 500}, {10: 500, 4242: 300}, (4242, "handshake", "")),
    ({}, {4242: 0}, (None, None, "ambiguous: the one process that appeared")),
    ({}, {4242: None}, (None, None, "ambiguous: the one process that appeared")),
    ({10: 500}, {10: 500, 4242: 300, 4243: 300}, (None, None, "ambiguous: 2 processes appeared on its GPUs")),
    ({10: 500}, {10: 500}, (None, None, "no process appeared on its GPUs")),
    ("NVML is unavailable (no driver)", {}, (None, None, "NVML is unavailable (no driver): its host PID cannot")),
])
def test_the_window_gives_a_pid_only_when_exactly_one_new_process_holds_memory(monkeypatch, before, after, expected):
    monkeypatch.setattr(pidns, "_view", PidView(initial_inode=0))
    host_pid, how, note = handshake._judge(before, after)
    assert (host_pid, how) == expected[:2] and note.startswith(expected[2])


# -- reports: the kernel's side -------------------------------------------------------------------------------------
VALUES = {"pid": 77, "notebook": "train.ipynb", "host_pid": 4242, "how": "handshake", "note": "", "gpus": ("GPU-a",),
          "tf_memory": {"GPU-a": {"current": 1 << 20, "peak": 2 << 20}}}


def test_a_report_is_written_when_a_value_changes_at_most_once_a_second(tmp_path):
    now = [100.0]
    reporter = Reporter("k1", tmp_path / "reports", clock=lambda: now[0])
    assert reporter.update(VALUES) is True
    assert stat.S_IMODE(os.stat(tmp_path / "reports").st_mode) == 0o700
    assert reporter.update(VALUES) is False  # nothing changed: no write
    changed = {**VALUES, "tf_memory": {"GPU-a": {"current": 3 << 20, "peak": 3 << 20}}}
    now[0] += 0.4
    assert reporter.update(changed) is False  # within the second: kept for later
    now[0] += 0.7
    assert reporter.flush() is True and reporter.writes == 2
    written = json.loads(reporter.path.read_text())
    assert written["tf_memory"]["GPU-a"]["current"] == 3 << 20 and written["kernel_id"] == "k1"
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["k1.json"]  # no temporary left
    reporter.remove()
    assert not reporter.path.exists()


def test_removing_leaves_a_planted_link_alone_without_raising(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep me")
    (folder / "k1.json").symlink_to(target)
    Reporter("k1", folder).remove()  # at the kernel's exit: no traceback
    assert (folder / "k1.json").is_symlink() and target.read_text() == "keep me"


def test_a_kernel_id_comes_from_the_connection_file():
    assert reports.kernel_id(["ipykernel_launcher", "-f", "/run/kernel-4f2c8a1e-77.json"]) == "4f2c8a1e-77"
    assert reports.kernel_id(["python", "script.py"]) is None
    assert reports.kernel_id(["x", "-f", "/run/kernel-../../etc.json"]) is None


# -- reports: the server's side -------------------------------------------------------------------------------------
def write_report(folder: Path, kernel: str, **changes) -> Path:
    folder.mkdir(mode=0o700, exist_ok=True)
    report = {"schema": 1, "kernel_id": kernel, "written_at": 1.5, **{k: list(v) if isinstance(v, tuple) else v
                                                                        for k, v in VALUES.items()}, **changes}
    path = folder / f"{kernel}.json"
    path.write_text(json.dumps(report))
    return path


def reader(folder: Path, lines: list[str], alive=lambda pid: True) -> ReportReader:
    return ReportReader(folder, log=lines.append, max_age=0, alive=alive)


def test_good_reports_are_read_and_bad_ones_ignored_once_each(tmp_path):
    folder, lines = tmp_path / "reports", []
    write_report(folder, "good")
    (folder / "junk.json").write_text("{not json")
    write_report(folder, "liar", kernel_id="someone-else")
    write_report(folder, "odd", host_pid=4242, how="guessed")
    write_report(folder, "huge", note="x" * 20000)
    read = reader(folder, lines)
    for _ in range(3):
        found = read.reports()
    assert set(found) == {"good"} and found["good"].host_pid == 4242 and found["good"].gpus == ("GPU-a",)
    assert len(lines) == 4, lines  # one line per file and reason, however often it is read
    assert any("junk.json is ignored: not JSON" in line for line in lines)
    assert any("liar.json is ignored: its kernel id is not its file's name" in line for line in lines)


def test_a_dead_kernels_report_is_removed(tmp_path):
    folder, lines = tmp_path / "reports", []
    path = write_report(folder, "gone", pid=3999999)
    assert reader(folder, lines, alive=lambda pid: pid != 3999999).reports() == {}
    assert not path.exists() and "its pid 3999999 is not alive" in lines[0]


def test_a_report_naming_another_pid_does_not_speak_for_the_kernel(tmp_path):
    folder, lines = tmp_path / "reports", []
    write_report(folder, "k1", pid=1)
    read = reader(folder, lines)
    report = read.reports()["k1"]
    assert read.check("k1", report, kernel_pid=77) is False and read.check("k1", report, kernel_pid=1) is True
    assert "it names pid 1, but that kernel's pid is 77" in lines[0]


def test_a_folder_others_may_write_is_believed_in_nothing(tmp_path):
    folder, lines = tmp_path / "reports", []
    write_report(folder, "k1")
    os.chmod(folder, 0o777)
    assert reader(folder, lines).reports() == {} and "can be written by other users (mode 777)" in lines[0]


def test_a_link_in_the_folder_is_no_report(tmp_path):
    folder, lines = tmp_path / "reports", []
    target = write_report(tmp_path / "elsewhere", "k1")
    folder.mkdir(mode=0o700)
    (folder / "k1.json").symlink_to(target)
    assert reader(folder, lines).reports() == {} and "symbolic link" in lines[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")
def test_another_users_report_is_ignored(tmp_path):
    folder, lines = tmp_path / "reports", []
    os.chown(write_report(folder, "k1"), 65534, 65534)
    assert reader(folder, lines).reports() == {} and "not to you" in lines[0]


# -- the server's join ------------------------------------------------------------------------------------------------
KERNELS = [{"id": "k1", "name": "python3", "pid": 30, "execution_state": "idle", "last_activity": None,
            "sessions": [{"path": "a.ipynb", "name": "a.ipynb", "type": "notebook"}]},
           {"id": "k2", "name": "python3", "pid": 31, "execution_state": "idle", "last_activity": None,
            "sessions": [{"path": "b.ipynb", "name": "b.ipynb", "type": "notebook"}]}]


def reading(processes: list[dict], pids: dict | None = CONTAINER) -> dict:
    return {"available": True, "pids": pids, "gpus": [{"index": 0, "uuid": "GPU-a", "processes": processes}]}


def proc(pid: int, used: int, local: int | None = None, name: str | None = None) -> dict:
    return {"pid": pid, "used_mib": used, "name": name, "user": "root" if name else None, "local_pid": local}


def test_in_a_container_rows_are_joined_by_reports_and_a_host_view_never_by_number():
    summaries = {"k1": {"host_pid": 5001, "how": "handshake", "note": ""},
                 "k2": {"host_pid": None, "how": None, "note": "ambiguous: 2 processes appeared"}}
    processes = [proc(5001, 2048), proc(30, 8192), proc(31, 1024), proc(6000, 512, local=40, name="python")]
    doc = gpu_document(reading(processes), KERNELS, user="root", parent_of={40: 31}.get, reports=summaries)
    gpu = doc["gpus"][0]
    by_pid = {p["pid"]: p for p in gpu["processes"]}
    assert by_pid[5001]["kernel"] == {"id": "k1", "relation": "kernel", "how": "handshake"}
    assert by_pid[6000]["kernel"] == {"id": "k2", "relation": "child", "how": "host_view"}  # its local 40's parent
    assert 30 not in by_pid and 31 not in by_pid  # the kernels' local numbers, as host PIDs: nobody's here
    assert gpu["unattributed"] == {"count": 2, "used_mib": 9216, "used_bytes": None, "text": (
        "9,216 MiB held by 2 processes this server cannot attribute: its PID namespace differs from the driver's")}
    assert [k["report"] for k in doc["kernels"]] == [summaries["k1"], summaries["k2"]]
    assert doc["pids"] == {"comparable": False, "view": "none", "note": CONTAINER["note"]}


def test_on_the_host_nothing_changes():
    processes = [proc(30, 2048, local=None), proc(3999000, 512)]
    doc = gpu_document(reading(processes, pids=None), KERNELS, user="root", parent_of=lambda pid: None)
    gpu = doc["gpus"][0]
    assert gpu["processes"][0]["kernel"] == {"id": "k1", "relation": "kernel", "how": "pid"}
    assert gpu["unattributed"] is None and len(gpu["processes"]) == 2
    assert doc["pids"]["comparable"] is True and doc["kernels"][0]["report"] is None


# -- claims in a container --------------------------------------------------------------------------------------------
def test_a_claim_clears_once_its_holders_report_shows_it_allocated(tmp_path, monkeypatch):
    monkeypatch.setattr(pidns, "_view", PidView(initial_inode=0))
    folder = tmp_path / "reports"
    monkeypatch.setattr(waiting, "_reports_reader", ReportReader(folder, max_age=0, alive=lambda pid: True))
    claims = waiting.Claims(tmp_path / "claims")

    def snapshot(pids: tuple[int, ...]) -> NvmlSnapshot:
        gpu = Gpu(index=0, name="NVIDIA A100", uuid="GPU-a", pci_bus_id="0", memory_total_mib=40960,
                  memory_used_mib=0, memory_free_mib=40960, memory_reserved_mib=0, utilization_gpu_pct=0,
                  utilization_memory_pct=0, temperature_c=30, power_w=50.0,
                  processes=tuple(GpuProcess(p, 1024) for p in pids))
        return NvmlSnapshot(available=True, gpus=(gpu,), pids=CONTAINER)

    holder = waiting.Claim("GPU-a", 77, "kernel 4f2c8a1e", 0.0)
    monkeypatch.setattr(waiting.Claims, "others", lambda self, keys: {"GPU-a": holder})
    assert set(waiting.live_claims(claims, snapshot((4242,)))) == {"GPU-a"}  # no report: 4242 may be anyone's
    write_report(folder, "k1", pid=77, host_pid=4242)
    assert waiting.live_claims(claims, snapshot((4242,))) == {}  # its report says 4242 is it: allocated
    assert set(waiting.live_claims(claims, snapshot((5000,)))) == {"GPU-a"}  # someone else's PID: still claimed


def test_auto_counts_a_host_process_with_this_kernels_local_number_as_another(monkeypatch):
    from tfgpu_magic.core.settings import choosing

    gpu = Gpu(index=0, name="NVIDIA A100", uuid="GPU-a", pci_bus_id="0", memory_total_mib=40960, memory_used_mib=8192,
              memory_free_mib=32768, memory_reserved_mib=0, utilization_gpu_pct=90, utilization_memory_pct=50,
              temperature_c=60, power_w=250.0, processes=(GpuProcess(os.getpid(), 8192),))
    monkeypatch.setattr(pidns, "_view", PidView(initial_inode=0))
    assert choosing._others(gpu) == (os.getpid(),)  # the host's process of that number computes there: not us
    monkeypatch.setattr(pidns, "_view", PidView())
    assert choosing._others(gpu) == ()  # on the host that number is this process
