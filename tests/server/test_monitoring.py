"""The monitoring files the package ships (tfgpu_magic/monitoring): the Prometheus rules pass Debian's real
``promtool`` (``check rules``, and ``test rules`` on synthetic series of the metrics contract in every detail mode),
a deliberately wrong copy of each rule fails those unit tests, and the Grafana dashboard imports (its structure) and
every PromQL expression in it parses and answers as meant on the same kind of series. Skipped without promtool,
failed instead with CI=true (``.ci/run`` installs Debian's ``prometheus``, which ships it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from grafana import check_dashboard_structure, dashboard_queries
from harness import ROOT
from promsession import require_binary

from tfgpu_magic import monitoring

pytestmark = pytest.mark.server

PROMTOOL = "/usr/bin/promtool"
GIB = 1024**3
MIB = 1024**2
SCRAPE = {"job": "tfgpu", "instance": "hub.example:8000"}  # every user server behind the Hub's proxy: one instance
ALL = {"Hostname": ".*", "user": ".*"}  # the dashboard's variables at "All"


def require_promtool() -> None:
    require_binary(PROMTOOL, "promtool")


def promtool(*args: str | Path) -> subprocess.CompletedProcess:
    require_promtool()
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120)


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    """One input series of a promtool unit test; values in promtool's notation ('1x10', '0+60x90', '_ 1x29 stale')."""
    body = ",".join(f"{key}={json.dumps(value)}" for key, value in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def sample(name: str, value: float, **labels: str) -> dict:
    body = ",".join(f"{key}={json.dumps(value)}" for key, value in labels.items())
    return {"labels": f"{name}{{{body}}}" if name else f"{{{body}}}", "value": value}


def held(values: str, **labels: str) -> dict[str, str]:
    return series("tfgpu_kernel_gpu_memory_used_bytes", values, **SCRAPE, **labels)


def idle(values: str, **labels: str) -> dict[str, str]:
    return series("tfgpu_kernel_idle_seconds", values, **SCRAPE, **labels)


def dashboard() -> dict:
    return json.loads(monitoring.dashboard_path().read_text(encoding="utf-8"))


def panel_query(title: str, ref: str = "A") -> str:
    """The dashboard's query of one panel, at "All" and over the last hour."""
    found = [expr for where, expr in dashboard_queries(dashboard(), ALL) if f"{title!r} target {ref}" in where]
    assert len(found) == 1, f"no panel {title!r} with a target {ref}"
    return found[0]


# The idle holders: in notebook mode (a Hub's default: no kernel_id, no pid), in process mode (kernel_id and pid:
# one kernel's two processes summed) and in kernel mode (kernel_id: one notebook's two kernels, one idle, one busy),
# and on a single-user server (no user, no server_name).
IDLE_NOTEBOOK_MODE = {
    "name": "an idle holder in notebook mode (no kernel_id) fires, and one outside JupyterHub (no user) too",
    "interval": "1m",
    "input_series": [
        held(f"{2 * GIB}x90", Hostname="node1", user="alice", notebook="train.ipynb", gpu="0", UUID="GPU-node1-0"),
        idle("0+60x90", Hostname="node1", user="alice", notebook="train.ipynb"),
        series("tfgpu_kernel_gpu_memory_used_bytes", f"{512 * MIB}x90", Hostname="ws", notebook="solo.ipynb",
               kernel_id="k-solo", gpu="0", UUID="GPU-ws-0", job="tfgpu", instance="ws:8888"),
        series("tfgpu_kernel_idle_seconds", "3000+60x90", Hostname="ws", notebook="solo.ipynb", kernel_id="k-solo",
               job="tfgpu", instance="ws:8888"),
    ],
    "alert_rule_test": [
        # idle past 3600 s from minute 61 (alice) and 11 (solo): pending, not firing, for 5 minutes
        {"eval_time": "15m", "alertname": "TfgpuGpuMemoryHeldIdle", "exp_alerts": []},
        {"eval_time": "63m", "alertname": "TfgpuGpuMemoryHeldIdle", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "Hostname": "ws", "notebook": "solo.ipynb", "kernel_id": "k-solo",
                           "gpu": "0", "UUID": "GPU-ws-0"},
            "exp_annotations": {
                "summary": "notebook solo.ipynb holds 512MiB of GPU memory on ws GPU 0 while idle",
                "description": "The notebook solo.ipynb (kernel k-solo) has run no cell and no GPU work for 1h 53m "
                "0s and holds 512MiB of GPU memory on ws GPU 0 (GPU-ws-0), which no one else can use meanwhile. "
                "Ask the owner to shut the kernel down, or let the idle culler do it."}}]},
        {"eval_time": "70m", "alertname": "TfgpuGpuMemoryHeldIdle", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "Hostname": "node1", "user": "alice", "notebook": "train.ipynb",
                           "gpu": "0", "UUID": "GPU-node1-0"},
            "exp_annotations": {
                "summary": "alice's notebook train.ipynb holds 2GiB of GPU memory on node1 GPU 0 while idle",
                "description": "User alice's notebook train.ipynb has run no cell and no GPU work for 1h 10m 0s "
                "and holds 2GiB of GPU memory on node1 GPU 0 (GPU-node1-0), which no one else can use meanwhile. "
                "Ask the owner to shut the kernel down, or let the idle culler do it."}}, {
            "exp_labels": {"severity": "warning", "Hostname": "ws", "notebook": "solo.ipynb", "kernel_id": "k-solo",
                           "gpu": "0", "UUID": "GPU-ws-0"},
            "exp_annotations": {
                "summary": "notebook solo.ipynb holds 512MiB of GPU memory on ws GPU 0 while idle",
                "description": "The notebook solo.ipynb (kernel k-solo) has run no cell and no GPU work for 2h 0m "
                "0s and holds 512MiB of GPU memory on ws GPU 0 (GPU-ws-0), which no one else can use meanwhile. "
                "Ask the owner to shut the kernel down, or let the idle culler do it."}}]},
    ],
}

