"""On a shared server the kernel respects the GPUs it was started with: a real kernel (the user's environment)
whose NVML is the fake library with four GPUs, started with CUDA_VISIBLE_DEVICES naming GPUs 2 and 3, by index
and by UUID, as Slurm, the Kubernetes device plugin or a spawner would."""

from __future__ import annotations

import copy
import json
import queue
import re
import subprocess
import sys
import threading
import time

import pytest
from fakenvml import MIB, three_gpus
from harness import user_env

pytestmark = pytest.mark.kernel


def four_gpus() -> dict:
    """GPUs 0 and 1 nearly full, GPU 3 freer than GPU 2; UUIDs GPU-...-0000000k."""
    config = three_gpus()
    model = config["gpus"][2]
    gpus = []
    for k, used in enumerate((15000, 14000, 9000, 2000)):
        gpu = copy.deepcopy(model)
        gpu.update(uuid=f"GPU-1b2c3d4e-0000-4000-8000-00000000000{k}", pci_bus_id=f"00000000:{k + 1:02X}:00.0",
                   memory_total=16384 * MIB, memory_used=used * MIB, processes=[])
        gpus.append(gpu)
    config["gpus"] = gpus
    return config


class Kernel:
    def __init__(self, env: dict[str, str], cwd: str):
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", env=env, cwd=cwd)

    def run(self, source: str) -> tuple[str, dict]:
        """(printed text, the reply's content) of one cell."""
        out: list[str] = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] in ("display_data", "execute_result"):
                out.append(msg["content"]["data"].get("text/plain", ""))

        reply = self.client.execute_interactive(source, timeout=120, output_hook=hook)
        return "".join(out), reply["content"]

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


UUID = "GPU-1b2c3d4e-0000-4000-8000-00000000000{}"


@pytest.mark.parametrize("given", ["2,3", f"{UUID.format(2)},{UUID.format(3)}"], ids=["indices", "uuids"])
def test_a_kernel_given_gpus_2_and_3_chooses_only_among_them(fake_nvml, tmp_path, given):
    fake_nvml.write(four_gpus())
    kernel = Kernel(user_env(**fake_nvml.env, CUDA_VISIBLE_DEVICES=given), str(tmp_path))
    show = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"
    try:
        kernel.run("%load_ext tfgpu_magic")
        out, reply = kernel.run("%tfgpu visible 0")
        assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
        message = reply["evalue"]
        assert message.startswith("tfgpu: `%tfgpu visible 0` refused: GPU 0 was not given to this kernel: it may "
                                  "use GPUs 2 and 3 (CUDA_VISIBLE_DEVICES=") and "\n" not in message, message
        assert kernel.run(show)[0].strip() == given  # unchanged
        out, reply = kernel.run("%tfgpu devices")
        assert reply["status"] == "ok", reply
        rows = {line.split()[0]: line for line in out.splitlines() if line.strip()[:1].isdigit()}
        assert "not given" in rows["0"] and "not given" in rows["1"], out
        assert "not given" not in rows["2"] and "not given" not in rows["3"], out
        assert "GPUs 0 and 1 are not available to this kernel: it was given GPUs 2 and 3 (CUDA_VISIBLE_DEVICES=" \
            in " ".join(out.split()), out
        kernel.run("%tfgpu visible auto")
        assert kernel.run(show)[0].strip() == ("3" if given == "2,3" else UUID.format(3))  # the freer of 2 and 3
        kernel.run("%tfgpu visible 2")
        assert kernel.run(show)[0].strip() == ("2" if given == "2,3" else UUID.format(2))
        kernel.run("%tfgpu reset")
        assert kernel.run(show)[0].strip() == given
    finally:
        kernel.close()


