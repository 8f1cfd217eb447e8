"""The metrics answer at hub scale, in each detail mode, against the same server's /api/status in the same run.

A real ``jupyter lab`` on loopback (tests/support/labsession.Lab) whose NVML is the fake library with 8 GPUs x 64
processes, 50 of them kernels of this server (one per notebook) and the rest other processes; started three times,
once per ``TfgpuServer.metrics_detail`` (process, kernel, notebook). For each:

- **a scrape as Prometheus makes it**: ``tfgpu/api/metrics`` asked once every 1.05 s (past the one rendered text
  that scrapers share for a second), so each answer is a new NVML reading, a new document and a new text; the
  median of ``--scrapes``, against the median of as many ``/api/status`` answers asked the same way;
- **a shared text**: ``--rounds`` requests in a row, which (but the first) get the text already rendered;
- the text's size and its number of series.

Serial requests on one keep-alive connection; the client shares the 2 cores with the server, as both endpoints do.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from bench_sidebar_api import _kernel_pids  # noqa: E402  (this folder: the script's own)
from fakenvml import MIB, build_fake_nvml, fake_env, n_gpus, write_config  # noqa: E402
from labsession import Lab  # noqa: E402

GPUS, PROCS, KERNELS = 8, 64, 50
DETAILS = ("process", "kernel", "notebook")


class Client:
    def __init__(self, lab: Lab):
        self.connection = http.client.HTTPConnection("127.0.0.1", lab.port, timeout=60)
        self.headers = {"Authorization": f"token {lab.token}"}

    def get(self, path: str) -> tuple[float, bytes]:
        start = time.perf_counter()
        self.connection.request("GET", path, headers=self.headers)
        answer = self.connection.getresponse()
        body = answer.read()
        elapsed = time.perf_counter() - start
        assert answer.status == 200, (path, answer.status, body[:200])
        return elapsed, body

    def median_ms(self, path: str, rounds: int, pause: float = 0.0) -> float:
        times = []
        for _ in range(rounds):
            if pause:
                time.sleep(pause)
            times.append(self.get(path)[0])
        return statistics.median(times) * 1000



def run(detail: str, scrapes: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        lib = build_fake_nvml(tmp)
        config_path = Path(tmp) / "fake_nvml.cfg"
        config = n_gpus(GPUS, PROCS)
        write_config(config_path, config)
        args = [f"--TfgpuServer.metrics_detail={detail}", "--TfgpuServer.history_interval=0"]
        with Lab(extra_env=fake_env(lib.parent, config_path, base={}), extra_args=args, start_timeout=180) as lab:
            for k in range(KERNELS):
                name = f"work/notebook-{k}.ipynb"
                lab.api("POST", "/api/sessions",
                        {"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}})
            client = Client(lab)
            deadline = time.monotonic() + 120
            while True:  # a kernel that died at start comes back with another pid: hold its memory again
                for k, pid in enumerate(_kernel_pids(lab, KERNELS)):  # after the first two rows of each GPU
                    config["gpus"][k % GPUS]["processes"][2 + k // GPUS] = {"pid": pid, "used": 4096 * MIB + k}
                write_config(config_path, config)
                time.sleep(1.1)
                _, text = client.get("/tfgpu/api/metrics")
                lines = [line for line in text.decode().splitlines() if line and not line.startswith("#")]
                held = sum(1 for line in lines if line.startswith("tfgpu_kernel_gpu_memory_used_bytes"))
                if held >= KERNELS:
                    break
                assert time.monotonic() < deadline, f"{held} kernel series: the kernels' memory was not matched"
            status_cold = client.median_ms("/api/status", scrapes, pause=1.05)
            metrics_cold = client.median_ms("/tfgpu/api/metrics", scrapes, pause=1.05)
            status_warm = client.median_ms("/api/status", rounds)
            metrics_warm = client.median_ms("/tfgpu/api/metrics", rounds)
    return {"detail": detail, "series": len(lines), "kernel_series": held, "bytes": len(text),
            "status_cold_ms": status_cold, "metrics_cold_ms": metrics_cold, "status_warm_ms": status_warm,
            "metrics_warm_ms": metrics_warm}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=30, help="scrapes 1.05 s apart per endpoint (30)")
    parser.add_argument("--rounds", type=int, default=300, help="requests in a row per endpoint (300)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    results = [run(detail, args.scrapes, args.rounds) for detail in DETAILS]
    print(f"{GPUS} GPUs x {PROCS} processes, {KERNELS} of them kernels of this server, one notebook each\n")
    print("| `metrics_detail` | series | text | a scrape 1.05 s apart (new reading) | `/api/status` the same way "
          "| ratio | in a row (shared text) | `/api/status` in a row | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['detail']} | {r['series']} ({r['kernel_series']} kernel) | {r['bytes'] / 1024:.0f} KiB | "
              f"{r['metrics_cold_ms']:.1f} ms | {r['status_cold_ms']:.2f} ms | "
              f"{r['metrics_cold_ms'] / r['status_cold_ms']:.1f}x | {r['metrics_warm_ms']:.2f} ms | "
              f"{r['status_warm_ms']:.2f} ms | {r['metrics_warm_ms'] / r['status_warm_ms']:.1f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