IDLE_KERNEL_MODES = {
    "name": "idle holders fire per kernel and GPU in process and kernel modes; a busy kernel of the same notebook not",
    "interval": "1m",
    "input_series": [
        # process mode: bob's kernel has two processes on GPU 1
        held(f"{GIB}x90", Hostname="node2", user="bob", server_name="big", notebook="big.ipynb", kernel_id="k-bob",
             pid="101", gpu="1", UUID="GPU-node2-1"),
        held(f"{512 * MIB}x90", Hostname="node2", user="bob", server_name="big", notebook="big.ipynb",
             kernel_id="k-bob", pid="102", gpu="1", UUID="GPU-node2-1"),
        idle("0+60x90", Hostname="node2", user="bob", server_name="big", notebook="big.ipynb", kernel_id="k-bob"),
        # kernel mode: erin's notebook has two kernels on GPU 0, k-e1 idle, k-e2 busy
        held(f"{3 * GIB}x90", Hostname="node2", user="erin", notebook="two.ipynb", kernel_id="k-e1", gpu="0",
             UUID="GPU-node2-0"),
        idle("0+60x90", Hostname="node2", user="erin", notebook="two.ipynb", kernel_id="k-e1"),
        held(f"{GIB}x90", Hostname="node2", user="erin", notebook="two.ipynb", kernel_id="k-e2", gpu="0",
             UUID="GPU-node2-0"),
        idle("0x90", Hostname="node2", user="erin", notebook="two.ipynb", kernel_id="k-e2"),
    ],
    "alert_rule_test": [
        {"eval_time": "63m", "alertname": "TfgpuGpuMemoryHeldIdle", "exp_alerts": []},  # pending since 61m
        {"eval_time": "70m", "alertname": "TfgpuGpuMemoryHeldIdle", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "Hostname": "node2", "user": "bob", "server_name": "big",
                           "notebook": "big.ipynb", "kernel_id": "k-bob", "gpu": "1", "UUID": "GPU-node2-1"},
            "exp_annotations": {
                "summary": "bob's notebook big.ipynb holds 1.5GiB of GPU memory on node2 GPU 1 while idle",
                "description": "User bob's notebook big.ipynb on server big (kernel k-bob) has run no cell and no "
                "GPU work for 1h 10m 0s and holds 1.5GiB of GPU memory on node2 GPU 1 (GPU-node2-1), which no one "
                "else can use meanwhile. Ask the owner to shut the kernel down, or let the idle culler do it."}}, {
            "exp_labels": {"severity": "warning", "Hostname": "node2", "user": "erin", "notebook": "two.ipynb",
                           "kernel_id": "k-e1", "gpu": "0", "UUID": "GPU-node2-0"},
            "exp_annotations": {
                "summary": "erin's notebook two.ipynb holds 3GiB of GPU memory on node2 GPU 0 while idle",
                "description": "User erin's notebook two.ipynb (kernel k-e1) has run no cell and no GPU work for "
                "1h 10m 0s and holds 3GiB of GPU memory on node2 GPU 0 (GPU-node2-0), which no one else can use "
                "meanwhile. Ask the owner to shut the kernel down, or let the idle culler do it."}}]},
    ],
    "promql_expr_test": [
        {"expr": "tfgpu:user:gpu_memory_held_idle_bytes:sum", "eval_time": "70m", "exp_samples": [
            sample("tfgpu:user:gpu_memory_held_idle_bytes:sum", 1.5 * GIB, user="bob"),
            sample("tfgpu:user:gpu_memory_held_idle_bytes:sum", 3 * GIB, user="erin")]},
    ],
}

