"""How long tfgpu-discovery takes to answer Prometheus for 500 user servers, against a user server's /api/status
through the Hub's proxy, measured in the same run.

    python benchmarks/bench_discovery.py [--routes 500] [--requests 200] [--cold 10]

A real JupyterHub (tests/support/hubsession.py) with one real user server (u0), and ``--routes`` more user routes
added to configurable-http-proxy's table through its REST API as the Hub adds a user's (``"jupyterhub": true``,
``user``, ``server_name``; nothing listens behind them). The Hub's route check, which deletes routes it does not
know, runs every ``last_activity_interval``: an hour here. ``tfgpu-discovery`` runs as the Hub's managed service
with ``--cache-seconds 2``. Each request is timed alone, in series, on one keep-alive connection per address:

- cold: the first request after the cache time: the Hub's routing table read anew, every page of GET /hub/api/proxy;
- warm: a request within the cache time (the answer made once per read of the table);
- the Hub's own GET /hub/api/proxy, every page (what a cold answer waits for);
- the baseline: u0's /api/status through the proxy, and the same past the proxy.

Prints medians, p90 and each as a ratio of the baseline's median. Needs what the Hub tests need (`make setup`).
Takes about a minute.
"""

from __future__ import annotations

import argparse
import http.client
import json
import secrets
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from hubsession import Hub, hub_available  # noqa: E402
from labsession import free_port  # noqa: E402

SERVICE = "tfgpu-discovery"
CACHE_S = 2.0
PAGINATION = "application/jupyterhub-pagination+json"


class Client:
    """One keep-alive connection to ``base`` (http://host:port), each request timed."""

    def __init__(self, base: str, token: str):
        parts = urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.token = token

    def get(self, path: str, accept: str = "application/json") -> tuple[float, int, bytes]:
        start = time.perf_counter()
        self.connection.request("GET", path, headers={"Authorization": f"Bearer {self.token}", "Accept": accept})
        response = self.connection.getresponse()
        body = response.read()
        return time.perf_counter() - start, response.status, body

    def times(self, path: str, n: int, **kw: str) -> list[float]:
        seen = []
        for _ in range(n):
            elapsed, status, body = self.get(path, **kw)
            if status != 200:
                raise RuntimeError(f"GET {path}: HTTP {status}: {body[:300]!r}")
            seen.append(elapsed)
        return seen

    def close(self) -> None:
        self.connection.close()


def hub_pages(client: Client) -> tuple[float, int]:
    """(seconds, pages) to read the Hub's whole routing table as the service does."""
    start, offset, pages = time.perf_counter(), 0, 0
    while True:
        _, status, body = client.get(f"/hub/api/proxy?offset={offset}&limit=200", accept=PAGINATION)
        if status != 200:
            raise RuntimeError(f"GET /hub/api/proxy: HTTP {status}: {body[:300]!r}")
        pages += 1
        following = json.loads(body)["_pagination"]["next"]
        if not following:
            return time.perf_counter() - start, pages
        offset = following["offset"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=500, help="user routes added to the proxy (default 500)")
    parser.add_argument("--requests", type=int, default=200, help="warm and baseline requests each (default 200)")
    parser.add_argument("--cold", type=int, default=10, help="cold requests, each after the cache time (default 10)")
    args = parser.parse_args()
    why = hub_available()
    if why:
        print(f"bench_discovery: {why}", file=sys.stderr)
        return 2
    script = Path(sys.executable).parent / SERVICE
    command = [SERVICE] if script.exists() else [sys.executable, "-m", "tfgpu_magic.hub.discovery"]
    port, token, reader = free_port(), secrets.token_hex(16), secrets.token_hex(16)
    services = [
        {"name": SERVICE, "url": f"http://127.0.0.1:{port}", "command": [*command, f"--cache-seconds={CACHE_S}"]},
        {"name": "prometheus", "api_token": token}, {"name": "reader", "api_token": reader}]
    roles = [
        {"name": SERVICE, "services": [SERVICE], "scopes": ["proxy"]},
        {"name": "prometheus", "services": ["prometheus"],
         "scopes": ["access:servers", f"access:services!service={SERVICE}"]},
        {"name": "reader", "services": ["reader"], "scopes": ["proxy"]}]
    rows: list[tuple[str, list[float]]] = []
    with Hub({}, activity_interval=3600, services=services, roles=roles) as hub:
        hub.start_server("u0")
        nobody = free_port()  # nothing listens there: routes only
        for i in range(1, args.routes + 1):
            status, body = hub.proxy_api("POST", f"/api/routes/user/u{i}", {
                "target": f"http://127.0.0.1:{nobody}", "user": f"u{i}", "server_name": "", "jupyterhub": True})
            if status >= 300:
                raise RuntimeError(f"adding the route of u{i}: HTTP {status}: {body[:300]!r}")
        internal = hub.proxy_routes()["/user/u0"]["target"]
        discovery = Client(f"http://127.0.0.1:{port}", token)
        proxied, direct = Client(hub.url, token), Client(internal, token)
        hub_api = Client(hub.api_url, reader)  # the Hub itself, as the service reads it
        targets = f"/services/{SERVICE}/targets"
        deadline = time.monotonic() + 30
        while True:  # the service is up and lists every route
            try:
                _, status, body = discovery.get(targets)
                if status == 200 and len(json.loads(body)) == args.routes + 1:
                    break
            except OSError:
                discovery.close()
                discovery = Client(f"http://127.0.0.1:{port}", token)
            if time.monotonic() > deadline:
                raise RuntimeError(f"tfgpu-discovery did not list {args.routes + 1} targets:\n{hub.log_tail()}")
            time.sleep(0.5)
        size = len(body)
        rows.append(("u0's /api/status through the proxy (baseline)", proxied.times("/user/u0/api/status",
                                                                                      args.requests)))
        rows.append(("u0's /api/status past the proxy", direct.times("/user/u0/api/status", args.requests)))
        page_times, pages = [], 0
        for _ in range(20):
            elapsed, pages = hub_pages(hub_api)
            page_times.append(elapsed)
        rows.append((f"the Hub's GET /hub/api/proxy, {pages} pages of 200", page_times))
        cold, warm = [], []
        for _ in range(args.cold):
            time.sleep(CACHE_S + 0.2)
            cold += discovery.times(targets, 1)
            warm += discovery.times(targets, max(1, args.requests // args.cold))
        rows.append(("tfgpu-discovery targets, cold (the table read anew)", cold))
        rows.append(("tfgpu-discovery targets, warm (within the cache time)", warm))
        for client in (discovery, proxied, direct, hub_api):
            client.close()
    base = statistics.median(rows[0][1])
    print(f"tfgpu-discovery for {args.routes + 1} user servers ({args.routes} routes added + u0), answer "
          f"{size / 1024:.0f} KiB; medians of serial requests, each a ratio of the baseline's median")
    print()
    print("| request | n | median ms | p90 ms | / baseline |")
    print("|---|---|---|---|---|")
    for name, seen in rows:
        median = statistics.median(seen)
        p90 = statistics.quantiles(seen, n=10)[-1] if len(seen) >= 2 else seen[0]
        print(f"| {name} | {len(seen)} | {median * 1000:.1f} | {p90 * 1000:.1f} | {median / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
