"""`%tfgpu visible N` where GPU N is in MIG mode is refused with the MIG devices to choose, each as the line that
chooses it; Tab after `%tfgpu visible ` offers the MIG devices in place of their GPU's index, and `%tfgpu help
visible` names the MIG devices NVML lists. The in-memory MIG machine is gpu_fakes.mig_gpus (GPU 0 an A100 in MIG
mode with three MIG devices, GPU 1 an L4); help reads NVML itself, so its test runs against the fake library."""

from __future__ import annotations

import dataclasses

import gpu_fakes
import pytest
from fakenvml import mig_config, mig_gpu
from gpu_fakes import MIG_UUIDS
from harness import SHELL_PRELUDE
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError
from messages import problems

from tfgpu_magic.ipython import completion


@pytest.fixture
def ip(shell, monkeypatch):
    monkeypatch.setattr(shell.tfgpu.controller, "_nvml_snapshot", gpu_fakes.mig_gpus)
    completion.register(shell)
    yield shell
    completion.unregister(shell)


def refusal(ip, line: str) -> str:
    with pytest.raises(UsageError) as err:
        ip.run_line_magic("tfgpu", line)
    return str(err.value)


def ours(ip, code: str) -> list[str]:
    with provisionalcompleter():
        return [c.text for c in ip.Completer.completions(code, len(code)) if c._origin == "tfgpu_magic.completion"]


@pytest.mark.parametrize("line", ["visible 0", "visible 0 --min-free 1GB --wait 1m"])
def test_a_gpu_in_mig_mode_is_refused_with_its_mig_devices_to_choose(ip, line):
    message = refusal(ip, line)
    first, *choices = message.splitlines()
    assert first == "tfgpu: GPU 0 is in MIG mode, where a process gets one MIG device, not the GPU; choose one:", \
        message
    assert choices == [
        f"  %tfgpu visible {MIG_UUIDS[0]}  3g.20gb, 18,944 of 19,968 MiB free",
        f"  %tfgpu visible {MIG_UUIDS[1]}  2g.10gb, 9,728 of 9,728 MiB free",
        f"  %tfgpu visible {MIG_UUIDS[2]}  1g.5gb, 4,864 of 4,864 MiB free",
    ], message
    assert problems(message) == []
    assert "CUDA_VISIBLE_DEVICES" not in ip.tfgpu.controller.environ  # nothing changed


def test_a_line_of_the_refusal_is_what_chooses_that_device(ip):
    chosen = refusal(ip, "visible 0").splitlines()[2].split()[:3]
    ip.run_line_magic("tfgpu", " ".join(chosen[1:]))
    assert ip.tfgpu.controller.environ["CUDA_VISIBLE_DEVICES"] == MIG_UUIDS[1]


def test_a_list_with_a_gpu_in_mig_mode_says_to_give_a_mig_device_alone(ip):
    message = refusal(ip, "visible 1,0")
    assert message.splitlines()[0].endswith("not the GPU; choose one alone:"), message
    assert problems(message) == []


def test_a_whole_gpu_beside_it_is_accepted(ip):
    ip.run_line_magic("tfgpu", "visible 1")
    assert ip.tfgpu.controller.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_mig_mode_without_a_mig_device_is_one_line(ip, monkeypatch):
    def empty_mig():
        snap = gpu_fakes.mig_gpus()
        bare = dataclasses.replace(snap.gpus[0], mig_devices=())
        return dataclasses.replace(snap, gpus=(bare, *snap.gpus[1:]))

    monkeypatch.setattr(ip.tfgpu.controller, "_nvml_snapshot", empty_mig)
    message = refusal(ip, "visible 0")
    assert message == ("tfgpu: GPU 0 is in MIG mode with no MIG device, so CUDA finds nothing there; choose another "
                       "GPU"), message
    assert problems(message) == []


def test_a_kernel_given_the_gpu_by_index_is_offered_its_mig_devices(ip):
    ip.tfgpu.controller.environ["CUDA_VISIBLE_DEVICES"] = "0"  # GPU 0 by index, as a scheduler may give it
    from tfgpu_magic.core.assignment import Assignment

    ip.tfgpu.controller.assignment = Assignment.from_environ(ip.tfgpu.controller.environ)
    message = refusal(ip, "visible 0")
    assert len(message.splitlines()) == 4, message  # a GPU given by index gives its MIG devices with it