BUSY = {
    "name": "a busy holder (idle 0) does not fire, nor an idle kernel that holds no memory",
    "interval": "1m",
    "input_series": [
        held(f"{4 * GIB}x90", Hostname="node1", user="carol", notebook="fit.ipynb", gpu="0", UUID="GPU-node1-0"),
        idle("0x90", Hostname="node1", user="carol", notebook="fit.ipynb"),
        held("0x90", Hostname="node1", user="dave", notebook="empty.ipynb", kernel_id="k-d", gpu="1",
             UUID="GPU-node1-1"),
        idle("0+60x90", Hostname="node1", user="dave", notebook="empty.ipynb", kernel_id="k-d"),
    ],
    "alert_rule_test": [{"eval_time": "70m", "alertname": "TfgpuGpuMemoryHeldIdle", "exp_alerts": []}],
    "promql_expr_test": [{"expr": "tfgpu:user:gpu_memory_held_idle_bytes:sum", "eval_time": "70m",
                          "exp_samples": []}],
}


def reading(stale: str, timestamp: str, **labels: str) -> list[dict[str, str]]:
    return [series("tfgpu_reading_stale", stale, **SCRAPE, **labels),
            series("tfgpu_reading_timestamp_seconds", timestamp, **SCRAPE, **labels)]


def stale_alert(user: str, age: str, **labels: str) -> dict:
    return {"exp_labels": {"severity": "warning", "Hostname": "node1", "user": user, **SCRAPE, **labels},
            "exp_annotations": {
                "summary": f"tfgpu's GPU figures on node1 ({user}'s server) are {age} old",
                "description": f"The NVIDIA driver on node1 has not answered tfgpu in time (user {user}"
                + "".join(f", server {v}" for v in labels.values()) + f"): the GPU figures, and the idle and "
                f"memory figures built on them, are {age} old. A hung driver or a GPU fallen off the bus: check "
                "nvidia-smi and the kernel log on the host."}}


