"""The GPUs a scheduler gave the kernel (CUDA_VISIBLE_DEVICES when the process started) are the set tfgpu
chooses in: refused outside it, written back in the scheduler's form, never guessed when it cannot be matched."""

from __future__ import annotations

import subprocess
import sys

import pytest
from gpu_fakes import gpu, no_nvml

from tfgpu_magic.core.assignment import Assignment, start_environment
from tfgpu_magic.core.changes import parse_change
from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.nvml import NvmlSnapshot
from tfgpu_magic.core.plan import PlanError
from tfgpu_magic.core.runtime import Probe, TFState


def four_gpus() -> NvmlSnapshot:
    """GPU 3 the freest, then 2; 0 and 1 nearly full."""
    return NvmlSnapshot(available=True, gpus=(gpu(0, "A", 16384, 16000), gpu(1, "A", 16384, 15000),
                                              gpu(2, "A", 16384, 8000), gpu(3, "A", 16384, 2000)))


def controller(start: dict, snap: NvmlSnapshot | None = None) -> Controller:
    environ = dict(start)  # the kernel's environment, as it started
    snap = snap or four_gpus()
    return Controller(environ=environ, nvml_snapshot=lambda: snap, prober=lambda: Probe(TFState.NOT_IMPORTED),
                      hooks_import=False)


def change(ctl: Controller, line: str):
    return ctl.change(parse_change(line))


@pytest.mark.parametrize("given", ["2,3", "GPU-00000002-fake,GPU-00000003-fake", "GPU-00000002,GPU-00000003-f"])
def test_outside_the_given_set_is_refused_naming_the_set_and_nothing_changes(given):
    ctl = controller({"CUDA_VISIBLE_DEVICES": given, "SLURM_JOB_GPUS": "2,3", "SLURM_JOB_ID": "4711"})
    with pytest.raises(PlanError) as err:
        change(ctl, "visible 0")
    message = str(err.value)
    assert message.startswith("tfgpu: `%tfgpu visible 0` refused: GPU 0 was not given to this kernel: it may use "
                              "GPUs 2 and 3 (CUDA_VISIBLE_DEVICES=") and "\n" not in message
    assert "when this kernel started; Slurm job 4711 was given SLURM_JOB_GPUS=2,3" in message
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == given and ctl.plan.visible is None
    with pytest.raises(PlanError, match="GPU 1 was not given"):
        change(ctl, "limit 1GB --gpu 1")


def test_inside_the_set_the_variable_keeps_the_schedulers_form():
    ctl = controller({"CUDA_VISIBLE_DEVICES": "GPU-00000002-fake,GPU-00000003-fake"})
    change(ctl, "visible 2")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "GPU-00000002-fake"  # UUIDs stay UUIDs
    change(ctl, "visible all")  # every GPU of the set: the value the kernel was given
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "GPU-00000002-fake,GPU-00000003-fake"
    ctl = controller({"CUDA_VISIBLE_DEVICES": "2,3"})
    change(ctl, "visible 3")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "3"
    ctl.reset()
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "2,3"  # reset puts the inherited value back


def test_auto_chooses_inside_the_set():
    snap = NvmlSnapshot(available=True, gpus=(gpu(0, "A", 16384, 100), gpu(1, "A", 16384, 200),
                                              gpu(2, "A", 16384, 8000), gpu(3, "A", 16384, 2000)))
    ctl = controller({"CUDA_VISIBLE_DEVICES": "2,3"}, snap)
    outcome = change(ctl, "visible auto")  # 0 and 1 are freer, but not this kernel's
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert outcome.detail.startswith("auto chose GPU 3;"), outcome  # the answer names the GPU it took
    with pytest.raises(PlanError, match=r"needs 3 GPU\(s\), and only these qualify \(among GPUs 2 and 3"):
        change(ctl, "visible auto:3")
    unrestricted = controller({}, snap)
    change(unrestricted, "visible auto")
    assert unrestricted.environ["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize(("given", "why"), [
    ("GPU-deadbeef", "a UUID no GPU of NVML's has"),
    ("2,7", "an index NVML does not have (its GPUs: 0, 1, 2, 3)"),
    ("GPU-0000000", "a prefix of several GPUs' UUIDs"),
])
def test_a_value_that_matches_no_gpu_is_said_and_refused_not_guessed(given, why):
    ctl = controller({"CUDA_VISIBLE_DEVICES": given})
    for line in ("visible 2", "visible auto", "visible all"):
        with pytest.raises(PlanError) as err:
            change(ctl, line)
        assert why in str(err.value) and "will not guess" in str(err.value), str(err.value)
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == given


def test_no_gpu_given_and_no_nvml():
    ctl = controller({"CUDA_VISIBLE_DEVICES": "-1"})
    with pytest.raises(PlanError, match="it may use no GPU"):
        change(ctl, "visible 0")
    ctl = controller({"CUDA_VISIBLE_DEVICES": "1"}, no_nvml())
    with pytest.raises(PlanError, match="GPU 0 was not given"):  # indices are checked without NVML too
        change(ctl, "visible 0")
    change(ctl, "visible 1")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "1"
    uuids = controller({"CUDA_VISIBLE_DEVICES": "GPU-00000001-fake"}, no_nvml())
    with pytest.raises(PlanError, match="needs NVML to match"):
        change(uuids, "visible 1")


def test_a_value_the_users_code_set_is_no_limit():
    ctl = controller({})
    ctl.environ["CUDA_VISIBLE_DEVICES"] = "1"  # the user's own line, after the kernel started
    change(ctl, "visible 0")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert Assignment.from_environ({}).resolve(four_gpus()).restricted is False


