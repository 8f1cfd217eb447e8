"""The server's GPU endpoints under load, against the same server's bare /api/status in the same run.

Four parts, each against a baseline measured in the same run:
1. **HTTP load.** A real ``jupyter lab`` (tests/support/labsession.Lab) on loopback whose NVML is the fake
   library. 20 clients, each on its own keep-alive connection, ask as fast as answers come for ``--seconds`` per
   endpoint (the baseline first); reported: requests per second, p50, p99, errors, and the rate as a share of the
   baseline's. Goal: at least half of /api/status's rate, zero errors. Cases: 8 GPUs x 4 processes with two
   kernels, by default (requests within 0.5 s share one answer) and with ``--TfgpuServer.snapshot_max_age=0``
   (no finished answer reused); the large case, 8 GPUs x 64 processes with 50 kernels, ``snapshot_max_age`` 0;
   and the large case with 5 scrapers on ``tfgpu/api/metrics`` beside the 20 clients on ``gpus``.
2. **One answer's cost** (matching 8 GPUs x 1..64 real processes to 50 kernels, and the JSON), in this process,
   against the per-process parent walk the server did before (every process's chain read again, no memo).
   Goal: 3 ms at 8 x 64.
3. **The sampler when idle**: the server's CPU over 30 s with nobody asking, sampling every 2 s (the default)
   against the same server with sampling off. Goal: under 0.5% of a core.
4. **The history's memory**: bytes per sample and for an hour at 2 s, 8 GPUs (tracemalloc).
5. **In a container** (root only: ``unshare --pid``). (a) One answer's cost at 8 GPUs x 64 processes and 50 kernels,
   in one process, run once in the host's PID namespace and once inside ``unshare --pid --fork --mount-proc`` in the
   same run: the reading's per-process identification (pidns), the kernels' 50 reports read (every answer, the worst
   case, and at most once a second as the server does) and the join, against the host's parent walk. Goal: at most
   10% more in the namespace. (b) A real server with 50 real kernels, each with 3 live children (process trees),
   the fake NVML listing 8 x 64 host PIDs (the kernels', their children's, others'): the median of 300 serial
   ``/tfgpu/api/gpus`` answers (``snapshot_max_age`` 0: each made anew) against 300 ``/api/status`` answers of the
   same server, on the host and in a PID namespace (the kernels' reports in its runtime folder). Goal: at most 10
   times ``/api/status``, in both.

The clients run in one asyncio loop in this process, on the same 2 cores as the server: both endpoints pay
that the same way, so the ratio is what compares.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
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


async def _load(port: int, path: str, token: str, seconds: float, clients: int = CLIENTS,
                beside: tuple[str, int] | None = None) -> dict:
    """``clients`` on ``path`` for ``seconds``; ``beside`` (path, n): n more clients on another path meanwhile,
    reported under "beside"."""
    start = time.monotonic()
    until = start + seconds
    runs = [(path, clients, [], [])]
    if beside is not None:
        runs.append((beside[0], beside[1], [], []))
    await asyncio.gather(*(_client("127.0.0.1", port, p, token, until, lat, err)
                           for p, n, lat, err in runs for _ in range(n)))
    elapsed = time.monotonic() - start
    out = _figures(runs[0], elapsed)
    if beside is not None:
        out["beside"] = _figures(runs[1], elapsed)
    return out


def _figures(run_: tuple, elapsed: float) -> dict:
    path, clients, latencies, errors = run_
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    return {"path": path, "clients": clients, "requests": len(latencies), "seconds": round(elapsed, 2),
            "rps": len(latencies) / elapsed, "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "mean_ms": statistics.fmean(ordered) * 1000 if ordered else float("nan"),
            "errors": len(errors), "first_errors": errors[:3]}


def run(seconds: float, max_age: float | None = None, *, gpus: int = GPUS, procs: int = PROCS, kernels: int = 2,
        scrapers: int = 0) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-sidebar-") as tmp:
        lib = build_fake_nvml(tmp)
        config_path = Path(tmp) / "fake_nvml.cfg"
        config = n_gpus(gpus, procs)
        write_config(config_path, config)
        args = [] if max_age is None else [f"--TfgpuServer.snapshot_max_age={max_age}"]
        with Lab(extra_env=fake_env(lib.parent, config_path, base={}), extra_args=args, start_timeout=180) as lab:
            for k in range(kernels):
                name = f"notebook-{k}.ipynb"
                lab.api("POST", "/api/sessions",
                        {"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}})
            pids = _kernel_pids(lab, kernels)
            # Kernels take the GPUs' processes round-robin after the first two (this server, pid 1): each answer
            # maps them to notebooks, as in real use.
            for k, pid in enumerate(pids):
                gpu = config["gpus"][k % gpus]
                slot = 2 + k // gpus if procs > 2 else 0
                gpu["processes"][min(slot, procs - 1)] = {"pid": pid, "used": 4096 * MIB}
            write_config(config_path, config)
            time.sleep(1)  # past the server's shared answer (TfgpuServer.snapshot_max_age, 0.5 s by default)
            check = lab.api("GET", "/tfgpu/api/gpus")
            processes = [p for g in check["gpus"] for p in g["processes"]]
            mapped = sum(1 for p in processes if p["kernel"])
            assert len(check["gpus"]) == gpus and len(processes) == gpus * procs and mapped == len(pids), check
            size = len(json.dumps(check))
            status = asyncio.run(_load(lab.port, "/api/status", lab.token, seconds))
            beside = ("/tfgpu/api/metrics", scrapers) if scrapers else None
            endpoint = asyncio.run(_load(lab.port, "/tfgpu/api/gpus", lab.token, seconds, beside=beside))
    return {"max_age": max_age, "gpus": gpus, "processes": gpus * procs, "kernels_mapped": mapped, "clients": CLIENTS,
            "scrapers": scrapers, "seconds": seconds, "response_bytes": size, "status": status, "endpoint": endpoint,
            "ratio": endpoint["rps"] / status["rps"] if status["rps"] else float("nan")}


def _kernel_pids(lab: Lab, count: int, timeout: float = 180) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [k["pid"] for k in lab.api("GET", "/tfgpu/api/gpus")["kernels"] if k["pid"]]
        if len(pids) == count:
            return pids
        time.sleep(0.5)
    raise RuntimeError(f"{count} kernels did not all start")


def report(r: dict) -> None:
    shared = ("no answer reused once made (snapshot_max_age 0; requests share only one under way)"
              if r["max_age"] == 0 else "answers shared within snapshot_max_age (the default, 0.5 s)")
    more = f", {r['scrapers']} scrapers on /tfgpu/api/metrics beside them" if r["scrapers"] else ""
    print(f"{shared}: {r['clients']} clients{more}, {r['seconds']:.0f} s per endpoint, {r['gpus']} fake GPUs, "
          f"{r['processes']} processes ({r['kernels_mapped']} of them kernels mapped to notebooks), "
          f"answer {r['response_bytes']:,} B\n")
    print("| endpoint | requests/s | p50 | p99 | errors |")
    print("|---|---:|---:|---:|---:|")
    rows = [(r["status"], "`/api/status` (baseline)"), (r["endpoint"], "`/tfgpu/api/gpus`")]
    if "beside" in r["endpoint"]:
        rows.append((r["endpoint"]["beside"], "`/tfgpu/api/metrics` (beside)"))
    for m, label in rows:
        print(f"| {label} | {m['rps']:.0f} | {m['p50_ms']:.1f} ms | {m['p99_ms']:.1f} ms | {m['errors']} |")
    goal = "met" if r["ratio"] >= 0.5 and r["endpoint"]["errors"] == 0 else "NOT met"
    print(f"\nThe GPU endpoint's rate is {r['ratio']:.0%} of /api/status's (goal: at least 50%, 0 errors: {goal}).")
    for m, label in rows:
        if m["first_errors"]:
            print(f"{label} errors: {m['first_errors']}")


# ---- 2. one answer's cost ----------------------------------------------------------------------------------------


def _old_parent(pid: int) -> int | None:
    """The parent read as the server read it before (open() per call)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[1]) if len(fields) > 1 else None