STALE = {
    "name": "a stale reading fires TfgpuReadingStale: flagged by the server, or a timestamp that stopped moving",
    "interval": "1m",
    # promtool's clock starts at the Unix epoch: a fresh reading's timestamp is the minute in seconds
    "input_series": [
        # alice's server flags its reading stale from minute 11 (the driver hangs at minute 10)
        *reading("0x10 1x30", "0+60x10 600x30", Hostname="node1", user="alice"),
        # bob's server never flags it, but its reading stopped at the start
        *reading("0x40", "0x40", Hostname="node1", user="bob", server_name="gpu"),
        # carol's is fresh
        *reading("0x40", "0+60x40", Hostname="node1", user="carol"),
    ],
    "alert_rule_test": [
        {"eval_time": "12m", "alertname": "TfgpuReadingStale",  # bob's age over 180 s since minute 4
         "exp_alerts": [stale_alert("bob", "12m 0s", server_name="gpu")]},
        {"eval_time": "16m", "alertname": "TfgpuReadingStale",  # alice's age is under 180 s until minute 13
         "exp_alerts": [stale_alert("alice", "6m 0s"), stale_alert("bob", "16m 0s", server_name="gpu")]},
    ],
}

NVML = {
    "name": "NVML unavailable for 10 minutes fires TfgpuNvmlUnavailable",
    "interval": "1m",
    "input_series": [
        series("tfgpu_nvml_available", "1x5 0x30", Hostname="node3", user="hank", **SCRAPE),
        series("tfgpu_nvml_available", "1x35", Hostname="node3", user="ivy", **SCRAPE),
    ],
    "alert_rule_test": [
        {"eval_time": "14m", "alertname": "TfgpuNvmlUnavailable", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "TfgpuNvmlUnavailable", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "Hostname": "node3", "user": "hank", **SCRAPE},
            "exp_annotations": {
                "summary": "tfgpu cannot read NVML on node3 (hank's server)",
                "description": "The NVIDIA driver's library (NVML) could not be read on node3 by user hank's "
                "server for 10 minutes: no GPU figures, no idle figures. The server has no GPU devices (a "
                "container started without them), or the driver is not loaded."}}]},
    ],
}


def gpu(name: str, value: float, reporter: str, gpu_index: str = "0", host: str = "node1") -> dict[str, str]:
    """A GPU series as the user server of ``reporter`` reports it (every server on a host reports every GPU)."""
    return series(name, f"{value}x70", Hostname=host, gpu=gpu_index, UUID=f"GPU-{host}-{gpu_index}",
                  modelName="Tesla V100-SXM2-32GB", user=reporter, **SCRAPE)


HOLDERS = [  # alice: two notebooks on two GPUs; carol: two notebooks on one GPU
    held(f"{2 * GIB}x70", Hostname="node1", user="alice", notebook="train.ipynb", gpu="0", UUID="GPU-node1-0"),
    held(f"{GIB}x70", Hostname="node1", user="alice", notebook="eval.ipynb", gpu="1", UUID="GPU-node1-1"),
    held(f"{4 * GIB}x70", Hostname="node1", user="carol", server_name="gpu", notebook="a.ipynb", gpu="0",
         UUID="GPU-node1-0"),
    held(f"{GIB}x70", Hostname="node1", user="carol", server_name="gpu", notebook="b.ipynb", gpu="0",
         UUID="GPU-node1-0"),
]
GPUS = [  # GPU 0 of node1, reported by alice's and carol's servers
    gpu("tfgpu_gpu_memory_used_bytes", 8 * GIB, "alice"), gpu("tfgpu_gpu_memory_used_bytes", 8 * GIB, "carol"),
    gpu("tfgpu_gpu_memory_total_bytes", 32 * GIB, "alice"), gpu("tfgpu_gpu_memory_total_bytes", 32 * GIB, "carol"),
    gpu("tfgpu_gpu_utilization_ratio", 0.5, "alice"), gpu("tfgpu_gpu_utilization_ratio", 0.25, "carol"),
]
V100 = {"Hostname": "node1", "gpu": "0", "UUID": "GPU-node1-0", "modelName": "Tesla V100-SXM2-32GB"}

