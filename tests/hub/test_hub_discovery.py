"""One Prometheus scrape job for every user server of a real JupyterHub, past the proxy (tfgpu_magic.hub.discovery).

The Hub runs ``tfgpu-discovery`` as a managed service whose role has the ``proxy`` scope only; alice's and bob's
servers run with tfgpu_magic and the fake NVML. The service answers Prometheus HTTP service discovery with each
server's internal address, to a token with access to it only; a real Prometheus with one ``http_sd_configs`` job
then scrapes both servers directly (never the proxy's port), and the Hub's last_activity of neither server moves
while it does; each user's kernel memory arrives labelled by user and joins a DCGM-style series on ``UUID``; every
expression of the shipped Grafana dashboard runs. A Hub that refuses the service's token leaves the last good
targets answered, never an empty list."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http.server
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from hubsession import Hub, require_hub
from labsession import _NOT_A_USERS_ENV, free_port
from promsession import Prometheus, require_prometheus

from tfgpu_magic.hub.discovery import HubError, NoTargets, RouteTable, target_groups

pytestmark = pytest.mark.hub

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "tfgpu-discovery"
CACHE_S = 2  # the service's --cache-seconds here (5 by default)
SCOPE = f"access:services!service={SERVICE}"


def discovery_command() -> list[str]:
    """The console script, as an operator configures it; ``python -m`` where the checkout was not reinstalled."""
    script = Path(sys.executable).parent / SERVICE
    command = [SERVICE] if script.exists() else [sys.executable, "-m", "tfgpu_magic.hub.discovery"]
    return [*command, f"--cache-seconds={CACHE_S}"]


def get(url: str, token: str | None = None, scheme: str = "Bearer") -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"{scheme} {token}".strip()} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def by_user(groups: list[dict]) -> dict[str, dict]:
    return {g["labels"]["__meta_jupyterhub_user"]: g for g in groups}


def wait_for_targets(url: str, token: str, users: set[str], timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    answer: object = None
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            status, body = get(url, token)
            answer = (status, body[:300])
            if status == 200 and set(by_user(json.loads(body))) == users:
                return json.loads(body)
        time.sleep(0.3)
    raise AssertionError(f"{url} never listed {sorted(users)}: {answer}")


def _time(stamp: str | None) -> float:
    assert stamp, "no last_activity"
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# ---- the routing table as targets, no Hub -------------------------------------------------------------------------


@pytest.mark.parametrize(("routespec", "target", "data", "expected"), [
    ("/user/alice/", "http://10.0.0.7:8888", {"user": "alice", "server_name": ""},
     (["10.0.0.7:8888"], "/user/alice/tfgpu/api/metrics", "http", "alice", "")),
    # host-based routing: the path part only; a named server; https without a port
    ("alice.hub.example.com/user/alice/gpu/", "https://10.0.0.7", {"user": "alice", "server_name": "gpu"},
     (["10.0.0.7:443"], "/user/alice/gpu/tfgpu/api/metrics", "https", "alice", "gpu")),
    # escaped in the routespec, unescaped for Prometheus (which escapes __metrics_path__ itself); IPv6
    ("/user/a%20b/", "http://[fd00::7]:8888", {"user": "a b"},
     (["[fd00::7]:8888"], "/user/a b/tfgpu/api/metrics", "http", "a b", "")),
    # configurable-http-proxy prepends the target's own path
    ("/user/carol/", "http://10.0.0.8:8000/base/", {"user": "carol", "server_name": ""},
     (["10.0.0.8:8000"], "/base/user/carol/tfgpu/api/metrics", "http", "carol", "")),
])
def test_a_user_route_is_one_target_group(routespec, target, data, expected):
    [group] = target_groups({routespec: {"routespec": routespec, "target": target, "data": data}})
    labels = group["labels"]
    assert (group["targets"], labels["__metrics_path__"], labels["__scheme__"], labels["__meta_jupyterhub_user"],
            labels["__meta_jupyterhub_server_name"]) == expected
    assert set(labels) == {"__metrics_path__", "__scheme__", "__meta_jupyterhub_user", "__meta_jupyterhub_server_name"}


ALICE = {"target": "http://127.0.0.1:5001", "data": {"user": "alice", "server_name": ""}}


def test_the_hub_services_and_unparseable_routes_are_left_out_and_the_rest_listed(caplog):
    routes = {
        "/": {"target": "http://127.0.0.1:8081", "data": {"hub": True}},
        "/services/tfgpu-discovery/": {"target": "http://127.0.0.1:10101", "data": {"service": SERVICE}},
        "/extra/": {"target": "http://127.0.0.1:9", "data": {"extra": True}},
        "/user/bad/": {"target": "unix:/run/bad.sock", "data": {"user": "bad", "server_name": ""}},
        "/user/huge/": {"target": "http://127.0.0.1:99999", "data": {"user": "huge", "server_name": ""}},
        "/user/alice/": ALICE,
    }
    skipped: set = set()
    assert [g["targets"] for g in target_groups(routes, skipped)] == [["127.0.0.1:5001"]]
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2 and "/user/bad/" in logged[0] and "/user/huge/" in logged[1], logged
    target_groups(routes, skipped)  # the same bad routes again: not logged again
    assert len(caplog.records) == 2


def test_concurrent_requests_share_one_read_and_a_failed_read_keeps_the_last_good_answer(caplog):
    clock = [0.0]
    reads: list[str] = []
    outcomes = [HubError("the Hub refused this service's token"), {"/user/alice/": ALICE},
                HubError("the Hub refused this service's token"), RuntimeError("a bug")]

    async def fetch():
        await asyncio.sleep(0.01)
        outcome = outcomes[len(reads)]
        reads.append(type(outcome).__name__)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def scenario():
        table = RouteTable(fetch, max_age=5, clock=lambda: clock[0])
        with pytest.raises(NoTargets, match="refused"):  # no good answer yet: the reason
            await table.answer()
        clock[0] += 5
        answers = await asyncio.gather(*(table.answer() for _ in range(10)))  # ten at once: one read
        assert len(reads) == 2 and len(set(answers)) == 1
        clock[0] += 4
        assert await table.answer() == answers[0] and len(reads) == 2  # within the cache time: no read
        for _ in range(2):  # refused, then a bug: the last good answer both times
            clock[0] += 5
            assert await table.answer() == answers[0]
        assert len(reads) == 4
        return json.loads(answers[0])

    assert [g["targets"] for g in asyncio.run(scenario())] == [["127.0.0.1:5001"]]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines  # one line per failed read
    assert "no targets to answer yet" in lines[0]
    assert all("answering the last good targets (1" in line for line in lines[1:]), lines


def test_help_and_a_missing_token():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    command = [sys.executable, "-m", "tfgpu_magic.hub.discovery"]
    shown = subprocess.run([*command, "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "http_sd_configs" in shown.stdout and '"scopes": ["proxy"]' in shown.stdout
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "JUPYTERHUB_API_TOKEN" in refused.stderr


# ---- under a real Hub ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub(fake_nvml_lib, tmp_path_factory):
    require_hub()
    config = three_gpus()
    path = write_config(tmp_path_factory.mktemp("hub_discovery_nvml") / "fake_nvml.cfg", config)
    discovery_port = free_port()
    prometheus_token = secrets.token_hex(16)
    services = [
        {"name": SERVICE, "url": f"http://127.0.0.1:{discovery_port}", "command": discovery_command()},
        {"name": "prometheus", "api_token": prometheus_token},
    ]
    roles = [
        {"name": SERVICE, "services": [SERVICE], "scopes": ["proxy"]},
        {"name": "prometheus", "services": ["prometheus"], "scopes": ["access:servers", SCOPE]},
        # ops may read the routing table and nothing else: test 3 runs a second service with ops's token
        {"name": "ops-proxy", "users": ["ops"], "scopes": ["proxy"]},
    ]
    # The Hub copies the proxy's activity every 2 s and each server reports its own every second, so any activity a
    # scrape caused would show in seconds (as in test_hub_idle.py).
    environment = {**fake_env(fake_nvml_lib.parent, path, base={}), "JUPYTERHUB_ACTIVITY_INTERVAL": "1"}
    with Hub(environment, activity_interval=2, services=services, roles=roles) as running:
        running.config_path, running.gpus = path, config
        running.direct = f"http://127.0.0.1:{discovery_port}/services/{SERVICE}/"
        running.proxied = f"{running.url}/services/{SERVICE}/"
        running.prometheus_token = prometheus_token
        running.start_servers("alice", "bob")
        running.tokens = {"alice": running.user_token("alice"), "bob": running.user_token("bob")}
        yield running


def test_the_managed_service_lists_each_users_server_at_its_internal_address(hub):
    groups = wait_for_targets(hub.direct + "targets", hub.prometheus_token, {"alice", "bob"})
    routes = hub.proxy_routes()
    for user in ("alice", "bob"):  # the internal address the Hub routes the user's server to
        assert routes[f"/user/{user}"]["target"].startswith("http://127.0.0.1:")
    internal = {u: routes[f"/user/{u}"]["target"].removeprefix("http://") for u in ("alice", "bob")}
    for url in (hub.direct, hub.proxied):
        status, body = get(url + "targets", hub.prometheus_token)
        assert status == 200, body
        groups = by_user(json.loads(body))
        assert set(groups) == {"alice", "bob"}  # not the Hub, not the services
        for user, group in groups.items():
            assert group["targets"] == [internal[user]]
            assert group["targets"] != [f"127.0.0.1:{hub.port}"]  # not the proxy
            assert group["labels"] == {"__metrics_path__": f"/user/{user}/tfgpu/api/metrics", "__scheme__": "http",
                                       "__meta_jupyterhub_user": user, "__meta_jupyterhub_server_name": ""}
    # the address is the server itself: it answers alice there, past the proxy
    status, body = get(f"http://{internal['alice']}/user/alice/tfgpu/api/metrics", hub.tokens["alice"], "token")
    assert status == 200 and b"tfgpu_" in body
    status, body = get(hub.direct)
    assert status == 200 and b"targets" in body  # the prefix itself: what this is, to anyone


def test_only_a_token_with_access_to_the_service_is_answered(hub):
    ops_token = hub.api("POST", "/hub/api/users/ops/tokens", {"expires_in": 600, "scopes": ["proxy"]})["token"]
    url = hub.direct + "targets"
    assert get(url)[0] == 401
    status, body = get(url, hub.prometheus_token, "")  # "Authorization: <token>", as Prometheus's HTTP SD sends
    assert status == 401 and b"type: Bearer" in body, body  # it unless told the type: the message says so
    assert get(url, "not-a-token")[0] == 403
    for token in (hub.tokens["alice"], hub.token, ops_token):  # a user, an admin-ish service, the proxy scope
        status, body = get(url, token)
        assert status == 403 and SCOPE.encode() in body, body
    assert get(url, hub.prometheus_token, "token")[0] == 200  # both forms JupyterHub accepts
    assert get(url, hub.prometheus_token, "Bearer")[0] == 200
    assert get(hub.proxied + "targets", hub.tokens["alice"])[0] == 403


# ---- THE acceptance test: one Prometheus job, every server, past the proxy ----------------------------------------


class _Exposition(http.server.BaseHTTPRequestHandler):
    text = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.text)))
        self.end_headers()
        self.wfile.write(self.text)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def dcgm_exporter(gpu: dict, index: int):
    """A static exposition of one DCGM exporter series for the GPU, with DCGM's labels."""
    handler = type("Dcgm", (_Exposition,), {"text": (
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="{index}",UUID="{gpu["uuid"]}",device="nvidia{index}",'
        f'modelName="{gpu["name"]}",Hostname="gpu-node-1"}} 87\n').encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def start_kernel(hub: Hub, user: str, notebook: str) -> tuple[str, int]:
    return hub.start_kernel(user, notebook, hub.tokens[user])


HELD_MIB = {"alice": 2048, "bob": 1024}


@pytest.fixture(scope="module")
def scraped(hub, tmp_path_factory):
    """Alice's and bob's kernels each hold memory on GPU 1 at 0 % (idle), and a Prometheus with ONE tfgpu job (HTTP
    SD from the service, the prometheus service's token for both) and a "dcgm" job scrapes them every second."""
    require_prometheus()
    pids = {user: start_kernel(hub, user, f"{user}.ipynb")[1] for user in HELD_MIB}
    hub.gpus["gpus"][1]["processes"] = [{"pid": pids[u], "used": mib * MIB, "sm": 0} for u, mib in HELD_MIB.items()]
    write_config(hub.config_path, hub.gpus)
    token = hub.prometheus_token
    with dcgm_exporter(hub.gpus["gpus"][1], 1) as dcgm_port:
        prometheus = Prometheus(tmp_path_factory.mktemp("prometheus_discovery"), scrape_configs=[
            {"job_name": "tfgpu",
             "authorization": {"type": "Bearer", "credentials": token},  # to every server
             # type given: Prometheus 2.42's HTTP SD sends the bare credential without it (its scrapes do not)
             "http_sd_configs": [{"url": hub.direct + "targets", "refresh_interval": "1s",
                                  "authorization": {"type": "Bearer", "credentials": token}}]},
            {"job_name": "dcgm", "static_configs": [{"targets": [f"127.0.0.1:{dcgm_port}"]}]},
        ])
        try:
            prometheus.wait_for('sum(up{job="tfgpu"})', lambda r: r and float(r[0]["value"][1]) == 2)
            prometheus.wait_for('up{job="dcgm"} == 1', lambda r: len(r) == 1)
            yield SimpleNamespace(prometheus=prometheus, pids=pids)
        finally:
            prometheus.stop()


def test_one_job_scrapes_every_server_at_its_internal_address(hub, scraped):
    routes = hub.proxy_routes()
    targets = [t for t in scraped.prometheus.active_targets() if t["scrapePool"] == "tfgpu"]
    assert sorted(t["scrapeUrl"] for t in targets) == sorted(
        f"{routes[f'/user/{u}']['target']}/user/{u}/tfgpu/api/metrics" for u in ("alice", "bob"))
    for target in targets:
        assert f":{hub.port}/" not in target["scrapeUrl"], target  # never the proxy
        assert target["health"] == "up", target
        assert target["discoveredLabels"]["__meta_jupyterhub_user"] in ("alice", "bob")
        assert set(target["labels"]) == {"instance", "job"}  # the __meta_ labels are dropped, no user label added
    assert {t["scrapePool"] for t in scraped.prometheus.active_targets()} == {"tfgpu", "dcgm"}


def _activity(hub: Hub) -> dict[str, float]:
    return {u: _time(hub.server_activity(u)) for u in HELD_MIB}


def test_scraping_every_second_moves_no_servers_activity(hub, scraped):
    # Settled: the requests that started the kernels went through the proxy; nobody asks anything from here on.
    deadline = time.monotonic() + 30
    seen, stable_since = _activity(hub), time.monotonic()
    while time.monotonic() - stable_since < 5:
        assert time.monotonic() < deadline, f"the servers' activity did not settle: {seen}"
        time.sleep(1)
        now = _activity(hub)
        if now != seen:
            seen, stable_since = now, time.monotonic()
    before = seen
    time.sleep(10)  # ten scrapes of each server
    assert _activity(hub) == before
    scrapes = scraped.prometheus.query('count_over_time(up{job="tfgpu"}[10s])')
    assert len(scrapes) == 2 and all(float(s["value"][1]) >= 8 for s in scrapes), scrapes
    # The watch would have seen it: one scrape through the proxy is alice's activity within seconds.
    assert get(f"{hub.url}/user/alice/tfgpu/api/metrics", hub.prometheus_token)[0] == 200
    deadline = time.monotonic() + 10
    while _activity(hub)["alice"] == before["alice"]:
        assert time.monotonic() < deadline, "a request through the proxy did not move alice's activity"
        time.sleep(0.5)


def test_each_users_kernel_memory_arrives_labelled_by_user(scraped):
    rows = scraped.prometheus.wait_for('tfgpu_kernel_gpu_memory_used_bytes{job="tfgpu"}', lambda r: len(r) == 2)
    held = {row["metric"].get("user"): float(row["value"][1]) for row in rows}
    assert held == {u: mib * MIB for u, mib in HELD_MIB.items()}, [row["metric"] for row in rows]


def test_a_join_with_dcgm_on_uuid_needs_no_label_replace(hub, scraped):
    rows = scraped.prometheus.query(
        "sum by (UUID, user) (tfgpu_kernel_gpu_memory_used_bytes) * on(UUID) group_left() DCGM_FI_DEV_GPU_UTIL")
    joined = {row["metric"].get("user"): row for row in rows}
    assert "alice" in joined, rows
    assert joined["alice"]["metric"]["UUID"] == hub.gpus["gpus"][1]["uuid"]
    assert float(joined["alice"]["value"][1]) == HELD_MIB["alice"] * MIB * 87


def test_every_expression_of_the_shipped_dashboard_runs(scraped):
    from grafana import dashboard_queries

    dashboard = json.loads((ROOT / "tfgpu_magic" / "monitoring" / "tfgpu-dashboard.json").read_text())
    queries = dashboard_queries(dashboard, {"datasource": "prometheus", "Hostname": ".*", "user": ".*"})
    assert queries
    errors = []
    for where, expression in queries:
        try:
            scraped.prometheus.query(expression)
        except AssertionError as exc:
            errors.append(f"{where}: {expression}: {exc}")
    assert not errors, "\n".join(errors)


# ---- the Hub refuses the service's token ----------------------------------------------------------------------------


@contextlib.contextmanager
def unmanaged_discovery(hub: Hub, token: str, folder: Path):
    """``python -m tfgpu_magic.hub.discovery`` beside the Hub, unmanaged: its token from the environment; one route
    per page of the Hub's table, so that every page must be read to list both servers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _NOT_A_USERS_ENV and not k.startswith("JUPYTERHUB_")}
    env.pop("PYTHONPATH", None)
    env["JUPYTERHUB_API_TOKEN"] = token
    log = folder / f"discovery-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tfgpu_magic.hub.discovery", f"--url=http://127.0.0.1:{port}",
             f"--api-url={hub.api_url}", "--cache-seconds=1", "--page-size=1"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}/services/{SERVICE}/targets", log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_hub_that_refuses_the_services_token_leaves_the_last_good_targets(hub, tmp_path):
    made = hub.api("POST", "/hub/api/users/ops/tokens", {"expires_in": 600, "scopes": ["proxy"], "note": "discovery"})
    with unmanaged_discovery(hub, made["token"], tmp_path) as service:
        good = wait_for_targets(service.url, hub.prometheus_token, {"alice", "bob"})
        hub.api("DELETE", f"/hub/api/users/ops/tokens/{made['id']}")
        time.sleep(1.5)  # past the cache: the next answer asks the Hub again, which refuses
        status, body = get(service.url, hub.prometheus_token)
        assert status == 200 and json.loads(body) == good
        deadline = time.monotonic() + 10
        while "refused this service's token" not in service.log.read_text():
            assert time.monotonic() < deadline, service.log.read_text()
            time.sleep(0.2)
        refusals = [line for line in service.log.read_text().splitlines() if "refused" in line]
        assert refusals and all("answering the last good targets (2" in line for line in refusals), refusals
        assert "Traceback" not in service.log.read_text()
        # A service that never had a good answer says why, as one line, with 503 (Prometheus keeps its targets).
        with unmanaged_discovery(hub, made["token"], tmp_path) as fresh:
            deadline = time.monotonic() + 20
            while True:
                with contextlib.suppress(OSError):
                    status, body = get(fresh.url, hub.prometheus_token)
                    break
                assert time.monotonic() < deadline, fresh.log.read_text()
                time.sleep(0.2)
            assert status == 503 and body.count(b"\n") == 1 and b"refused this service's token" in body, body


def test_the_answer_follows_a_server_stopping(hub):
    hub.stop_server("bob")
    stopped = time.monotonic()
    wait_for_targets(hub.direct + "targets", hub.prometheus_token, {"alice"}, timeout=CACHE_S + 10)
    assert time.monotonic() - stopped <= CACHE_S + 3


def test_the_managed_service_never_died(hub):
    """The Hub restarts a managed service that exits, which would hide a crash between two answers."""
    assert f"Service {SERVICE} exited" not in hub.log_tail(1_000_000)
