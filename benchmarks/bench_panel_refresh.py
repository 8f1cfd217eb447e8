"""What the live panel costs while the kernel is idle, and what it sends to the browser per refresh.

    python benchmarks/bench_panel_refresh.py [--seconds N] [--changes C] [--calls K] [--json PATH]

Builds the fake libnvidia-ml.so.1 (tests/support/fakenvml) in a temporary folder, describes 8 GPUs with 4 processes
each (this process, "self", on every GPU, so the "this kernel" figures are exercised too; then pid 1 and two
pids that do not exist) and re-runs itself with the fake first on LD_LIBRARY_PATH (glibc reads that only at
process start). In that child, with a real ``tfgpu_magic.Panel`` on a ``LiveModel`` (outside a kernel
ipywidgets gives each widget a dummy comm; every state update goes through ``Widget._send``, which is wrapped
to count messages and the bytes of ``json.dumps`` of each message's data, the envelope not included; the
dummy comm's ``comm_msg`` publications are counted too, as a cross-check):

1. Idle at 1 Hz: the refresher thread ("tfgpu-live") runs for N seconds (default 30) while the main thread
   sleeps. Its CPU time is read from its own CPU clock (``pthread_getcpuclockid``, ns) and, as a cross-check,
   from /proc/self/task/<tid>/stat (clock ticks); both as a percentage of one core over the wall time.
   Baseline, measured in the same run: the process's CPU time over N seconds with no panel, next to the
   same with the panel.
2. Nothing changed: a second model (refresher asleep: interval 3600 s, so only explicit calls sample) and
   panel; K calls (default 200) of ``model.refresh()`` with the fake's config untouched, each timed and
   followed by one bare ``tfgpu_magic.core.nvml.snapshot()``, timed too (taking turns, so a load spike hits both
   alike). Reports mean, p50 and p99 of each, their ratios, and the comm messages and bytes per refresh.
3. One GPU changed: C times (default 20), the config is rewritten with one GPU's memory_used and
   utilization_gpu changed (the fake re-reads its file when inode, size or mtime differ; write_config
   replaces the file, so the inode does; the benchmark waits until the stat differs), then one
   ``model.refresh()``: messages and bytes per refresh, and which widgets got them. By then the model's history
   holds more points than the chart draws (live_html.CHART_POINTS, with the default K), so the chart's message
   has the size it keeps in a long session.

Prints the figures against their goals as a markdown table. The exit status reflects errors only, never timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

from fakenvml import MIB, build_fake_nvml, fake_env, n_gpus, with_changes, write_config  # noqa: E402

CHILD_FLAG = "_TFGPU_BENCH_PANEL_CHILD"
GPUS, PROCS = 8, 4
THREAD_NAME = "tfgpu-live"
GOAL_CPU_PCT = 1.0
EXPECTED_ON_CHANGE = {"memory", "chart"}


# ---- counting comm messages ----------------------------------------------------------------------------
class Messages:
    """Counts what ipywidgets sends: every ``Widget._send`` call (state updates, custom messages) with the
    bytes of its data as JSON, per widget; and the dummy comm's ``comm_msg`` publications."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []  # (id of the widget, bytes)
        self.published = 0
        self.names: dict[int, str] = {}

    def install(self) -> None:
        import comm
        import ipywidgets

        send = ipywidgets.Widget._send
        publish = comm.DummyComm.publish_msg
        counter = self

        def counted_send(widget, msg, buffers=None):
            size = len(json.dumps(msg).encode()) + sum(len(memoryview(b).cast("B")) for b in buffers or ())
            counter.sent.append((id(widget), size))
            return send(widget, msg, buffers=buffers)

        def counted_publish(comm_self, msg_type, *args, **kwargs):
            if msg_type == "comm_msg":
                counter.published += 1
            return publish(comm_self, msg_type, *args, **kwargs)

        ipywidgets.Widget._send = counted_send
        comm.DummyComm.publish_msg = counted_publish

    def name(self, panel: Any) -> None:
        """Label the panel's HTML widgets by their role (header, memory, chart ...) in the per-widget counts."""
        for role, widget in getattr(panel, "_html", {}).items():
            self.names[id(widget)] = role

    def mark(self) -> tuple[int, int]:
        return len(self.sent), self.published

    def since(self, mark: tuple[int, int]) -> dict[str, Any]:
        sent = self.sent[mark[0]:]
        widgets: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for wid, size in sent:
            role = self.names.get(wid, f"other widget {wid:x}")
            widgets[role] = widgets.get(role, 0) + 1
            sizes[role] = sizes.get(role, 0) + size
        return {"messages": len(sent), "bytes": sum(size for _, size in sent), "widgets": widgets,
                "widget_bytes": sizes, "published": self.published - mark[1]}