def test_the_cli_marks_the_gpus_the_process_was_not_given(fake_nvml):
    fake_nvml.write(four_gpus())
    env = user_env(**fake_nvml.env, CUDA_VISIBLE_DEVICES="2,3")
    out = subprocess.run([sys.executable, "-m", "tfgpu_magic", "devices", "--json"], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    data = json.loads(out)
    assert [g["given"] for g in data["gpus"]] == [False, False, True, True]
    assert data["assignment"]["indices"] == [2, 3] and data["assignment"]["value"] == "2,3"


def test_a_kernel_started_with_an_entry_cuda_cannot_read_keeps_to_the_entries_before_it(fake_nvml, tmp_path):
    """'-1' in the middle ends the list for CUDA: the kernel has GPU 2 alone (every visible was refused, as if it named
    a UUID no GPU has). GPU 2 is full of another user's job: plain auto takes it all the same and says why."""
    config = four_gpus()
    config["gpus"][2].update(memory_used=16000 * MIB, processes=[{"pid": 3999931, "used": 15000 * MIB}])
    fake_nvml.write(config)
    kernel = Kernel(user_env(**fake_nvml.env, CUDA_VISIBLE_DEVICES="2,-1,3"), str(tmp_path))
    try:
        kernel.run("%load_ext tfgpu_magic")
        out, reply = kernel.run("%tfgpu status")
        assert reply["status"] == "ok", reply
        assert "GPUs 0, 1 and 3 are not available to this kernel: it was given GPU 2 (CUDA_VISIBLE_DEVICES=2,-1,3 " \
               "when this kernel started; CUDA stops reading it at '-1'" in " ".join(out.split()), out
        _, reply = kernel.run("%tfgpu visible 3")
        assert reply["status"] == "error" and "GPU 3 was not given to this kernel: it may use GPU 2" in reply["evalue"]
        out, reply = kernel.run("%tfgpu visible auto")
        assert reply["status"] == "ok" and kernel.run(SHOW)[0].strip() == "2", (out, reply)
        assert "auto chose GPU 2; none qualified (no other process computing on it and at least half its memory " \
               "free), so it took the freest: GPU 2 has 0.1 GiB free of 16.0 GiB (pid 3999931 computes there)" \
               in " ".join(out.split()), out
    finally:
        kernel.close()


# -- waiting for a free GPU ----------------------------------------------------------------------------------
def busy_gpus(free_gib: dict[int, float] | None = None) -> dict:
    """Four 40 GiB GPUs, each with 1 GiB free unless ``free_gib`` says otherwise."""
    config = four_gpus()
    for k, gpu in enumerate(config["gpus"]):
        gpu["memory_total"] = 40960 * MIB
        gpu["memory_reserved"] = 0
        gpu["memory_used"] = int((40 - (free_gib or {}).get(k, 1.0)) * 1024) * MIB
    return config


WAIT = "%tfgpu visible auto --min-free 20GB --wait {}"
SHOW = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"


def waiting_kernel(fake_nvml, tmp_path, name: str = "k") -> Kernel:
    folder = tmp_path / name
    folder.mkdir()
    env = user_env(**{**fake_nvml.env, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")})
    kernel = Kernel(env, str(folder))
    kernel.run("%load_ext tfgpu_magic")
    return kernel


def run_timed(kernel: Kernel, source: str) -> tuple[float, dict, list[tuple[float, str]]]:
    """Run a cell; (seconds, reply content, [(seconds since start, text) of each output, updates included])."""
    outputs: list[tuple[float, str]] = []
    started = time.monotonic()

    def hook(msg):
        content = msg["content"]
        if msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            outputs.append((time.monotonic() - started, content["data"].get("text/plain", "")))
        elif msg["msg_type"] == "stream":
            outputs.append((time.monotonic() - started, content["text"]))

    reply = kernel.client.execute_interactive(source, timeout=180, output_hook=hook)
    return time.monotonic() - started, reply["content"], outputs


def later(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()), daemon=True)
    thread.start()
    return thread


def test_a_wait_takes_the_gpu_freed_while_it_waits_and_shows_its_progress(fake_nvml, tmp_path):
    fake_nvml.write(busy_gpus())
    kernel = waiting_kernel(fake_nvml, tmp_path)
    try:
        freed_at = 3.0
        later(freed_at, lambda: fake_nvml.write(busy_gpus({2: 30})))
        took, reply, outputs = run_timed(kernel, WAIT.format("30s"))
        assert reply["status"] == "ok", reply
        assert 3 <= took <= 10, took
        assert kernel.run(SHOW)[0].strip() == "2"
        progress = [(t, text) for t, text in outputs if text.startswith("tfgpu: waiting for a GPU with 20GiB free")]
        assert progress and progress[0][0] < freed_at, outputs
        assert "GPU 0 has 1.0 GiB free, GPU 1 has 1.0 GiB free, GPU 2 has 1.0 GiB free" in progress[0][1]
        assert any("applied when TensorFlow is imported" in text for _, text in outputs), outputs
    finally:
        kernel.close()


def test_a_wait_that_times_out_or_is_interrupted_changes_nothing(fake_nvml, tmp_path):
    fake_nvml.write(busy_gpus())
    kernel = waiting_kernel(fake_nvml, tmp_path)
    try:
        kernel.run("%tfgpu growth on")
        before = kernel.run("%tfgpu export")[0]
        took, reply, _ = run_timed(kernel, WAIT.format("3s"))
        assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
        assert 2.5 <= took <= 6, took
        assert reply["evalue"].startswith("tfgpu: `%tfgpu visible auto --min-free 20GB --wait 3s`: nothing qualified "
                                          "within 3 s (waiting for a GPU with 20GiB free and no other process "
                                          "computing on it: GPU 0 has 1.0 GiB free")
        assert "\n" not in reply["evalue"] and reply["evalue"].endswith("nothing changed; wait longer, ask for less, "
                                                                       "or name a GPU")
        assert kernel.run("%tfgpu export")[0] == before and kernel.run(SHOW)[0].strip() == "None"

        later(3.0, lambda: kernel.manager.interrupt_kernel())
        took, reply, _ = run_timed(kernel, WAIT.format("120s"))
        assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
        assert took < 5, took
        assert reply["evalue"].startswith("tfgpu: `%tfgpu visible auto --min-free 20GB --wait 120s`: interrupted "
                                          "after 3 s; nothing changed"), reply["evalue"]
        assert kernel.run("%tfgpu export")[0] == before and kernel.run(SHOW)[0].strip() == "None"
    finally:
        kernel.close()


def test_two_waiting_kernels_never_take_the_same_gpu(fake_nvml, tmp_path):
    fake_nvml.write(busy_gpus())
    kernels = [waiting_kernel(fake_nvml, tmp_path, name) for name in ("a", "b")]
    try:
        waits = [k.client.execute(WAIT.format("60s")) for k in kernels]
        time.sleep(2)
        fake_nvml.write(busy_gpus({1: 30}))
        replies = {}
        deadline = time.monotonic() + 15
        while len(replies) < 1 and time.monotonic() < deadline:
            for k, kernel in enumerate(kernels):
                try:
                    msg = kernel.client.get_shell_msg(timeout=0.2)
                except queue.Empty:  # still waiting
                    continue
                if msg["parent_header"].get("msg_id") == waits[k]:
                    replies[k] = msg["content"]
        assert len(replies) == 1, replies  # exactly one took GPU 1
        (first, reply), = replies.items()
        assert reply["status"] == "ok", reply
        time.sleep(3)  # the other is still waiting: it does not take the GPU the first one claimed
        other = 1 - first
        with pytest.raises(queue.Empty):
            kernels[other].client.get_shell_msg(timeout=0.5)
        fake_nvml.write(busy_gpus({1: 30, 3: 25}))
        reply = kernels[other].client.get_shell_msg(timeout=15)
        assert reply["parent_header"]["msg_id"] == waits[other] and reply["content"]["status"] == "ok", reply
        assert kernels[first].run(SHOW)[0].strip() == "1"
        assert kernels[other].run(SHOW)[0].strip() == "3"
        # Neither allocated (no TensorFlow here): each sees the other's claim, and its own
        out = " ".join(kernels[other].run("%tfgpu devices")[0].split())
        # (a kernel started by jupyter_client alone has no kernel-ID.json connection file: it is named by its pid)
        assert re.search(r"GPU 1: claimed by pid \d+, waiting for it to allocate", out), out
        assert "GPU 3: claimed by this kernel until TensorFlow allocates there" in out, out
    finally:
        for kernel in kernels:
            kernel.close()


# -- MIG devices ---------------------------------------------------------------------------------------------
def test_mig_devices_are_listed_chosen_by_uuid_and_auto_never_takes_their_parent(fake_nvml, tmp_path):
    from fakenvml import mig_config

    fake_nvml.write(mig_config())  # GPU 0: an A100 in MIG mode (3g.20gb, 2g.10gb); GPU 1: a T4 with 15 GiB free
    kernel = waiting_kernel(fake_nvml, tmp_path)
    try:
        out = kernel.run("%tfgpu devices")[0]
        rows = {line.split()[0]: " ".join(line.split()) for line in out.splitlines() if line.strip()[:1].isdigit()}
        assert "NVIDIA A100-SXM4-40GB (MIG mode)" in rows["0"], out
        assert rows["0/0"].startswith("0/0 - MIG 3g.20gb MIG-5e8b0c1a 1024 / 19968 MiB"), out
        assert rows["0/1"].startswith("0/1 - MIG 2g.10gb MIG-9d2c4e6f 512 / 9728 MiB"), out
        data = json.loads(kernel.run("import json, tfgpu_magic\n"
                                     "print(json.dumps(tfgpu_magic.snapshot().to_dict()))")[0])
        migs = data["gpus"][0]["mig_devices"]
        assert [(m["profile"], m["memory_total_mib"], m["memory_used_mib"]) for m in migs] == [
            ("3g.20gb", 19968, 1024), ("2g.10gb", 9728, 512)]
        assert data["gpus"][1]["mig_devices"] == [] and data["gpus"][0]["mig_mode"] is True

        kernel.run("%tfgpu visible MIG-9d2c")  # a unique prefix
        assert kernel.run(SHOW)[0].strip() == "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f"
        # The parent has the most free memory (39 GiB) but is no CUDA device in MIG mode: the freest MIG device
        # (18.5 GiB) beats the T4 (15 GiB)
        kernel.run("%tfgpu visible auto")
        assert kernel.run(SHOW)[0].strip() == "MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d"
        _, reply = kernel.run("%tfgpu visible auto:2")  # one MIG device per process: only whole GPUs combine
        assert reply["status"] == "error" and "needs 2 GPUs" in reply["evalue"], reply
        assert "MIG" not in reply["evalue"].split("qualify now")[1], reply["evalue"]
        _, reply = kernel.run("%tfgpu visible MIG-5e8b0c1a,MIG-9d2c4e6f")
        assert reply["status"] == "error" and "uses one MIG device" in reply["evalue"], reply
        _, reply = kernel.run("%tfgpu visible MIG-0000")
        assert reply["status"] == "error" and reply["evalue"].splitlines()[:2] == [
            "tfgpu: MIG-0000 matches no MIG device NVML lists; choose one:",
            "  %tfgpu visible MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d  3g.20gb, 18,944 of 19,968 MiB free"], reply
    finally:
        kernel.close()


def test_a_kernel_given_one_mig_device_may_use_it_alone(fake_nvml, tmp_path):
    from fakenvml import mig_config

    fake_nvml.write(mig_config())
    env = user_env(**{**fake_nvml.env, "CUDA_VISIBLE_DEVICES": "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f"})
    kernel = Kernel(env, str(tmp_path))
    try:
        kernel.run("%load_ext tfgpu_magic")
        _, reply = kernel.run("%tfgpu visible 1")
        assert reply["status"] == "error" and "it may use MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f" in reply["evalue"]
        _, reply = kernel.run("%tfgpu visible MIG-5e8b")
        assert reply["status"] == "error" and "was not given to this kernel" in reply["evalue"], reply
        kernel.run("%tfgpu visible auto")
        assert kernel.run(SHOW)[0].strip() == "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f"
    finally:
        kernel.close()