def test_the_start_environment_is_the_processes_own_not_a_later_one():
    code = ("import os; os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
            "from tfgpu_magic.core.assignment import start_environment\n"
            "print(start_environment().get('CUDA_VISIBLE_DEVICES'))")
    env = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "2,3"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "2,3"
    assert isinstance(start_environment(), dict)


# -- CUDA_VISIBLE_DEVICES read as CUDA reads it (issue 31, item 2) ---------------------------------------------------
@pytest.mark.parametrize(("value", "indices", "ended_by"), [
    ("²", (), "²"),  # str.isdigit() took it and int() raised a bare ValueError from status and visible
    ("１", (), "１"),  # a fullwidth 1 was read as GPU 1; CUDA reads ASCII digits only and sees no GPU
    ("٣", (), "٣"),  # an Arabic-Indic 3, likewise
    ("2,x,3", (2,), "x"),  # CUDA stops at the first entry it cannot read: GPU 2 alone
    ("3,-1,2", (3,), "-1"),  # -1 ends the list wherever it stands
    ("2,,3", (2,), ""),
])
def test_an_entry_cuda_cannot_read_ends_the_list_and_is_named(value, indices, ended_by):
    ctl = controller({"CUDA_VISIBLE_DEVICES": value})
    given = ctl.given(four_gpus())
    assert (given.indices, given.mig, given.error, given.ended_by) == (indices, (), None, ended_by)
    said = f"CUDA stops reading it at {ended_by!r}, which is no index in ASCII digits, GPU- or MIG- UUID"
    assert said in given.source and given.to_dict()["ended_by"] == ended_by
    outside = 1 if value == "１" else 3 if indices == (2,) else 2
    with pytest.raises(PlanError) as err:
        change(ctl, f"visible {outside}")
    message = str(err.value)
    assert message.startswith(f"tfgpu: `%tfgpu visible {outside}` refused: GPU {outside} was not given to this kernel: "
                              f"it may use {'no GPU' if not indices else f'GPU {indices[0]}'} (CUDA_VISIBLE_DEVICES=")
    assert said in message and "\n" not in message, message
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == value and ctl.plan.visible is None
    if indices:
        change(ctl, f"visible {indices[0]}")
        assert ctl.environ["CUDA_VISIBLE_DEVICES"] == str(indices[0])


def test_an_odd_value_still_gives_a_status():
    from tfgpu_magic.core import snapshot

    for value in ("²", "0,x,2", "MIG-GPU-00000003-fake/1/0"):
        ctl = controller({"CUDA_VISIBLE_DEVICES": value})
        snap = snapshot.take(ctl, nvml=four_gpus())  # raised ValueError for '²'
        assert snap.assignment["value"] == value and snap.not_given_sentence(), snap.assignment


def test_the_usual_no_gpu_values_name_no_entry():
    for value in ("-1", "", " "):
        given = controller({"CUDA_VISIBLE_DEVICES": value}).given(four_gpus())
        assert given.restricted and given.indices == () and "stops reading" not in given.source, given


def test_the_old_mig_form_is_its_mig_device_never_the_whole_parent():
    """MIG-GPU-<parent uuid>/<GPU instance>/<compute instance> (before driver R470) was read as the parent GPU: visible
    took the whole GPU, and auto any of its MIG devices."""
    from gpu_fakes import MIG_UUIDS, mig_gpus

    snap = mig_gpus()  # GPU 0 in MIG mode: GPU instances 1 (pid 4242 there), 3 and 9; GPU 1 an L4
    old_form = "MIG-GPU-00000000-fake/3/0"
    ctl = controller({"CUDA_VISIBLE_DEVICES": old_form}, snap)
    given = ctl.given(snap)
    assert (given.indices, given.mig, given.error, given.form) == ((), (MIG_UUIDS[1],), None, "uuid")
    with pytest.raises(PlanError, match=f"GPU 0 was not given to this kernel: it may use {MIG_UUIDS[1]}"):
        change(ctl, "visible 0")
    with pytest.raises(PlanError, match="was not given"):
        change(ctl, f"visible {MIG_UUIDS[0]}")
    outcome = change(ctl, "visible auto")  # the 3g.20gb (slot 0) is freer, and not this kernel's
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == MIG_UUIDS[1], outcome
    change(ctl, "visible all")
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == old_form  # the value as the scheduler wrote it
    both = controller({"CUDA_VISIBLE_DEVICES": f"1,{old_form.lower()}"}, snap).given(snap)
    assert (both.indices, both.mig) == ((1,), (MIG_UUIDS[1],))


@pytest.mark.parametrize(("value", "why"), [
    ("MIG-GPU-00000000-fake/2/0", "a MIG device NVML does not list (GPU 0 has no GPU instance 2 with compute "
                                  "instance 0)"),
    ("MIG-GPU-00000001-fake/1/0", "a MIG device NVML does not list (GPU 1 has no GPU instance 1"),
    ("MIG-GPU-0000/1/0", "a MIG device of a prefix of several GPUs' UUIDs"),
    ("MIG-5e8b", "a prefix of several MIG devices"),
    ("1,GPU-0000", "a prefix of several GPUs' UUIDs"),
])
def test_an_entry_that_names_no_one_device_is_refused_not_guessed(value, why):
    from gpu_fakes import mig_gpus

    snap = mig_gpus()
    ctl = controller({"CUDA_VISIBLE_DEVICES": value}, snap)
    for line in ("visible 1", "visible auto", "visible all"):
        with pytest.raises(PlanError) as err:
            change(ctl, line)
        message = str(err.value)
        assert why in message and "will not guess" in message and "\n" not in message, message
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == value
