"""The magics, the CLI and the snapshot over GPUs from the fake NVML library, through the real pynvml:
numbering joined, `visible` by physical index, `auto`, percentages, and every fault survived."""

import json
import subprocess
import sys

import pytest
from fakenvml import MIB, graphics_gpus, three_gpus, with_changes
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


# The command line as on a GPU machine, whose TensorFlow is a GPU build: this venv's tensorflow-cpu would make it
# name no GPU (it knows the build without importing it).
GPU_BUILD_CLI = ("import sys, tfgpu_magic.core.no_gpu as no_gpu; no_gpu.installed_cpu_only = lambda: False; "
                 "from tfgpu_magic.cli import main; sys.exit(main())")


def cli(fake, *args, **env):
    proc = subprocess.run([sys.executable, "-c", GPU_BUILD_CLI, *args], capture_output=True, text=True,
                          env={**fake.env, "TF_CPP_MIN_LOG_LEVEL": "2", **env}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def test_cli_devices_json_reports_every_field_of_three_gpus(fake_nvml):
    config = fake_nvml.write(three_gpus()) and three_gpus()
    data = json.loads(cli(fake_nvml, "devices", "--json").stdout)
    assert data["nvml"] == {"available": True, "error": None, "driver_version": "550.54.15",
                            "cuda_driver_version": "12.4", "pids": None}  # None: the host's PIDs
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
magic("visible auto")  # the T4 (GPU 2): the H100 is freer, but another process computes there
print("AUTO", os.environ["CUDA_VISIBLE_DEVICES"])
magic("limit 25% --gpu 2")
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
    assert "AUTO 2" in stdout
    assert "memory_limit=3840" in stdout  # 25% of the T4's 15,360 MiB
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
    data = json.loads(cli(fake_nvml, "status", "--json", CUDA_DEVICE_ORDER="PCI_BUS_ID",
                          CUDA_VISIBLE_DEVICES="2,0").stdout)
    assert data["numbering"]["note"] == "" and data["numbering"]["cuda_order"] == [2, 0]
    assert {g["index"]: g["tf_name"] for g in data["gpus"]} == {0: "GPU:1", 1: None, 2: "GPU:0"}


# ---- graphics processes (nvidia-smi's type G, and C+G) ----

VIEWS = """
import json, os
from tfgpu_magic.render.snapshot import take
s = take()
print(json.dumps({"pid": os.getpid(), "status": s.to_text(), "devices": s.devices_text(),
                  "status_html": s._repr_html_(), "devices_html": s.devices_html(), "json": s.to_dict()}))
"""


def test_graphics_processes_in_the_text_html_and_json_views(fake_nvml):
    fake_nvml.write(graphics_gpus())
    out = fake_nvml.run_json(VIEWS)
    pid = out["pid"]
    for text in (out["status"], out["devices"]):
        said = " ".join(text.split())  # the sentence wraps at 100 columns
        assert "Processes marked as nvidia-smi types them: (G) a graphics process, such as a desktop session" in said
        assert "(C+G) compute and graphics, its memory counted once." in said
        assert "3999911 unnamed (G) 180 MiB" in text  # after GPU 0's two compute processes
        assert f"PID {pid}* " in text and " (C+G) 1024 MiB" in text  # this process: one entry, its memory once
        assert "3999912 unnamed (G) n/a" in text
        assert "2048 MiB" not in text  # (the GPU's used figure is "2048 / 81920 MiB")
    for page in (out["status_html"], out["devices_html"]):
        assert "3999911 unnamed (<abbr title=\"a graphics process (nvidia-smi&#x27;s type G" in page
        assert "(<abbr title=\"a compute and graphics process" in page and ">C+G</abbr>) 1,024 MiB" in page
        assert "Processes marked as nvidia-smi types them: (G) a graphics process" in page
    gpus = out["json"]["gpus"]
    assert [(p["pid"], p["type"]) for p in gpus[0]["processes"]] == [(1, "C"), (3999901, "C"), (3999911, "G")]
    assert [(p["pid"], p["used_mib"], p["type"]) for p in gpus[1]["processes"]] == [(pid, 1024, "C+G"),
                                                                                 (3999902, None, "C")]
    assert [{k: m[k] for k in ("physical_index", "used_mib", "source")} for m in out["json"]["kernel_gpu_memory"]] \
        == [{"physical_index": 1, "used_mib": 1024, "source": "nvml_process"}]


def test_without_graphics_processes_the_views_say_nothing_of_them(fake_nvml):
    fake_nvml.write(three_gpus())
    out = fake_nvml.run_json(VIEWS)
    for view in ("status", "devices", "status_html", "devices_html"):
        assert "nvidia-smi types" not in out[view] and "(G)" not in out[view] and "abbr" not in out[view]
        assert "processes (*: this kernel)" in out[view]


def test_a_kernel_that_only_renders_holds_its_graphics_memory(fake_nvml):
    """This kernel on NVML's graphics list only (EGL rendering, no CUDA yet): its memory is NVML's figure for it,
    as for a compute process, not "not listed" with TensorFlow's allocator as the fallback."""
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": 3999902, "used": 100 * MIB}]
    config["gpus"][2]["processes"] = [{"pid": "self", "used": 300 * MIB, "type": "G"}]
    fake_nvml.write(config)
    out = fake_nvml.run_json(VIEWS)
    assert [{k: m[k] for k in ("physical_index", "used_mib", "source")} for m in out["json"]["kernel_gpu_memory"]] \
        == [{"physical_index": 2, "used_mib": 300, "source": "nvml_process"}]
    assert "This kernel: GPU 2" in out["status"] and "300 MiB, from NVML's process list" in out["status"]


def test_cli_shows_graphics_processes(fake_nvml):
    fake_nvml.write(graphics_gpus())
    text = cli(fake_nvml, "status").stdout
    assert "Processes marked as nvidia-smi types them" in text and "3999911 unnamed (G) 180 MiB" in text
    data = json.loads(cli(fake_nvml, "status", "--json").stdout)
    assert [p["type"] for p in data["gpus"][0]["processes"]] == ["C", "C", "G"]
    assert [p["type"] for p in data["gpus"][2]["processes"]] == ["G"]
    devices = cli(fake_nvml, "devices").stdout  # imports TensorFlow; the GPU table is the same one
    assert "3999911 unnamed (G) 180 MiB" in devices and "3999912 unnamed (G) n/a" in devices


PANEL = SHELL_PRELUDE + """
import json, re
from tfgpu_magic import Panel
p = Panel()
memory = p._html["memory"].value
p.close()
print(json.dumps(" ".join(re.sub(r"<[^>]+>", " ", memory).replace("&#x27;", "'").split())))
"""


def test_the_panel_counts_this_kernels_graphics_memory(fake_nvml):
    """The panel's memory tab: this kernel's share of a GPU where it is a graphics process only (GPU 2), and of one
    where it is on both lists (GPU 1: its one figure, not twice)."""
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": "self", "used": 1024 * MIB, "type": "C+G"},
                                      {"pid": 3999902, "used": 100 * MIB}]
    config["gpus"][2]["processes"] = [{"pid": "self", "used": 300 * MIB, "type": "G"}]
    fake_nvml.write(config)
    memory = fake_nvml.run_json(PANEL)
    h100, t4 = memory.split("GPU 1 · ")[1].split("GPU 2 · ")
    assert "this kernel reserved 1.0 GiB" in h100 and "2.0 GiB" not in h100, h100
    assert t4.startswith("Tesla T4") and "this kernel reserved 300.0 MiB" in t4, t4