RECORDING = {
    "name": "recording rules: memory and GPUs held per user and notebook, per-GPU figures counted once",
    "interval": "1m",
    "input_series": HOLDERS + GPUS,
    "promql_expr_test": [
        {"expr": "tfgpu:user:gpu_memory_used_bytes:sum", "eval_time": "30m", "exp_samples": [
            sample("tfgpu:user:gpu_memory_used_bytes:sum", 3 * GIB, user="alice"),
            sample("tfgpu:user:gpu_memory_used_bytes:sum", 5 * GIB, user="carol")]},
        {"expr": "tfgpu:notebook:gpu_memory_used_bytes:sum", "eval_time": "30m", "exp_samples": [
            sample("tfgpu:notebook:gpu_memory_used_bytes:sum", 2 * GIB, Hostname="node1", user="alice",
                   notebook="train.ipynb"),
            sample("tfgpu:notebook:gpu_memory_used_bytes:sum", GIB, Hostname="node1", user="alice",
                   notebook="eval.ipynb"),
            sample("tfgpu:notebook:gpu_memory_used_bytes:sum", 4 * GIB, Hostname="node1", user="carol",
                   server_name="gpu", notebook="a.ipynb"),
            sample("tfgpu:notebook:gpu_memory_used_bytes:sum", GIB, Hostname="node1", user="carol",
                   server_name="gpu", notebook="b.ipynb")]},
        {"expr": "tfgpu:user:gpus_held:count", "eval_time": "30m", "exp_samples": [
            sample("tfgpu:user:gpus_held:count", 2, user="alice"),
            sample("tfgpu:user:gpus_held:count", 1, user="carol")]},
        {"expr": "tfgpu:gpu:memory_used_bytes:max", "eval_time": "30m",
         "exp_samples": [sample("tfgpu:gpu:memory_used_bytes:max", 8 * GIB, **V100)]},
        {"expr": "tfgpu:gpu:memory_used:ratio", "eval_time": "30m",
         "exp_samples": [sample("tfgpu:gpu:memory_used:ratio", 0.25, **V100)]},
        {"expr": "tfgpu:gpu:utilization:ratio", "eval_time": "30m",
         "exp_samples": [sample("tfgpu:gpu:utilization:ratio", 0.5, **V100)]},
    ],
}

GPU_HOURS = {
    "name": "GPU-hours: two GPUs held for the last hour are 2, two GPUs held for half of it are 1",
    "interval": "1m",
    "input_series": [  # bob holds GPUs 0 and 1 from minute 1 to 60; frank holds two from minute 1 to 30
        held(f"_ {GIB}x59", Hostname="node2", user="bob", notebook="big.ipynb", gpu="0", UUID="GPU-node2-0"),
        held(f"_ {GIB}x59", Hostname="node2", user="bob", notebook="big.ipynb", gpu="1", UUID="GPU-node2-1"),
        held(f"_ {GIB}x29 stale", Hostname="node3", user="frank", notebook="f.ipynb", gpu="0", UUID="GPU-node3-0"),
        held(f"_ {GIB}x29 stale", Hostname="node3", user="frank", notebook="f.ipynb", gpu="1", UUID="GPU-node3-1"),
    ],
    "promql_expr_test": [
        {"expr": "tfgpu:user:gpu_hours:1h", "eval_time": "60m", "exp_samples": [
            sample("tfgpu:user:gpu_hours:1h", 2, user="bob"), sample("tfgpu:user:gpu_hours:1h", 1, user="frank")]},
        {"expr": "tfgpu:notebook:gpu_hours:1h", "eval_time": "60m", "exp_samples": [
            sample("tfgpu:notebook:gpu_hours:1h", 2, Hostname="node2", user="bob", notebook="big.ipynb"),
            sample("tfgpu:notebook:gpu_hours:1h", 1, Hostname="node3", user="frank", notebook="f.ipynb")]},
    ],
}

RULE_TESTS = [IDLE_NOTEBOOK_MODE, IDLE_KERNEL_MODES, BUSY, STALE, NVML, RECORDING, GPU_HOURS]