def test_a_missing_gpu_is_said_before_a_gpu_in_mig_mode(ip):
    assert refusal(ip, "visible 0,7").startswith("tfgpu: GPU 7 does not exist")


@pytest.mark.parametrize(("asked", "first", "offered"), [
    ("MIG-0000", "tfgpu: MIG-0000 matches no MIG device NVML lists; choose one:", MIG_UUIDS),
    ("MIG-5e8b", "tfgpu: MIG-5e8b starts several MIG devices' UUIDs; choose one:", (MIG_UUIDS[0], MIG_UUIDS[2])),
])
def test_a_mig_name_that_is_no_one_device_offers_those_to_choose(ip, asked, first, offered):
    message = refusal(ip, f"visible {asked}")
    assert message.splitlines()[0] == first, message
    assert [line.split()[2] for line in message.splitlines()[1:]] == list(offered), message
    assert problems(message) == []


def test_a_mig_name_on_a_machine_without_mig_is_one_line(ip, monkeypatch):
    monkeypatch.setattr(ip.tfgpu.controller, "_nvml_snapshot", gpu_fakes.three_gpus)
    message = refusal(ip, "visible MIG-5e8b")
    assert message == "tfgpu: MIG-5e8b names no MIG device: no GPU here is in MIG mode; choose GPUs by their index"


def test_a_mig_name_without_nvml_says_why_in_its_first_line(ip, monkeypatch):
    from tfgpu_magic.core.nvml import NvmlSnapshot, Unavailable

    gone = NvmlSnapshot(available=False, error=Unavailable("library_not_found", "no NVIDIA driver"))
    monkeypatch.setattr(ip.tfgpu.controller, "_nvml_snapshot", lambda: gone)
    message = refusal(ip, "visible MIG-5e8b")
    assert message.startswith("tfgpu: `%tfgpu visible MIG-5e8b` needs NVML to find a MIG device, and it is "
                              "unavailable: "), message
    assert problems(message) == [] and "\n" not in message, message


# -- Tab ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("code", "expected"), [
    ("%tfgpu visible ", ["all", "none", "auto", "auto:", *MIG_UUIDS, "1", "--min-free", "--wait"]),
    ("%tfgpu visible MIG-9", [MIG_UUIDS[1]]),
    ("%tfgpu visible mig-5E8B", [MIG_UUIDS[0], MIG_UUIDS[2]]),
    ("%tfgpu visible 1,", []),  # a MIG device goes alone, and no other whole GPU is left
    ("%tfgpu visible auto:", ["auto:1"]),
    ("%tfgpu limit 1GB --gpu ", ["0", "1"]),  # --gpu names GPUs by index, as before
])
def test_tab_offers_mig_devices_in_place_of_their_gpu(ip, code, expected):
    assert ours(ip, code) == expected


# -- help -----------------------------------------------------------------------------------------------------------
def test_help_names_the_mig_devices_nvml_lists(fake_nvml):
    fake_nvml.write(mig_config())
    proc = fake_nvml.run_python(SHELL_PRELUDE + "magic('help visible')\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "SPEC: 0 | 1,3 | all | none | auto | auto:N | MIG-<uuid>" in out.splitlines()[0], out
    assert "MIG devices NVML lists now (give one alone):\n" \
           "  MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d (3g.20gb on GPU 0)\n" \
           "  MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f (2g.10gb on GPU 0)\n" in out, out
    assert out.index("MIG devices NVML lists now") < out.index("examples:"), out
    assert problems(out) == []


def test_help_without_mig_devices_lists_none(fake_nvml):
    fake_nvml.write({"gpus": [mig_gpu(mode=0)]})
    proc = fake_nvml.run_python(SHELL_PRELUDE + "magic('help visible')\n")
    assert proc.returncode == 0, proc.stderr
    assert "MIG devices NVML lists now" not in proc.stdout and "MIG-<uuid>" in proc.stdout


def test_load_ext_reads_no_nvml_and_the_first_tab_reads_the_mig_devices(fake_nvml):
    fake_nvml.write(mig_config())
    code = SHELL_PRELUDE + """
from IPython.core.completer import provisionalcompleter
import tfgpu_magic.core.nvml as nvml
assert nvml._nv is None, "nvmlInit at %load_ext"
with provisionalcompleter():
    print([c.text for c in ip.Completer.completions("%tfgpu visible M", 16)])
assert "tensorflow" not in sys.modules
"""
    proc = fake_nvml.run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(list(MIG_UUIDS[:2]))
