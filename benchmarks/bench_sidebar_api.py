"""The sidebar's GPU endpoint under load, against the same server's bare /api/status in the same run.

A real ``jupyter lab`` (tests/labsession.Lab) on loopback whose NVML is the fake library with 8 GPUs and
32 processes; two of the processes are kernels this server started, so each answer does the full work:
NVML reading, the sessions query, PID matching, JSON. 20 clients, each on its own keep-alive connection,
ask as fast as answers come for ``--seconds`` per endpoint (the baseline first). Reported: requests per
second, p50, p99, errors, and the endpoint's rate as a share of the baseline's. Goal: at least half of
/api/status's rate, zero errors. Run twice: as configured by default (requests within 0.5 s share one answer),
and with ``--TfgpuServer.snapshot_max_age=0``, where no answer is reused once made: requests arriving while
one is being made (NVML read, kernels matched) wait for it, every later one makes a new one.

The clients run in one asyncio loop in this process, on the same 2 cores as the server: both endpoints pay
that the same way, so the ratio is what compares.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fakenvml import MIB, build_fake_nvml, fake_env, n_gpus, write_config  # noqa: E402
from labsession import Lab  # noqa: E402

GPUS, PROCS = 8, 4
CLIENTS = 20


async def _client(host: str, port: int, path: str, token: str, until: float, latencies: list[float],
                  errors: list[str]) -> None:
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: token {token}\r\n"
               "Connection: keep-alive\r\n\r\n").encode()
    reader = writer = None
    while time.monotonic() < until:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            start = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length, closing = 0, False
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "connection" and value.strip().lower() == "close":
                    closing = True
            body = await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            status = status_line.split()[1] if len(status_line.split()) > 1 else b"?"
            if status != b"200":
                errors.append(f"HTTP {status.decode()}: {body[:200]!r}")
            if closing:
                writer.close()
                writer = None
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            if writer is not None:
                writer.close()
            writer = None
    if writer is not None:
        writer.close()


async def _load(port: int, path: str, token: str, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.monotonic()
    until = start + seconds
    await asyncio.gather(*(_client("127.0.0.1", port, path, token, until, latencies, errors)
                           for _ in range(CLIENTS)))
    elapsed = time.monotonic() - start
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    return {"path": path, "requests": len(latencies), "seconds": round(elapsed, 2),
            "rps": len(latencies) / elapsed, "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "mean_ms": statistics.fmean(ordered) * 1000 if ordered else float("nan"),
            "errors": len(errors), "first_errors": errors[:3]}


def run(seconds: float, max_age: float | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-sidebar-") as tmp:
        lib = build_fake_nvml(tmp)
        config_path = Path(tmp) / "fake_nvml.cfg"
        config = n_gpus(GPUS, PROCS)
        write_config(config_path, config)
        args = [] if max_age is None else [f"--TfgpuServer.snapshot_max_age={max_age}"]
        with Lab(extra_env=fake_env(lib.parent, config_path, base={}), extra_args=args) as lab:
            kernels = []
            for name in ("train.ipynb", "eval.ipynb"):
                session = lab.api("POST", "/api/sessions",
                               {"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}})
                kernels.append(session["kernel"]["id"])
            pids = [p["pid"] for p in lab.api("GET", "/tfgpu/api/gpus")["kernels"]]
            # Two GPUs' first process is a kernel: the answer maps them to notebooks, as in real use.
            for gpu, pid in zip(config["gpus"], pids, strict=False):
                gpu["processes"][0] = {"pid": pid, "used": 4096 * MIB}
            write_config(config_path, config)
            time.sleep(1)  # past the server's shared answer (TfgpuServer.snapshot_max_age, 0.5 s by default)
            check = lab.api("GET", "/tfgpu/api/gpus")
            processes = [p for g in check["gpus"] for p in g["processes"]]
            mapped = sum(1 for p in processes if p["kernel"])
            assert len(check["gpus"]) == GPUS and len(processes) == GPUS * PROCS and mapped == len(pids), check
            size = len(json.dumps(check))
            status = asyncio.run(_load(lab.port, "/api/status", lab.token, seconds))
            gpus = asyncio.run(_load(lab.port, "/tfgpu/api/gpus", lab.token, seconds))
    return {"max_age": max_age, "gpus": GPUS, "processes": GPUS * PROCS, "kernels_mapped": mapped, "clients": CLIENTS,
            "seconds": seconds, "response_bytes": size, "status": status, "endpoint": gpus,
            "ratio": gpus["rps"] / status["rps"] if status["rps"] else float("nan")}


def report(r: dict) -> None:
    shared = ("no answer reused once made (snapshot_max_age 0; requests share only one under way)"
              if r["max_age"] == 0 else "answers shared within snapshot_max_age (the default, 0.5 s)")
    print(f"{shared}: {r['clients']} clients, {r['seconds']:.0f} s per endpoint, {r['gpus']} fake GPUs, "
          f"{r['processes']} processes ({r['kernels_mapped']} of them kernels mapped to notebooks), "
          f"answer {r['response_bytes']:,} B\n")
    print("| endpoint | requests/s | p50 | p99 | errors |")
    print("|---|---:|---:|---:|---:|")
    for key, label in (("status", "`/api/status` (baseline)"), ("endpoint", "`/tfgpu/api/gpus`")):
        m = r[key]
        print(f"| {label} | {m['rps']:.0f} | {m['p50_ms']:.1f} ms | {m['p99_ms']:.1f} ms | {m['errors']} |")
    goal = "met" if r["ratio"] >= 0.5 and r["endpoint"]["errors"] == 0 else "NOT met"
    print(f"\nThe GPU endpoint's rate is {r['ratio']:.0%} of /api/status's (goal: at least 50%, 0 errors: {goal}).")
    for key in ("status", "endpoint"):
        if r[key]["first_errors"]:
            print(f"{key} errors: {r[key]['first_errors']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="load per endpoint (30)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    # The default configuration, then no reuse of a finished answer.
    results = [run(args.seconds), run(args.seconds, max_age=0.0)]
    for result in results:
        report(result)
        print()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["endpoint"]["errors"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
