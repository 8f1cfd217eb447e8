"""Physical index <-> CUDA ordinal <-> TensorFlow GPU:N, and the kernel's own memory source."""

import gpu_fakes
import pytest

from tfgpu_magic.core.numbering import Match, cuda_order, match_entry, read_entries, tf_names
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot
from tfgpu_magic.core.snapshot import Memory, _kernel_gpu_memory

SNAP = gpu_fakes.three_gpus()


def test_without_cuda_visible_devices_cuda_order_is_pci_order():
    assert cuda_order({}, SNAP) == [0, 1, 2]
    assert cuda_order({}, None) is None


def test_indices_list_in_the_order_given():
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "2,0"}, SNAP) == [2, 0]
    assert cuda_order({"CUDA_VISIBLE_DEVICES": ""}, SNAP) == []


def test_cuda_stops_at_the_first_entry_it_cannot_use():
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "1,7,0"}, SNAP) == [1]
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "1,1"}, SNAP) == [1]


def test_uuid_prefixes_name_their_gpu_and_mig_forms_old_and_new_name_no_whole_gpu():
    uuid = SNAP.gpus[2].uuid
    assert cuda_order({"CUDA_VISIBLE_DEVICES": f"{uuid[:13]},0"}, SNAP) == [2, 0]
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "GPU-0000"}, SNAP) == []  # ambiguous prefix
    # The pre-R470 form names one MIG device of GPU 2 (GPU instance 1, compute instance 0), never GPU 2 whole; here
    # GPU 2 has none at all. It was read as GPU 2.
    assert cuda_order({"CUDA_VISIBLE_DEVICES": f"MIG-{uuid}/1/0"}, SNAP) == []
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "MIG-0a1b2c3d-0000-0000-0000-000000000000"}, SNAP) == []
    mig = gpu_fakes.mig_gpus()  # a MIG device that exists, in either form, is a slice: no physical index either
    assert cuda_order({"CUDA_VISIBLE_DEVICES": f"1,MIG-{mig.gpus[0].uuid}/1/0"}, mig) == [1]
    assert cuda_order({"CUDA_VISIBLE_DEVICES": f"1,{gpu_fakes.MIG_UUIDS[0]}"}, mig) == [1]


@pytest.mark.parametrize(("value", "order", "ended_by"), [
    ("²", [], "²"),  # str.isdigit() takes it, and int() then raised ValueError
    ("１", [], "１"),  # a fullwidth digit: int() made it GPU 1, CUDA reads ASCII only
    ("٣,0", [], "٣"),  # an Arabic-Indic three
    ("0,x,2", [0], "x"),  # CUDA ignores everything after the first entry it cannot read
    ("2,-1,0", [2], "-1"),
    ("0,,2", [0], ""),
    ("0, 2", [0, 2], None),  # blanks around an entry are no part of it
    ("0,2\u00a0", [0], "2\u00a0"),  # a no-break space is
])
def test_cuda_reads_ascii_indices_and_stops_at_the_first_entry_it_cannot_read(value, order, ended_by):
    assert cuda_order({"CUDA_VISIBLE_DEVICES": value}, SNAP) == order
    entries = read_entries(value)
    assert entries.ended_by == ended_by and len(entries.read) == len(order)


def test_the_old_mig_form_is_matched_to_its_mig_device_by_instance_ids():
    snap = gpu_fakes.mig_gpus()  # GPU 0's MIG devices: GPU instances 1, 3 and 9, compute instance 0 each
    parent = snap.gpus[0].uuid
    assert match_entry(f"MIG-{parent}/3/0", snap.gpus) == Match(mig=gpu_fakes.MIG_UUIDS[1], parent=0)
    assert match_entry(f"mig-{parent.lower()}/9/0", snap.gpus).mig == gpu_fakes.MIG_UUIDS[2]
    assert "GPU 0 has no GPU instance 2 with compute instance 0" in match_entry(f"MIG-{parent}/2/0", snap.gpus).why
    assert match_entry(f"MIG-{snap.gpus[1].uuid}/1/0", snap.gpus).why  # GPU 1 is no MIG GPU
    assert match_entry("MIG-GPU-ffffffff/1/0", snap.gpus).why == "a MIG device of a GPU NVML does not list"
    assert match_entry("MIG-5e8b", snap.gpus).why == "a prefix of several MIG devices"
    assert match_entry("9" * 5000, snap.gpus).why == "an index far beyond any GPU's"  # never int() of 5,000 digits


def test_tensorflow_renumbers_the_gpus_it_uses_from_zero():
    assert tf_names([2, 0], None) == {2: "GPU:0", 0: "GPU:1"}
    assert tf_names([0, 1, 2], [1, 2]) == {1: "GPU:0", 2: "GPU:1"}
    assert tf_names(None, None) == {}


def test_kernel_memory_comes_from_its_nvml_process_entry():
    me = gpu_fakes.gpu(1, "NVIDIA L4", 23034, 1000, [GpuProcess(99, 812, "python", "ann", is_self=True)])
    snap = NvmlSnapshot(available=True, gpus=(me,))
    own = _kernel_gpu_memory(snap, {1: "GPU:0"}, (Memory("GPU:0", 500.0, 600.0),))
    assert own == ({"physical_index": 1, "tf_name": "GPU:0", "used_mib": 812, "source": "nvml_process", "note": ""},)


def test_kernel_memory_falls_back_to_the_allocator_and_says_why():
    snap = gpu_fakes.three_gpus()  # no process of this PID: as in a container, where NVML reports host PIDs
    own = _kernel_gpu_memory(snap, {}, (Memory("CPU:0", 1.0, 1.0), Memory("GPU:0", 500.0, 600.0)))
    assert len(own) == 1 and own[0]["source"] == "tensorflow_allocator" and own[0]["used_mib"] == 500.0
    assert "host PIDs" in own[0]["note"]