# ---- per-thread CPU time ---------------------------------------------------------------------------------
def _proc_ticks_s(native_id: int) -> float:
    """utime + stime of one thread of this process, from /proc, in seconds (clock-tick resolution)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime field 14, stime field 15 (1-based, as in proc(5)).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _refresher() -> threading.Thread:
    threads = [t for t in threading.enumerate() if t.name == THREAD_NAME]
    if len(threads) != 1:
        raise RuntimeError(f"expected one {THREAD_NAME!r} thread, found {len(threads)}")
    return threads[0]


def _pct(cpu_s: float, wall_s: float) -> float:
    return cpu_s / wall_s * 100.0


# ---- the child: everything measured runs here, with the fake loaded ----------------------------------------
def idle(seconds: float, messages: Messages) -> dict[str, Any]:
    from tfgpu_magic import Panel
    from tfgpu_magic.core.live import LiveModel

    # Baseline first: the process with no panel, the main thread asleep for as long.
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    baseline_cpu, baseline_wall = time.process_time() - cpu0, time.perf_counter() - wall0

    model = LiveModel(interval=1.0)
    panel = Panel(model=model)
    messages.name(panel)
    try:
        thread = _refresher()
        clock = time.pthread_getcpuclockid(thread.ident)
        samples0, notes0, errors0 = model.samples, model.notifications, model.errors
        mark = messages.mark()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        thread0, ticks0 = time.clock_gettime(clock), _proc_ticks_s(thread.native_id)
        time.sleep(seconds)
        thread1, ticks1 = time.clock_gettime(clock), _proc_ticks_s(thread.native_id)
        cpu1, wall1 = time.process_time(), time.perf_counter()
        sent = messages.since(mark)
        samples, notifications, errors = (model.samples - samples0, model.notifications - notes0,
                                          model.errors - errors0)
    finally:
        panel.close()
    wall = wall1 - wall0
    return {
        "seconds": round(wall, 3),
        "refreshes": samples,
        "notifications": notifications,
        "errors": errors,
        "thread_cpu_s": thread1 - thread0,
        "thread_cpu_pct": _pct(thread1 - thread0, wall),
        "thread_cpu_pct_proc_stat": _pct(ticks1 - ticks0, wall),
        "thread_cpu_per_refresh_ms": (thread1 - thread0) / max(samples, 1) * 1e3,
        "process_cpu_pct_with_panel": _pct(cpu1 - cpu0, wall),
        "process_cpu_pct_baseline": _pct(baseline_cpu, baseline_wall),
        "messages": sent["messages"],
        "bytes": sent["bytes"],
        "messages_by_widget": sent["widgets"],
    }


def _stats_ms(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]
    return {"mean": statistics.fmean(times) * 1e3, "p50": statistics.median(times) * 1e3, "p99": p99 * 1e3}


def _stat_key(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def unchanged_and_changed(calls: int, changes: int, config_path: Path, config: dict,
                          messages: Messages) -> tuple[dict, dict]:
    from tfgpu_magic import Panel
    from tfgpu_magic.core import nvml
    from tfgpu_magic.core.live import MAX_INTERVAL, LiveModel

    model = LiveModel(interval=MAX_INTERVAL)  # its refresher sleeps: only the calls below sample
    panel = Panel(model=model)
    messages.name(panel)
    try:
        for _ in range(10):  # warm: caches filled, nothing left to publish
            model.refresh(read_nvml=True)
            nvml.snapshot()

        # 2. nothing changed
        refresh_times, snapshot_times, published = [], [], 0
        mark = messages.mark()
        for _ in range(calls):
            start = time.perf_counter()
            published += len(model.refresh(read_nvml=True))
            middle = time.perf_counter()
            nvml.snapshot()
            refresh_times.append(middle - start)
            snapshot_times.append(time.perf_counter() - middle)
        sent = messages.since(mark)
        refresh, snapshot = _stats_ms(refresh_times), _stats_ms(snapshot_times)
        unchanged = {
            "calls": calls,
            "sections_published": published,
            "messages": sent["messages"],
            "bytes": sent["bytes"],
            "messages_per_refresh": sent["messages"] / calls,
            "bytes_per_refresh": sent["bytes"] / calls,
            "messages_by_widget": sent["widgets"],
            "comm_msgs_published": sent["published"],
            "refresh_ms": refresh,
            "snapshot_ms": snapshot,
            "ratio": {k: refresh[k] / snapshot[k] for k in refresh},
        }

        # 3. one GPU changed per refresh
        per_refresh, times, sections, widgets, widget_bytes, published_msgs = [], [], {}, {}, {}, 0
        for i in range(changes):
            gpu = i % GPUS
            config = with_changes(config, **{f"gpu{gpu}": {
                "memory_used": (1024 + 512 * gpu + 64 * (i + 1)) * MIB,
                "utilization_gpu": (10 * gpu + i + 1) % 101,
            }})
            before = _stat_key(config_path)
            write_config(config_path, config)
            deadline = time.monotonic() + 5
            while _stat_key(config_path) == before:  # what the fake compares before it re-reads
                if time.monotonic() > deadline:
                    raise RuntimeError("the config file's stat did not change")
                time.sleep(0.001)
            mark = messages.mark()
            start = time.perf_counter()
            changed = model.refresh(read_nvml=True)
            times.append(time.perf_counter() - start)
            sent = messages.since(mark)
            gpu_row = changed.get("gpus", {}).get("gpus", [])[gpu:gpu + 1]
            expected_mib = (1024 + 512 * gpu + 64 * (i + 1))
            if not gpu_row or gpu_row[0]["memory_used_mib"] != expected_mib:
                raise RuntimeError(f"change {i}: the refresh did not see GPU {gpu} at {expected_mib} MiB: "
                                   f"{sorted(changed)}")
            per_refresh.append(sent)
            published_msgs += sent["published"]
            for name in changed:
                sections[name] = sections.get(name, 0) + 1
            for role, count in sent["widgets"].items():
                widgets[role] = widgets.get(role, 0) + count
                widget_bytes[role] = widget_bytes.get(role, 0) + sent["widget_bytes"][role]
        msgs = [s["messages"] for s in per_refresh]
        sizes = [s["bytes"] for s in per_refresh]
        changed_result = {
            "refreshes": changes,
            "messages_per_refresh": statistics.fmean(msgs),
            "bytes_per_refresh": statistics.fmean(sizes),
            "bytes_per_refresh_max": max(sizes),
            "sections_changed": sections,
            "messages_by_widget": widgets,
            "bytes_per_refresh_by_widget": {role: size / changes for role, size in widget_bytes.items()},
            "unexpected_widgets": sorted(set(widgets) - EXPECTED_ON_CHANGE),
            "comm_msgs_published": published_msgs,
            "messages": sum(msgs),
            "refresh_ms": _stats_ms(times),
        }
        if model.errors:
            raise RuntimeError(f"the model counted {model.errors} error(s): {model.state().get('error')}")
    finally:
        panel.close()
    return unchanged, changed_result


def child(args: argparse.Namespace) -> None:
    """Runs with the fake loaded; prints one JSON object."""
    import ipywidgets

    from tfgpu_magic.core import nvml
    from tfgpu_magic.core.snapshot import take  # noqa: F401

    config_path = Path(os.environ["FAKE_NVML_CONFIG"])
    config = n_gpus(GPUS, PROCS)
    snap = nvml.snapshot()
    if not (snap.available and len(snap.gpus) == GPUS and all(g.error is None and len(g.processes) == PROCS
                                                              and any(p.is_self for p in g.processes)
                                                              for g in snap.gpus)):
        raise RuntimeError(f"the fake NVML is not what the benchmark wrote: {snap}")
    messages = Messages()
    messages.install()
    result = {"gpus": GPUS, "processes_per_gpu": PROCS, "ipywidgets": ipywidgets.__version__,
              "idle": idle(args.seconds, messages)}
    result["unchanged"], result["changed"] = unchanged_and_changed(args.calls, args.changes, config_path, config,
                                                                   messages)
    sent = len(messages.sent)
    if messages.published != sent:
        result["warning"] = (f"Widget._send was called {sent} times but the comm published "
                             f"{messages.published} comm_msg: the counts above may miss messages")
    print(json.dumps(result))


# ---- the parent: build the fake, run the child, print ------------------------------------------------------
def _ok(good: bool) -> str:
    return "ok" if good else "**missed**"


def report(r: dict[str, Any]) -> None:
    idle_, same, changed = r["idle"], r["unchanged"], r["changed"]
    ref, snap, ratio = same["refresh_ms"], same["snapshot_ms"], same["ratio"]
    print(f"Live panel, {r['gpus']} fake GPUs x {r['processes_per_gpu']} processes, ipywidgets {r['ipywidgets']}\n")
    print("| figure | measured | goal |")
    print("|---|---:|---|")
    print(f"| refresher thread CPU at 1 Hz, idle, {idle_['seconds']:.0f} s ({idle_['refreshes']} refreshes) "
          f"| {idle_['thread_cpu_pct']:.3f}% of a core (/proc ticks: {idle_['thread_cpu_pct_proc_stat']:.2f}%) "
          f"| < {GOAL_CPU_PCT:g}%: {_ok(idle_['thread_cpu_pct'] < GOAL_CPU_PCT)} |")
    print(f"| process CPU, idle: with the panel / without (baseline) "
          f"| {idle_['process_cpu_pct_with_panel']:.3f}% / {idle_['process_cpu_pct_baseline']:.3f}% "
          f"| +{idle_['process_cpu_pct_with_panel'] - idle_['process_cpu_pct_baseline']:.3f}% |")
    print(f"| refresher CPU per refresh | {idle_['thread_cpu_per_refresh_ms']:.2f} ms | |")
    print(f"| comm messages while idle ({idle_['refreshes']} refreshes) | {idle_['messages']} ({idle_['bytes']} B) "
          f"| 0: {_ok(idle_['messages'] == 0)} |")
    print(f"| `model.refresh()`, nothing changed: mean / p50 / p99 "
          f"| {ref['mean']:.2f} / {ref['p50']:.2f} / {ref['p99']:.2f} ms | |")
    print(f"| bare `nvml.snapshot()`: mean / p50 / p99 "
          f"| {snap['mean']:.2f} / {snap['p50']:.2f} / {snap['p99']:.2f} ms | |")
    print(f"| refresh / snapshot: mean / p50 / p99 "
          f"| {ratio['mean']:.1f}x / {ratio['p50']:.1f}x / {ratio['p99']:.1f}x | |")
    print(f"| comm messages per refresh, nothing changed ({same['calls']} refreshes) "
          f"| {same['messages_per_refresh']:g} ({same['bytes_per_refresh']:g} B) "
          f"| 0: {_ok(same['messages'] == 0)} |")
    widgets = ", ".join(f"{k} {v} ({changed['bytes_per_refresh_by_widget'][k]:.0f} B per refresh)"
                        for k, v in sorted(changed["messages_by_widget"].items())) or "none"
    print(f"| comm messages per refresh, one GPU changed ({changed['refreshes']} refreshes) "
          f"| {changed['messages_per_refresh']:g} ({changed['bytes_per_refresh']:.0f} B, max "
          f"{changed['bytes_per_refresh_max']} B) | memory + chart only: "
          f"{_ok(not changed['unexpected_widgets'] and changed['messages'] > 0)} |")
    print(f"| `model.refresh()`, one GPU changed: mean / p50 / p99 "
          f"| {changed['refresh_ms']['mean']:.2f} / {changed['refresh_ms']['p50']:.2f} / "
          f"{changed['refresh_ms']['p99']:.2f} ms | |")
    sections = ", ".join(f"{k} {v}" for k, v in sorted(changed["sections_changed"].items()))
    print(f"\nOne GPU changed: widgets that got messages: {widgets}; sections published: {sections}.")
    if same["messages_by_widget"] or idle_["messages_by_widget"]:
        print(f"Nothing changed, yet messages to: {same['messages_by_widget'] or idle_['messages_by_widget']}")
    if r.get("warning"):
        print(f"Warning: {r['warning']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle run length, and the baseline's (30)")
    parser.add_argument("--calls", type=int, default=200, help="refreshes with nothing changed, timed (200)")
    parser.add_argument("--changes", type=int, default=20, help="refreshes with one GPU changed (20)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if os.environ.get(CHILD_FLAG):
        child(args)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-panel-") as tmp:
        lib = build_fake_nvml(tmp)
        config = Path(tmp) / "fake_nvml.cfg"
        write_config(config, n_gpus(GPUS, PROCS))
        env = fake_env(lib.parent, config)
        env[CHILD_FLAG] = "1"
        command = [sys.executable, __file__, "--seconds", str(args.seconds), "--calls", str(args.calls),
                   "--changes", str(args.changes)]
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=2 * args.seconds + 300)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, sep="\n", file=sys.stderr)
        return 1
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