def _old_match(snap: dict, kernels: list[dict]) -> int:
    """The baseline: every process's parent chain walked again, no memo (what one answer cost before)."""
    by_pid = {k["pid"]: k for k in kernels}
    found = 0
    for gpu in snap["gpus"]:
        for proc in gpu["processes"]:
            current, seen = proc["pid"], set()
            for _ in range(64):
                if current in by_pid:
                    found += 1
                    break
                seen.add(current)
                current = _old_parent(current)
                if current is None or current <= 1 or current in seen:
                    break
    return found


def answer_cost(rounds: int = 200) -> list[dict]:
    """One answer (matching, JSON) at 8 GPUs x 1..64 real processes: 50 shells standing in for kernels, each with
    9 children, and other processes of the machine (pid 1, this process, PIDs that do not exist)."""
    from tfgpu_magic.server.feed import encode
    from tfgpu_magic.server.gpus import ParentCache, gpu_document

    shells = [subprocess.Popen(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9; do sleep 600 & done; wait"])
              for _ in range(50)]
    try:
        time.sleep(1.0)
        kernels, pool = [], []
        for k, shell in enumerate(shells):
            kernels.append({"id": f"kernel-{k}", "name": "python3", "pid": shell.pid, "execution_state": "idle",
                            "last_activity": time.time() - 60,
                            "sessions": [{"path": f"work/notebook-{k}.ipynb", "name": f"notebook-{k}.ipynb",
                                          "type": "notebook"}]})
            pool += [shell.pid, *_children(shell.pid)]
        pool += [1, os.getpid(), os.getppid(), *(3900000 + i for i in range(16))]
        results = []
        for per_gpu in (1, 4, 16, 64):
            chosen = pool[:: max(1, len(pool) // (8 * per_gpu))][: 8 * per_gpu]
            snap = {"available": True, "taken_at": time.time(), "gpus": [
                {"index": g, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{g}", "memory_total_mib": 81920,
                 "memory_used_mib": 20000, "processes": [
                     {"pid": pid, "used_mib": 256, "name": None if pid >= 3900000 else "python",
                      "user": None if pid >= 3900000 else "ann", "is_self": False}
                     for pid in chosen[g * per_gpu:(g + 1) * per_gpu]]} for g in range(8)]}
            parents = ParentCache()
            gpu_document(snap, kernels, user="ann", parent_of=parents)  # a server's steady state: parents known

            def new() -> None:
                encode(gpu_document(snap, kernels, user="ann", parent_of=parents))  # noqa: B023

            def first() -> None:
                encode(gpu_document(snap, kernels, user="ann"))  # noqa: B023 (memo within the reading only)

            def old() -> None:
                _old_match(snap, kernels)  # noqa: B023
                json.dumps(snap)  # noqa: B023

            results.append({"per_gpu": per_gpu, "processes": 8 * per_gpu, "kernels": len(kernels),
                            "new_ms": _median_ms(new, rounds), "first_ms": _median_ms(first, rounds),
                            "old_ms": _median_ms(old, rounds)})
        return results
    finally:
        for shell in shells:
            shell.kill()
        subprocess.run(["pkill", "-f", "^sleep 600$"], check=False)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


def _median_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


# ---- 3. the sampler when idle, 4. the history's memory --------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def sampler_cpu(seconds: float = 30.0) -> dict:
    """The server's CPU share over ``seconds`` with nobody asking: sampling every 2 s, then sampling off."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as tmp:
        lib = build_fake_nvml(tmp)
        config_path = write_config(Path(tmp) / "fake_nvml.cfg", n_gpus(GPUS, PROCS))
        for label, args in (("sampling", []), ("off", ["--TfgpuServer.history_interval=0"])):
            with Lab(extra_env=fake_env(lib.parent, config_path, base={}), extra_args=args) as lab:
                time.sleep(5)  # past start-up
                before = _cpu_seconds(lab.server.pid)
                time.sleep(seconds)
                out[label] = (_cpu_seconds(lab.server.pid) - before) / seconds * 100
                if label == "sampling":
                    out["samples"] = len(lab.api("GET", f"/tfgpu/api/gpus?history={seconds + 10}")
                                         ["history"]["gpus"]["0"]["t"])
    out["sampler"] = out["sampling"] - out["off"]
    out["seconds"] = seconds
    return out


def history_memory() -> dict:
    import tracemalloc

    from tfgpu_magic.server.history import History

    reading = {"gpus": [{"index": i, "memory_used_mib": 1000 + i, "utilization_gpu_pct": 50 + i,
                         "memory_total_mib": 81920} for i in range(GPUS)]}
    history = History(2.0, 3600.0)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for k in range(1800):
        reading = {"gpus": [{**g, "memory_used_mib": 1000 + (k * 7 + i) % 5000} for i, g in enumerate(reading["gpus"])]}
        history.add(1000.0 + 2 * k, reading)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {"samples": len(history), "gpus": GPUS, "bytes": used, "per_sample": used / len(history)}


# ---- 5. in a container -----------------------------------------------------------------------------------------

_CONTAINER_CHILD = r"""
import json, os, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from bench_sidebar_api import _children, _median_ms
from tfgpu_magic.core import pidns
from tfgpu_magic.core.reports import Report, ReportReader
from tfgpu_magic.server.feed import encode
from tfgpu_magic.server.gpus import ParentCache, checked_reports, gpu_document

view = pidns.view()
shells = [subprocess.Popen(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9; do sleep 600 & done; wait"]) for _ in range(50)]
try:
    time.sleep(1.0)
    kernels, pool = [], []
    for k, shell in enumerate(shells):
        kernels.append({"id": f"kernel-{k}", "name": "python3", "pid": shell.pid, "execution_state": "idle",
                        "last_activity": time.time() - 60, "sessions": [{"path": f"work/notebook-{k}.ipynb",
                                                                        "name": f"notebook-{k}.ipynb",
                                                                        "type": "notebook"}]})
        pool += [shell.pid, *_children(shell.pid)]
    pool += [1, os.getpid(), *(3900000 + i for i in range(16))]
    chosen = pool[:: max(1, len(pool) // 512)][:512]
    # Host PIDs as NVML would list them: on the host the same numbers; in the namespace, made-up host numbers
    # (nothing here can know the real ones), the kernels' told by their reports.
    host_of = {pid: pid if view.comparable else 4000000 + pid for pid in pool}
    if view.mode == "host_proc":  # the real host numbers, as the host /proc maps them
        mine = os.stat("/proc/self/ns/pid").st_ino
        for entry in os.listdir(view.host_proc):
            if entry.isdigit():
                try:
                    with open(f"{view.host_proc}/{entry}/status") as f:
                        nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
                    if len(nspid) > 1 and os.stat(f"{view.host_proc}/{entry}/ns/pid").st_ino == mine:
                        host_of[int(nspid[-1])] = int(nspid[0])
                except (OSError, StopIteration):
                    pass
    folder = tempfile.mkdtemp(prefix="bench-reports-")
    reports_dir = os.path.join(folder, "tfgpu-kernels")
    os.mkdir(reports_dir, 0o700)
    for k in kernels:
        report = Report(k["id"], k["pid"], k["sessions"][0]["path"], host_of[k["pid"]], "handshake", "", ("GPU-0",),
                        {"GPU-0": {"current": 1 << 30, "peak": 1 << 30}}, time.time())
        with open(os.path.join(reports_dir, k["id"] + ".json"), "w") as f:
            json.dump(report.to_dict(), f)
    parents = ParentCache()

    def reading():
        now = time.monotonic()
        gpus = []
        for g in range(8):
            procs = []
            for pid in chosen[g * 64:(g + 1) * 64]:
                host = host_of.get(pid, pid)
                who = view.identify(host, now)
                procs.append({"pid": host, "used_mib": 256, "name": who.name, "user": who.user, "is_self": False,
                              "type": "C", "local_pid": who.local_pid})
            gpus.append({"index": g, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{g}", "memory_total_mib": 81920,
                         "memory_used_mib": 20000, "processes": procs})
        return {"available": True, "taken_at": time.time(), "pids": None if view.comparable else view.to_dict(),
                "gpus": gpus}

    def answer(reader):
        snap = reading()
        checked = checked_reports(reader, snap, kernels)  # as the server: no report read through a host /proc
        return encode(gpu_document(snap, kernels, user="ann", parent_of=parents, reports=checked))

    every = ReportReader(__import__("pathlib").Path(reports_dir), max_age=0)
    steady = ReportReader(__import__("pathlib").Path(reports_dir), max_age=1.0)
    answer(every)
    document = json.loads(answer(every))
    mapped = sum(1 for g in document["gpus"] for p in g["processes"] if p["kernel"])
    rounds = int(sys.argv[2])
    print(json.dumps({"view": view.mode, "mapped": mapped, "unattributed": sum(
        (g["unattributed"] or {}).get("count", 0) for g in document["gpus"]),
        "every_ms": _median_ms(lambda: answer(every), rounds),
        "steady_ms": _median_ms(lambda: answer(steady), rounds)}))
finally:
    for shell in shells:
        shell.kill()
    subprocess.run(["pkill", "-f", "^sleep 600$"], check=False)
"""


def container_answer_cost(rounds: int = 100, repeats: int = 3) -> dict:
    """5a: one answer's cost on the host and inside a PID namespace, each in a child of its own, the same run: the
    three children run in turn ``repeats`` times (this machine's speed drifts within a minute), and each figure is
    the median of their medians."""
    namespace = ["unshare", "--pid", "--fork", "--mount-proc"]
    hostproc = tempfile.mkdtemp(prefix="bench-hostproc-")
    # A mount namespace of its own first: the host /proc's bind mount goes with the child.
    with_host_proc = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                      'mount --bind /proc "$0" && exec "$@"', hostproc, *namespace]
    runs: dict[str, list[dict]] = {"host": [], "namespace": [], "host_proc": []}
    for _ in range(repeats):
        for label, prefix in (("host", []), ("namespace", namespace), ("host_proc", with_host_proc)):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            if label == "host_proc":
                env["TFGPU_HOST_PROC"] = hostproc
            done = subprocess.run([*prefix, sys.executable, "-c", _CONTAINER_CHILD, str(Path(__file__).parent),
                                   str(rounds)], capture_output=True, text=True, env=env, timeout=900)
            if done.returncode != 0:
                raise RuntimeError(f"the {label} child failed:\n{done.stderr[-3000:]}")
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    os.rmdir(hostproc)
    out: dict = {}
    for label, results in runs.items():
        out[label] = {**results[-1], "every_ms": statistics.median(r["every_ms"] for r in results),
                      "steady_ms": statistics.median(r["steady_ms"] for r in results),
                      "runs": [(round(r["every_ms"], 2), round(r["steady_ms"], 2)) for r in results]}
    for label in ("namespace", "host_proc"):
        out[f"{label}_every"] = out[label]["every_ms"] / out["host"]["every_ms"]
        out[f"{label}_steady"] = out[label]["steady_ms"] / out["host"]["steady_ms"]
    return out


def _serial_ms(server, path: str, rounds: int) -> float:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {"Authorization": f"token {server.token}"}
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        answer.read()
        times.append(time.perf_counter() - start)
        assert answer.status == 200, answer.status
    connection.close()
    return statistics.median(times) * 1000


def serial_answers(rounds: int = 300, kernels: int = 50) -> dict:
    """5b: a real server on the host and in a PID namespace, 50 kernels with live children: one gpus answer against
    one /api/status answer, serial."""
    from container import ContainerServer

    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-container-") as tmp:
        lib = build_fake_nvml(tmp)
        config_path = Path(tmp) / "fake_nvml.cfg"
        write_config(config_path, n_gpus(GPUS, 1))
        for label, isolate, host_proc in (("host", False, False), ("namespace", True, False),
                                          ("host_proc", True, True)):
            with ContainerServer(fake_env(lib.parent, config_path, base={}), isolate=isolate, start_timeout=180,
                                 host_proc=host_proc,
                                 args=["--TfgpuServer.snapshot_max_age=0", "--TfgpuServer.history_interval=0"]
                                 ) as server:
                ids = [server.start_kernel(f"notebook-{k}.ipynb") for k in range(kernels)]
                local, children, died = {}, [], 0
                for kernel in ids:
                    pid = server.local_pid(kernel, timeout=300)
                    code = ("import subprocess\nkids = [subprocess.Popen(['sleep', '600']) for _ in range(3)]\n"
                            "print(' '.join(str(k.pid) for k in kids))")
                    try:
                        children += [int(p) for p in server.execute(kernel, code).split()]
                    except RuntimeError:  # a kernel that died at start (a port taken meanwhile): counted, left out
                        died += 1
                        continue
                    local[kernel] = pid
                host = {pid: server.host_pid(pid) if isolate else pid for pid in [*local.values(), *children]}
                reports = server.runtime / "tfgpu-kernels"
                reports.mkdir(mode=0o700, exist_ok=True)
                for kernel, pid in local.items():  # what each kernel's handshake would have written
                    (reports / f"{kernel}.json").write_text(json.dumps({
                        "schema": 1, "kernel_id": kernel, "pid": pid, "notebook": None, "host_pid": host[pid],
                        "how": "handshake", "note": "", "gpus": [], "tf_memory": {}, "written_at": 0.0}))
                listed = [host[p] for p in [*local.values(), *children]] + [1, *(3900000 + i for i in range(112))]
                config = n_gpus(GPUS, 64)
                for g, gpu in enumerate(config["gpus"]):
                    gpu["processes"] = [{"pid": pid, "used": 256 * MIB} for pid in listed[g * 64:(g + 1) * 64]]
                write_config(config_path, config)
                time.sleep(1.5)
                document = server.gpus()
                mapped = sum(1 for g in document["gpus"] for p in g["processes"] if p["kernel"])
                status = _serial_ms(server, "/api/status", rounds)
                gpus = _serial_ms(server, "/tfgpu/api/gpus", rounds)
                out[label] = {"status_ms": status, "gpus_ms": gpus, "ratio": gpus / status, "mapped": mapped,
                              "kernels": len(local), "died_at_start": died,
                              "unattributed": sum((g["unattributed"] or {}).get("count", 0)
                                                  for g in document["gpus"]),
                              "processes": sum(len(g["processes"]) for g in document["gpus"])}
                subprocess.run(["pkill", "-f", "^sleep 600$"], check=False)
    for label in ("namespace", "host_proc"):
        out[f"{label}_vs_host"] = out[label]["gpus_ms"] / out["host"]["gpus_ms"]
    return out


def report_container(a: dict, b: dict) -> None:
    print("| one answer, 8 GPUs x 64 processes, 50 kernels | host (baseline) | PID namespace, no host view | "
          "PID namespace, host /proc |")
    print("|---|---:|---:|---:|")
    for key, words in (("every", "reports read every answer (worst case)"),
                       ("steady", "reports read at most once a second (the server)")):
        print(f"| {words} | {a['host'][key + '_ms']:.2f} ms | {a['namespace'][key + '_ms']:.2f} ms "
              f"({a['namespace_' + key]:.0%}) | {a['host_proc'][key + '_ms']:.2f} ms ({a['host_proc_' + key]:.0%}) |")
    print(f"\n(kernel rows matched: host {a['host']['mapped']}; no host view {a['namespace']['mapped']} through "
          f"reports, {a['namespace']['unattributed']} unattributed; host /proc {a['host_proc']['mapped']})\n")
    print("| real server, 50 kernels with 3 children each, 8 x 64 | `/api/status` | `/tfgpu/api/gpus` "
          "| gpus / status | gpus vs the host's |")
    print("|---|---:|---:|---:|---:|")
    for label in ("host", "namespace", "host_proc"):
        r = b[label]
        versus = "1" if label == "host" else f"{b[label + '_vs_host']:.0%}"
        print(f"| {label} ({r['mapped']} rows matched, {r['unattributed']} unattributed) | {r['status_ms']:.2f} ms | "
              f"{r['gpus_ms']:.2f} ms | {r['ratio']:.1f}x | {versus} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="load per endpoint (30)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--only-container", action="store_true", help="part 5 only (root: unshare --pid)")
    args = parser.parse_args(argv)
    if args.only_container:
        results = {"container_answer": container_answer_cost(), "container_serial": serial_answers()}
        report_container(results["container_answer"], results["container_serial"])
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        return 0
    results = {"load": [run(args.seconds), run(args.seconds, max_age=0.0),
                        run(args.seconds, max_age=0.0, procs=64, kernels=50),
                        run(args.seconds, max_age=0.0, procs=64, kernels=50, scrapers=5)]}
    for result in results["load"]:
        report(result)
        print()
    results["answer"] = answer_cost()
    print("| processes per GPU (8 GPUs, 50 kernels) | one answer | first answer (no parents known) | "
          "per-process walk before (baseline) | answer / baseline |")
    print("|---:|---:|---:|---:|---:|")
    for a in results["answer"]:
        print(f"| {a['per_gpu']} ({a['processes']}) | {a['new_ms']:.2f} ms | {a['first_ms']:.2f} ms | "
              f"{a['old_ms']:.2f} ms | {a['new_ms'] / a['old_ms']:.0%} |")
    results["sampler"] = s = sampler_cpu()
    print(f"\nserver CPU over {s['seconds']:.0f} s idle: sampling every 2 s {s['sampling']:.3f}% of a core, sampling "
          f"off {s['off']:.3f}%: the sampler {s['sampler']:.3f}% ({s['samples']} samples kept)")
    results["history"] = h = history_memory()
    print(f"history: {h['per_sample']:.0f} B per sample of {h['gpus']} GPUs; an hour at 2 s ({h['samples']} samples) "
          f"{h['bytes'] / 1024:.0f} KiB")
    if os.geteuid() == 0:
        results["container_answer"] = container_answer_cost()
        results["container_serial"] = serial_answers()
        report_container(results["container_answer"], results["container_serial"])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["endpoint"]["errors"] == 0 for r in results["load"]) else 1


if __name__ == "__main__":
    sys.exit(main())
