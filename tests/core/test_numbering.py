"""Physical index <-> CUDA ordinal <-> TensorFlow GPU:N, and the kernel's own memory source."""

import gpu_fakes

from tfgpu_magic.core.numbering import cuda_order, tf_names
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


def test_uuid_prefixes_and_old_mig_form_name_their_gpu():
    uuid = SNAP.gpus[2].uuid
    assert cuda_order({"CUDA_VISIBLE_DEVICES": f"{uuid[:13]},0"}, SNAP) == [2, 0]
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "GPU-0000"}, SNAP) == []  # ambiguous prefix
    assert cuda_order({"CUDA_VISIBLE_DEVICES": f"MIG-{uuid}/1/0"}, SNAP) == [2]
    assert cuda_order({"CUDA_VISIBLE_DEVICES": "MIG-0a1b2c3d-0000-0000-0000-000000000000"}, SNAP) == []


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
