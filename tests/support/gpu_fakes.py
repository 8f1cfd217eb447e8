"""An in-memory stand-in for the NVML adapter, for every layer above it (the adapter itself is
tested against the fake C library), and a recording stand-in for ``tf.config`` for the GPU paths."""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from types import SimpleNamespace

from tfgpu_magic.core.nvml import Gpu, GpuProcess, MigDevice, NvmlSnapshot, Unavailable

NA = Unavailable("not_supported")


def gpu(index: int, name: str, total: int, used: int, processes=()) -> Gpu:
    return Gpu(index=index, name=name, uuid=f"GPU-{index:08d}-fake", pci_bus_id=f"00000000:{index + 1:02X}:00.0",
               memory_total_mib=total, memory_used_mib=used, memory_free_mib=total - used, memory_reserved_mib=0,
               utilization_gpu_pct=10 * index, utilization_memory_pct=5, temperature_c=40, power_w=NA,
               processes=tuple(processes))


def three_gpus() -> NvmlSnapshot:
    """Three models; GPU 1 has the most free memory, GPU 2 the least; GPU 2 is 80 GiB."""
    return NvmlSnapshot(available=True, driver_version="550.54", cuda_driver_version="12.4", gpus=(
        gpu(0, "NVIDIA A100-SXM4-40GB", 40960, 30000, [GpuProcess(4242, 29000, "python", "ann")]),
        gpu(1, "NVIDIA L4", 23034, 1000),
        gpu(2, "NVIDIA H100 80GB HBM3", 81920, 70000),
    ))


MIG_NA = Unavailable("not_supported", "not reported per MIG device")
MIG_UUIDS = ("MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d", "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f",
             "MIG-5e8b77aa-0000-4000-8000-000000000002")


def mig_device(parent: int, slot: int, uuid: str, profile: str, gi: int, total: int, used: int,
               processes=(), ci: int = 0, parent_name: str = "NVIDIA A100-SXM4-40GB") -> MigDevice:
    return MigDevice(parent_index=parent, index=slot, uuid=uuid, name=f"{parent_name} MIG {profile}", profile=profile,
                     gpu_instance_id=gi, compute_instance_id=ci, memory_total_mib=total, memory_used_mib=used,
                     memory_free_mib=total - used, memory_reserved_mib=0, utilization_gpu_pct=MIG_NA,
                     temperature_c=MIG_NA, processes=tuple(processes))


def mig_gpus() -> NvmlSnapshot:
    """GPU 0: an A100 in MIG mode with three MIG devices (slots 0, 1, 2: 3g.20gb, 2g.10gb, 1g.5gb; the UUIDs
    of slots 0 and 2 both start "MIG-5e8b"), pid 4242 on slot 0; GPU 1: an L4 (no MIG)."""
    migs = (
        mig_device(0, 0, MIG_UUIDS[0], "3g.20gb", 1, 19968, 1024, [GpuProcess(4242, 1000, "python", "ann")]),
        mig_device(0, 1, MIG_UUIDS[1], "2g.10gb", 3, 9728, 0),
        mig_device(0, 2, MIG_UUIDS[2], "1g.5gb", 9, 4864, 0),
    )
    no_utilization = Unavailable("not_supported", "utilization: NVML does not report it for a GPU in MIG mode")
    parent = dataclasses.replace(gpu(0, "NVIDIA A100-SXM4-40GB", 40960, 1024, migs[0].processes),
                                 utilization_gpu_pct=no_utilization, utilization_memory_pct=no_utilization,
                                 mig_mode=True, mig_pending=True, mig_devices=migs)
    return NvmlSnapshot(available=True, driver_version="550.54", cuda_driver_version="12.4",
                        gpus=(parent, gpu(1, "NVIDIA L4", 23034, 1000)))


def no_nvml() -> NvmlSnapshot:
    return NvmlSnapshot(available=False, error=Unavailable("error", "NVML library not found"))


PhysicalDevice = namedtuple("PhysicalDevice", "name device_type")
LogicalDeviceConfiguration = namedtuple("LogicalDeviceConfiguration", "memory_limit experimental_priority",
                                        defaults=(None, None))


class RecordingTF:
    """The slice of ``tf.config`` the adapter uses, over N fake GPUs, recording every setter call.
    Setters raise like TensorFlow's do after initialization when ``initialized`` is set."""

    def __init__(self, n_gpus: int, initialized: bool = False):
        self.calls: list[tuple] = []
        self.initialized = initialized
        self.cpus = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
        self.gpus = [PhysicalDevice(f"/physical_device:GPU:{k}", "GPU") for k in range(n_gpus)]
        self.visible = list(self.gpus)
        self.growth = {d.name: False for d in self.gpus}
        self.logical: dict[str, list | None] = {d.name: None for d in self.cpus + self.gpus}
        config = SimpleNamespace(
            LogicalDeviceConfiguration=LogicalDeviceConfiguration,
            list_physical_devices=self.list_physical_devices,
            get_visible_devices=lambda kind: [d for d in self.visible if d.device_type == kind],
            set_visible_devices=self.set_visible_devices,
            get_logical_device_configuration=lambda d: self.logical[d.name],
            set_logical_device_configuration=self.set_logical_device_configuration,
            experimental=SimpleNamespace(get_memory_growth=lambda d: self.growth[d.name],
                                         set_memory_growth=self.set_memory_growth),
        )
        self.config = config

    def list_physical_devices(self, kind=None):
        return [d for d in self.cpus + self.gpus if kind is None or d.device_type == kind]

    def _frozen(self, what):
        if self.initialized:
            raise RuntimeError(f"{what} cannot be modified after being initialized")

    def set_visible_devices(self, devices, kind):
        self.calls.append(("set_visible_devices", tuple(d.name for d in devices), kind))
        self._frozen("Visible devices")
        self.visible = list(devices)

    def set_memory_growth(self, device, on):
        self.calls.append(("set_memory_growth", device.name, on))
        self._frozen("Physical devices")
        self.growth[device.name] = on

    def set_logical_device_configuration(self, device, configs):
        limits = None if configs is None else tuple(c.memory_limit for c in configs)
        self.calls.append(("set_logical_device_configuration", device.name, limits))
        self._frozen("Virtual devices")
        self.logical[device.name] = None if configs is None else list(configs)
