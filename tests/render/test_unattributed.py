"""Memory this kernel cannot attribute (issue 33): in a container NVML's PIDs are the host's, so a GPU process that is
not this kernel and that no host view names is no row (its number means nothing here) but one line per GPU, or per
MIG device, with its total: "12,288 MiB held by 2 processes this kernel cannot attribute: ...". In every kernel view:
the text (`%tfgpu status` in a terminal, the CLI `tfgpu status`), the HTML views and the live panel. On the host
(``NvmlSnapshot.pids`` None) nothing changes."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import shutil
import subprocess

import gpu_fakes
import pytest
from clipipes import ENTRY_POINTS, assert_quiet
from fakenvml import MIB

from tfgpu_magic.core import words
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot
from tfgpu_magic.render import live_html, views
from tfgpu_magic.render.snapshot import take

NONE_VIEW = {"comparable": False, "view": "none",
             "note": "this process's PID namespace differs from the driver's (a container): NVML's PIDs are the "
                     "host's, so they are never matched to local processes by number"}
HOST_PROC_VIEW = {"comparable": False, "view": "host_proc",
                  "note": "this process's PID namespace differs from the driver's; host PIDs are mapped through the "
                          "host /proc at /host/proc"}
OWN = GpuProcess(88001, 1024, None, None, is_self=True)  # this kernel: its host PID learned, no name here
FOREIGN = (GpuProcess(4242, 8192), GpuProcess(4343, 4096))  # host PIDs nothing here names: 12,288 MiB
NAMED = GpuProcess(5151, 2048, "python3", "bob")  # a host process the host /proc names


def plain(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def flat(text: str) -> str:
    return " ".join(text.split())


def readings(pids: dict | None, gpu0=(OWN, *FOREIGN)) -> NvmlSnapshot:
    """GPU 0 with this kernel and two foreign processes, GPU 1 with none; ``pids`` None: the host."""
    return NvmlSnapshot(available=True, driver_version="550.54.15", cuda_driver_version="12.4", pids=pids, gpus=(
        gpu_fakes.gpu(0, "NVIDIA A100-SXM4-40GB", 40960, 14000, gpu0),
        gpu_fakes.gpu(1, "NVIDIA L4", 23034, 0),
    ))


def mig_readings(pids: dict | None) -> NvmlSnapshot:
    """gpu_fakes.mig_gpus() with a foreign process of 3,000 MiB on MIG slot 1 (and so in its GPU's union)."""
    snap = gpu_fakes.mig_gpus()
    parent = snap.gpus[0]
    foreign = GpuProcess(7777, 3000)
    migs = (parent.mig_devices[0], dataclasses.replace(parent.mig_devices[1], processes=(foreign,)),
            parent.mig_devices[2])
    parent = dataclasses.replace(parent, mig_devices=migs, processes=(*parent.processes, foreign))
    return dataclasses.replace(snap, gpus=(parent, *snap.gpus[1:]), pids=pids)


def panel_memory(snap) -> str:
    """The panel's memory section, from the snapshot's data as the live model (core/live.py) passes it on, with the
    reading's ``pids`` in its ``nvml`` (where the panel reads it)."""
    data = snap.to_dict()
    nvml = {**data["nvml"], "pids": snap.nvml.pids}
    gpus = {"nvml": nvml, "gpus": data["gpus"], "kernel_gpu_memory": data["kernel_gpu_memory"]}
    return plain(live_html.memory_html(gpus, {"devices": None, "state": "not_imported"}))


def every_view(snap) -> dict[str, str]:
    return {"text": flat(snap.to_text()), "devices text": flat(snap.devices_text()),
            "html": plain(snap._repr_html_()), "devices html": plain(views.devices_html(snap)),
            "panel": panel_memory(snap)}


LINE = words.unattributed_line(2, 12288, "this kernel", "none")


def test_the_line_reads_as_the_issue_says():
    assert LINE == ("12,288 MiB held by 2 processes this kernel cannot attribute: its PID namespace differs from the "
                    "driver's")


# -- the host: nothing changes ------------------------------------------------------------------------------------
def test_on_the_host_every_process_is_a_row_and_no_line(shell):
    snap = take(shell.tfgpu.controller, nvml=readings(None))
    for name, shown in every_view(snap).items():
        assert "cannot attribute" not in shown and "unattributed" not in shown, name
        assert "PIDs:" not in shown, name
    for name in ("text", "html"):
        shown = every_view(snap)[name]
        assert "4242 unnamed 8" in shown and "4343 unnamed 4" in shown and "88001* unnamed 1" in shown, name


# -- a container ----------------------------------------------------------------------------------------------
def test_in_a_container_foreign_rows_go_and_one_line_says_their_total(shell):
    snap = take(shell.tfgpu.controller, nvml=readings(NONE_VIEW))
    for name, shown in every_view(snap).items():
        assert "4242" not in shown and "4343" not in shown, name  # host numbers: no rows
        assert shown.count(LINE) == 1, (name, shown)  # one line for GPU 0, none for GPU 1
        assert "0 MiB held" not in shown, name
    text = snap.to_text()
    assert f"GPU 0: {LINE}" in flat(text)
    assert "88001* unnamed 1024 MiB" in text  # the kernel's own row stays
    assert "2 unattributed (see below)" in text  # the column is not "-": memory is held there
    assert all(len(line) <= 100 for line in text.splitlines()), text
    page = snap._repr_html_()
    assert "88001* unnamed 1,024 MiB" in plain(page)
    assert "tfgpu-unattributed" in page
    assert f"PIDs: {NONE_VIEW['note']}." in plain(page) and f"PIDs: {NONE_VIEW['note']}" in flat(text)


def test_the_panel_says_the_pid_note_once_and_the_line_under_its_gpu(shell):
    shown = panel_memory(take(shell.tfgpu.controller, nvml=readings(NONE_VIEW)))
    assert shown.count("PIDs:") == 1
    gpu0, gpu1 = shown.split("GPU 0 ·", 1)[1].split("GPU 1 ·", 1)
    assert LINE in gpu0 and "cannot attribute" not in gpu1


def test_a_host_proc_view_lists_what_it_names_and_counts_the_rest(shell):
    snap = take(shell.tfgpu.controller, nvml=readings(HOST_PROC_VIEW, (OWN, NAMED, FOREIGN[0])))
    line = words.unattributed_line(1, 8192, "this kernel", "host_proc")
    assert line.startswith("8,192 MiB held by 1 process this kernel cannot attribute: they are not in this PID")
    for name, shown in every_view(snap).items():
        assert shown.count(line) == 1 and "4242" not in shown, name
    assert "PID 5151 python3 2048 MiB" in snap.to_text() and "PID 5151 python3 2,048 MiB" in plain(snap._repr_html_())


def test_memory_nvml_gives_no_figure_for_is_never_zero(shell):
    snap = take(shell.tfgpu.controller, nvml=readings(NONE_VIEW, (OWN, GpuProcess(4242, None), FOREIGN[1])))
    line = words.unattributed_line(2, None, "this kernel", "none")
    assert line.startswith("memory (NVML gives no figure) held by 2 processes")
    for name, shown in every_view(snap).items():
        # The HTML views write it as a sentence: "Memory (NVML gives no figure) held ...".
        assert shown.lower().count(line.lower()) == 1 and "4,096 MiB held" not in shown, name


def test_mig_devices_say_their_own_line_and_their_gpu_none(shell):
    snap = take(shell.tfgpu.controller, nvml=mig_readings(NONE_VIEW))
    line = words.unattributed_line(1, 3000, "this kernel", "none")
    for name, shown in every_view(snap).items():
        assert shown.count(line) == 1 and "7777" not in shown, (name, shown)
        assert "PID 4242 python" in shown or name == "panel", name  # a process the host view names stays a row
    text = flat(snap.to_text())
    assert f"GPU 0/1: {line}" in text
    assert text.count("1 unattributed (see below)") == 2  # the MIG row and its GPU's (the union), one sentence
    page = snap._repr_html_()
    rows = re.findall(r"<tr .*?</tr>", page)
    slot1 = next(r for r in rows if ">0/1<" in r)
    parent = next(r for r in rows if "(MIG mode)" in r)
    assert line in plain(slot1) and "1 unattributed (see below)" in plain(parent)
    panel = panel_memory(snap)
    assert panel.index(line) > panel.index("GPU 0/1 ·")


def test_everything_from_data_is_escaped_in_the_line(shell):
    evil = {**NONE_VIEW, "view": "<img src=x onerror=alert(1)>", "note": "<img src=x onerror=alert(1)>"}
    snap = take(shell.tfgpu.controller, nvml=readings(evil))
    for page in (snap._repr_html_(), views.devices_html(snap)):
        assert "<img" not in page
    data = snap.to_dict()
    panel = live_html.memory_html({"nvml": {**data["nvml"], "pids": evil}, "gpus": data["gpus"],
                                   "kernel_gpu_memory": []}, {"devices": None, "state": "not_imported"})
    assert "<img" not in panel and "&lt;img" in panel


# -- the CLI, in a PID namespace of its own --------------------------------------------------------------------
def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.parametrize("in_container", [False, True], ids=["host", "own PID namespace"])
def test_tfgpu_status_says_the_line_in_its_own_pid_namespace(fake_nvml, in_container):
    """The real CLI over the fake NVML, which lists two PIDs that exist nowhere: on the host they are rows of unnamed
    processes as before; started by `unshare --pid` (a container's PID namespace) they are one line."""
    if in_container and not _can_unshare():
        pytest.skip("needs root and unshare(1) to start the CLI in a PID namespace of its own")
    fake_nvml.write({"gpus": [{"name": "NVIDIA A100-SXM4-40GB", "memory_total": 40960 * MIB,
                               "memory_used": 14000 * MIB,
                               "processes": [{"pid": 3999901, "used": 8192 * MIB},
                                             {"pid": 3999902, "used": 4096 * MIB}]}]})
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"] if in_container else []
    proc = subprocess.run([*prefix, *ENTRY_POINTS["tfgpu"], "status"], capture_output=True, text=True, timeout=120,
                          env=fake_nvml.env)
    assert_quiet(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    text = flat(proc.stdout)
    if in_container:
        assert f"GPU 0: {LINE}" in text, proc.stdout
        assert "3999901" not in text and "3999902" not in text
    else:
        assert "3999901 unnamed 8192 MiB" in text and "cannot attribute" not in text, proc.stdout