def write_tests(folder: Path, rules: Path, tests: list[dict]) -> Path:
    path = folder / "tfgpu-rules.test.yml"
    path.write_text(json.dumps({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests},
                               indent=1))  # JSON is YAML too
    return path


def test_the_rules_pass_promtool_check():
    result = promtool("check", "rules", monitoring.rules_path())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 13 rules found" in result.stdout, result.stdout


def test_the_rules_follow_prometheus_naming_and_never_sum_gpu_series():
    groups = yaml.safe_load(monitoring.rules_path().read_text(encoding="utf-8"))["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    records = [rule["record"] for rule in rules if "record" in rule]
    alerts = {rule["alert"]: rule for rule in rules if "alert" in rule}
    assert all(re.fullmatch(r"tfgpu:[a-z]+:[a-z_]+:[a-z0-9_]+", name) for name in records), records
    assert sorted(alerts) == ["TfgpuGpuMemoryHeldIdle", "TfgpuNvmlUnavailable", "TfgpuReadingStale"]
    for rule in alerts.values():
        assert rule["labels"]["severity"] and rule["annotations"]["summary"] and rule["annotations"]["description"]
    # GPU series come once per user server on the host: never summed, only deduplicated
    for rule in rules:
        for aggregation in re.findall(r"(\w+) by \(([^)]*)\) \(tfgpu_gpu_", rule["expr"]):
            assert aggregation == ("max", "Hostname, gpu, UUID, modelName"), (rule.get("record"), aggregation)


def test_the_rules_pass_their_unit_tests(tmp_path):
    result = promtool("test", "rules", write_tests(tmp_path, monitoring.rules_path(), RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "FAILED" not in result.stdout, result.stdout


# Each a plausible mistake in the rules; the unit tests above must catch every one.
MUTATIONS = {
    "GPU series summed over the user servers": (
        [("max by (Hostname, gpu, UUID, modelName)", "sum by (Hostname, gpu, UUID, modelName)")],
        "tfgpu:gpu:memory_used_bytes:max"),
    "idle join without kernel_id": (
        [("and on (Hostname, user, server_name, notebook, kernel_id)",
          "and on (Hostname, user, server_name, notebook)")], "TfgpuGpuMemoryHeldIdle"),
    "idle threshold ignored": ([("tfgpu_kernel_idle_seconds > 3600", "tfgpu_kernel_idle_seconds >= 0")],
                               "TfgpuGpuMemoryHeldIdle"),
    "alerts without for": ([("for: 5m", "for: 0m")], "TfgpuGpuMemoryHeldIdle"),
    "GPU-hours as an average over the minutes held": (
        [("sum_over_time(", "avg_over_time("), ("[1h:1m]) / 60", "[1h:1m])")], "tfgpu:user:gpu_hours:1h"),
    "GPUs held counted per notebook, not distinct": (
        [("count by (user) (count by (user, Hostname, UUID)",
          "sum by (user) (count by (user, Hostname, UUID, notebook)")],
        "tfgpu:user:gpus_held:count"),
    "stale flag ignored": ([("tfgpu_reading_stale == 1", "tfgpu_reading_stale == 2")], "TfgpuReadingStale"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_wrong_rule_fails_the_unit_tests(tmp_path, mutation):
    """Keeps the unit tests honest: each mistake still passes ``check rules`` but fails ``test rules``, naming the
    rule it broke."""
    replacements, broken = MUTATIONS[mutation]
    text = monitoring.rules_path().read_text(encoding="utf-8")
    for old, new in replacements:
        assert old in text, f"the rules no longer contain {old!r}: update the mutation"
        text = text.replace(old, new)
    rules = tmp_path / "tfgpu-rules.yml"
    rules.write_text(text, encoding="utf-8")
    check = promtool("check", "rules", rules)
    assert check.returncode == 0, check.stdout + check.stderr
    result = promtool("test", "rules", write_tests(tmp_path, rules, RULE_TESTS))
    output = result.stdout + result.stderr  # promtool 2.42 writes the failures to stderr
    assert result.returncode != 0, f"{mutation}: the unit tests still pass\n{output}"
    assert "FAILED" in output and broken in output, output


def test_the_dashboard_is_one_grafana_imports():
    text = monitoring.dashboard_path().read_text(encoding="utf-8")
    board = json.loads(text)
    assert json.loads(json.dumps(board)) == board
    check_dashboard_structure(board)
    assert board["title"] == "tfgpu: GPUs by user and notebook"
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == "${DS_PROMETHEUS}"  # the import's choice is the default
    for name, selector in [("Hostname", "label_values(tfgpu_info, Hostname)"),
                           ("user", 'label_values(tfgpu_kernel_gpu_memory_used_bytes{Hostname=~"$Hostname"}, user)')]:
        assert variables[name]["query"] == selector
        assert variables[name]["multi"] and variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
            assert "label_replace" not in target["expr"], panel["title"]  # tfgpu's labels are DCGM's
            for metric, selector in re.findall(r"(tfgpu_\w+)\{([^}]*)\}", target["expr"]):
                assert 'Hostname=~"$Hostname"' in selector, (panel["title"], metric)
                if metric.startswith("tfgpu_kernel_"):
                    assert 'user=~"$user"' in selector, (panel["title"], metric)
    # Grafana's own variables only, besides the dashboard's
    used = set(re.findall(r"\$\{?(\w+)", text)) - {"DS_PROMETHEUS", "datasource", "Hostname", "user"}
    assert used <= {"__rate_interval", "__interval", "__range"}, used


def test_every_dashboard_query_parses(tmp_path):
    """promtool 2.42 has no `promql format`: each query becomes a recording rule, which `check rules` parses."""
    queries = dashboard_queries(dashboard(), {"Hostname": "node1|node2", "user": "alice"})
    assert len(queries) >= 9, queries
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query:{index}", "expr": expr} for index, (_, expr) in enumerate(queries)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(json.dumps(rules, indent=1))
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr + "\n".join(f"{w}: {e}" for w, e in queries)
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout
    # and a broken one would not pass
    path.write_text(json.dumps({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum by (user"}]}]}))
    assert promtool("check", "rules", path).returncode != 0


def test_the_dashboard_queries_answer_as_meant(tmp_path):
    """The panels that join, deduplicate or count, run by promtool on the recording rules' series plus DCGM's."""
    dcgm = series("DCGM_FI_DEV_GPU_UTIL", "75x70", gpu="0", UUID="GPU-node1-0", device="nvidia0",
                  modelName="Tesla V100-SXM2-32GB", Hostname="node1", job="dcgm", instance="node1:9400")
    holders = {"Hostname": "node1", "gpu": "0", "UUID": "GPU-node1-0"}
    test = {
        "name": "dashboard queries", "interval": "1m",
        "input_series": [*HOLDERS, *GPUS, dcgm,
                         idle("0+60x70", Hostname="node1", user="alice", notebook="train.ipynb"),
                         idle("0x70", Hostname="node1", user="alice", notebook="eval.ipynb")],
        "promql_expr_test": [
            {"expr": panel_query("GPU memory used / total"), "eval_time": "30m",
             "exp_samples": [sample("", 0.25, **V100)]},
            {"expr": panel_query("GPU utilisation"), "eval_time": "30m", "exp_samples": [sample("", 0.5, **V100)]},
            {"expr": panel_query("DCGM utilisation of the GPUs notebooks hold"), "eval_time": "30m", "exp_samples": [
                sample("", 75, **holders, user="alice", notebook="train.ipynb"),
                sample("", 75, **holders, user="carol", notebook="a.ipynb"),
                sample("", 75, **holders, user="carol", notebook="b.ipynb")]},
            {"expr": panel_query("GPUs held per user"), "eval_time": "30m",
             "exp_samples": [sample("", 2, user="alice"), sample("", 1, user="carol")]},
            # held since minute 0: 31 one-minute steps of the last hour by 30m, in Prometheus 2 and 3 alike
            {"expr": panel_query("GPU-hours per user in the time range"), "eval_time": "30m",
             "exp_samples": [sample("", 2 * 31 / 60, user="alice"), sample("", 31 / 60, user="carol")]},
            {"expr": panel_query("Idle holders (idle over 10 minutes)", "A"), "eval_time": "30m",
             "exp_samples": [sample("", 2 * GIB, Hostname="node1", user="alice", notebook="train.ipynb")]},
            {"expr": panel_query("Idle holders (idle over 10 minutes)", "B"), "eval_time": "30m",
             "exp_samples": [sample("", 1800, Hostname="node1", user="alice", notebook="train.ipynb")]},
        ],
    }
    result = promtool("test", "rules", write_tests(tmp_path, monitoring.rules_path(), [test]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_dashboard_queries_fills_every_variable_or_says_which_is_missing():
    board = {"panels": [
        {"id": 1, "title": "row", "type": "row", "panels": [
            {"id": 2, "title": "inner", "targets": [
                {"refId": "A", "expr": 'rate(x{a=~"${a:regex}"}[$__rate_interval])'}, {"refId": "B", "expr": ""}]}]},
        {"id": 3, "title": "range", "targets": [{"refId": "A", "expr": "sum_over_time(x{b=\"[[b]]\"}[$__range])"}]}],
        "templating": {"list": [
            {"name": "ds", "type": "datasource", "query": "prometheus"},
            {"name": "a", "type": "query", "query": {"query": "label_values(up{job=\"$b\"}, a)", "refId": "Q"}},
            {"name": "b", "type": "query", "query": "label_values(job)"},
            {"name": "c", "type": "query", "query": "query_result(topk(3, up))"}]}}
    assert dashboard_queries(board, {"a": "x|y", "b": "j", "__range": "6h"}) == [
        ("panel 2 'inner' target A", 'rate(x{a=~"x|y"}[1m])'),
        ("panel 3 'range' target A", 'sum_over_time(x{b="j"}[6h])'),
        ("variable a", 'up{job="j"}'),
        ("variable c", "topk(3, up)"),
    ]
    with pytest.raises(ValueError, match=r"panel 3 'range' target A: no value for the variable \$b"):
        dashboard_queries(board, {"a": "x"})


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["panels"][1].update(id=d["panels"][0]["id"]), "id used twice"),
    (lambda d: d["panels"][0].update(datasource={"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}), "fixed uid"),
    (lambda d: d["panels"][0]["targets"][0].update(datasource={"type": "prometheus", "uid": "${DS_OTHER}"}),
     "DS_OTHER"),
    (lambda d: d["templating"]["list"][0].update(current={}), "never used"),
    (lambda d: d["panels"][0]["gridPos"].pop("h"), "gridPos"),
    (lambda d: d["panels"][0]["targets"][0].pop("refId"), "refIds"),
    (lambda d: d.update(schemaVersion="39"), "schemaVersion"),
])
def test_check_dashboard_structure_refuses_what_import_would_not_take(breakage, message):
    board = dashboard()
    breakage(board)
    with pytest.raises(AssertionError, match=message):
        check_dashboard_structure(board)


def test_the_package_ships_the_files():
    assert monitoring.rules_path().is_file() and monitoring.dashboard_path().is_file()
    assert monitoring.rules_path().parent == Path(monitoring.__file__).resolve().parent
    # the wheel takes the package folder (hatch: every file git does not ignore), and excludes nothing of it
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "tfgpu_magic" in wheel["packages"] and not wheel.get("exclude"), wheel
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in (monitoring.rules_path(), monitoring.dashboard_path()):
        proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", str(path.relative_to(ROOT))], cwd=ROOT)
        assert proc.returncode == 1, f"{path} is ignored by git, so the wheel would leave it out"
