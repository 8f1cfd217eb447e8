"""The magics, the CLI and the snapshot over GPUs from the fake NVML library, through the real pynvml:
numbering joined, `visible` by physical index, `auto`, percentages, and every fault survived."""

import json
import subprocess
import sys

import pytest
from fakenvml import three_gpus, with_changes
from harness import SHELL_PRELUDE, SUPPORT

SHELL = SHELL_PRELUDE + """
import io, contextlib, os
from IPython.core.error import UsageError
def out(line):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        magic(line)
    return buf.getvalue()
"""


def cli(fake, *args):
    proc = subprocess.run([sys.executable, "-m", "tfgpu_magic", *args], capture_output=True, text=True,
                          env={**fake.env, "TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def test_cli_devices_json_reports_every_field_of_three_gpus(fake_nvml):
    config = fake_nvml.write(three_gpus()) and three_gpus()
    data = json.loads(cli(fake_nvml, "devices", "--json").stdout)
    assert data["nvml"] == {"available": True, "error": None, "driver_version": "550.54.15",
                            "cuda_driver_version": "12.4"}
    names = [g["name"] for g in data["gpus"]]
    assert names == [g["name"] for g in config["gpus"]]
    fields = {"index", "name", "uuid", "pci_bus_id", "memory_total_mib", "memory_used_mib", "memory_free_mib",
              "memory_reserved_mib", "utilization_gpu_pct", "utilization_memory_pct", "temperature_c", "power_w",
              "processes", "error", "tf_name"}
    for gpu, source in zip(data["gpus"], config["gpus"], strict=True):
        assert fields <= set(gpu)
        assert gpu["uuid"] == source["uuid"] and gpu["pci_bus_id"] == source["pci_bus_id"]
        assert gpu["memory_total_mib"] == source["memory_total"] // 2**20
        assert gpu["temperature_c"] == source["temperature"]
        assert gpu["power_w"] == pytest.approx(source["power_mw"] / 1000)
    assert [p["pid"] for p in data["gpus"][0]["processes"]] == [1, 3999901]
    assert data["gpus"][0]["processes"][0]["name"]  # pid 1 exists: its name comes from /proc


def test_status_names_both_numbers(fake_nvml):
    fake_nvml.write(three_gpus())
    text = cli(fake_nvml, "status").stdout
    assert "NVIDIA H100 80GB HBM3" in text and "GPU:1" in text and "driver 550.54.15" in text


def test_visible_and_auto_and_percent_through_the_real_adapter(fake_nvml):
    fake_nvml.write(three_gpus())
    proc = fake_nvml.run_python(SHELL + """
os.environ.pop("CUDA_VISIBLE_DEVICES", None); os.environ.pop("CUDA_DEVICE_ORDER", None)
magic("visible 2")
print("ENV", os.environ["CUDA_VISIBLE_DEVICES"], os.environ["CUDA_DEVICE_ORDER"])
try:
    magic("visible 7")
except UsageError as err:
    print("ERR", err)
magic("visible auto")
print("AUTO", os.environ["CUDA_VISIBLE_DEVICES"])
magic("limit 25% --gpu 1")
print(out("export"))
print(out("devices"))
""")
    assert proc.returncode == 0, proc.stderr
    stdout = proc.stdout
    assert "ENV 2 PCI_BUS_ID" in stdout
    err = next(line for line in stdout.splitlines() if line.startswith("ERR"))
    assert err.startswith("ERR tfgpu: GPU 7 does not exist")
    for name in ("0 (NVIDIA A100-SXM4-40GB)", "1 (NVIDIA H100 80GB HBM3)", "2 (Tesla T4)"):
        assert name in err
    assert "AUTO 1" in stdout
    assert "memory_limit=20480" in stdout
    assert "Tesla T4" in stdout and "This kernel: GPU 1" in stdout


FAULTS = {
    "no library": None,
    "driver not loaded": {**three_gpus(), "errors": {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"}},
    "power not supported": with_changes(three_gpus(), gpu0={"power_mw": None}),
    "no permission for processes": {
        **three_gpus(), "errors": {"nvmlDeviceGetComputeRunningProcesses_v3": {"gpu": 1, "code": "NO_PERMISSION"}}},
    "utilization not supported": {
        **three_gpus(), "errors": {"nvmlDeviceGetUtilizationRates": "NOT_SUPPORTED"}},
    "a GPU lost": with_changes(three_gpus(), gpu2={"lost": True}),
}
EXPECT = {
    "no library": "not found",
    "driver not loaded": "driver",
    "power not supported": "not_supported",
    "no permission for processes": "no_permission",
    "utilization not supported": "not_supported",
    "a GPU lost": "gpu_lost",
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_every_view_survives_each_fault(fake_nvml, tmp_path, fault):
    config = FAULTS[fault]
    env = dict(fake_nvml.env)
    if config is None:
        env["LD_LIBRARY_PATH"] = str(tmp_path)  # nothing there
    else:
        fake_nvml.write(config)
    code = SHELL + """
import tfgpu_magic
print(out("status")); print(out("devices"))
print("JSON", json.dumps(tfgpu_magic.snapshot().to_dict()))
"""
    proc = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout.split("JSON ", 1)[1])
    text = json.dumps(data).lower() + proc.stdout.lower()
    assert EXPECT[fault] in text
    if fault in ("no library", "driver not loaded"):
        assert data["nvml"]["available"] is False
    else:
        healthy = [g for g in data["gpus"] if g["error"] is None]
        assert len(healthy) == (2 if fault == "a GPU lost" else 3)
        assert all(isinstance(g["memory_total_mib"], int) for g in healthy)
    for args in (["status"], ["status", "--json"]):
        cli_proc = subprocess.run([sys.executable, "-m", "tfgpu_magic", *args], capture_output=True, text=True,
                                  env=env, timeout=60)
        assert cli_proc.returncode == 0 and "Traceback" not in cli_proc.stderr, cli_proc.stderr


def test_a_gpu_lost_mid_session_leaves_the_others_in_view(fake_nvml):
    fake_nvml.write(three_gpus())
    env = {**fake_nvml.env, "PYTHONPATH": str(SUPPORT)}
    proc = subprocess.run([sys.executable, "-c", SHELL + f"""
print(out("devices"))
from fakenvml import write_config, three_gpus, with_changes
write_config({str(fake_nvml.config_path)!r}, with_changes(three_gpus(), gpu1={{"lost": True}}))
print("AFTER"); print(out("devices"))
"""], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    after = proc.stdout.split("AFTER", 1)[1]
    assert "NVIDIA A100-SXM4-40GB" in after and "Tesla T4" in after
    assert "lost" in after.lower()


def test_mixed_models_without_pci_order_are_flagged(fake_nvml):
    fake_nvml.write(three_gpus())
    data = json.loads(cli(fake_nvml, "status", "--json").stdout)
    assert data["numbering"]["cuda_order"] == [0, 1, 2]
    assert "FASTEST_FIRST" in data["numbering"]["note"]
    env = {**fake_nvml.env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,0"}
    proc = subprocess.run([sys.executable, "-m", "tfgpu_magic", "status", "--json"], capture_output=True, text=True,
                          env=env, timeout=60)
    data = json.loads(proc.stdout)
    assert data["numbering"]["note"] == "" and data["numbering"]["cuda_order"] == [2, 0]
    assert {g["index"]: g["tf_name"] for g in data["gpus"]} == {0: "GPU:1", 1: None, 2: "GPU:0"}
