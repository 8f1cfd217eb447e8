"""Each technique the course promises appears in a lesson, the plain TensorFlow way and with %tfgpu
where both exist (the issue's list, from the two tutorials the course draws on)."""


import nbformat
import pytest
from harness import ROOT

NOTEBOOKS = ROOT / "notebooks"

# technique -> (lesson prefix, strings that must all appear in that lesson's source)
TECHNIQUES = {
    "GPUs chosen in the shell": ("02", ["CUDA_VISIBLE_DEVICES=2,3 python", "export CUDA_VISIBLE_DEVICES"]),
    "GPUs chosen in code": ("02", ['os.environ["CUDA_VISIBLE_DEVICES"]', "set_visible_devices(gpus[0:2]",
                                   "%tfgpu visible"]),
    "nvidia-smi's numbers versus TensorFlow's": ("01", ["nvidia-smi", "GPU:0", "%tfgpu devices"]),
    "placing ops with tf.device": ("04", ["tf.device(", "%%tfgpu device"]),
    "the placement log": ("04", ["set_log_device_placement(True)", "%tfgpu placement on"]),
    "soft placement falling back": ("04", ["set_soft_device_placement(False)"]),
    "a sub-graph per device summed on the CPU": ("05", ["tf.add_n", "for ", "tf.device("]),
    "memory growth": ("03", ["set_memory_growth", "%tfgpu growth on"]),
    "a memory cap": ("03", ["memory_limit=1024", "%tfgpu limit"]),
    "a memory fraction": ("03", ["per_process_gpu_memory_fraction", "40%"]),
    "two virtual GPUs on one card": ("06", ["LogicalDeviceConfiguration(memory_limit=2048)", "%tfgpu virtual 2x2GB"]),
    "MirroredStrategy reports two devices": ("06", ["MirroredStrategy()", "Number of devices", "%tfgpu strategy"]),
    "TF1 sessions": ("07", ["tf.compat.v1.ConfigProto", "allow_growth", "tf.compat.v1.Session",
                            "%tfgpu export --tf1"]),
    "several machines": ("08", ["TF_CONFIG", "MultiWorkerMirroredStrategy", "127.0.0.1"]),
}


def _source(prefix: str) -> str:
    (path,) = NOTEBOOKS.glob(f"{prefix}_*.ipynb")
    return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)


@pytest.mark.parametrize("technique", list(TECHNIQUES))
def test_technique_is_taught(technique):
    prefix, needles = TECHNIQUES[technique]
    source = _source(prefix)
    missing = [n for n in needles if n not in source]
    assert not missing, f"lesson {prefix} lacks {missing} for {technique!r}"
