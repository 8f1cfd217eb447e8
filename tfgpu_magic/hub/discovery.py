"""tfgpu-discovery: Prometheus HTTP service discovery of a JupyterHub's running user servers, at their internal
addresses.

One Prometheus job scrapes every user server's ``tfgpu/api/metrics`` directly, never through the Hub's proxy: the
proxy records every response it passes on as the user's activity, so a scraper going through it would keep every
server alive for the idle culler.

It runs as a JupyterHub service. It reads the Hub's routing table (``GET {api}/proxy``, every page; its token needs
the ``proxy`` scope and nothing else) at most once per ``--cache-seconds``, and answers ``GET {prefix}targets`` with
one target group per user-server route::

    [{"targets": ["10.0.0.7:8888"],
      "labels": {"__metrics_path__": "/user/alice/tfgpu/api/metrics", "__scheme__": "http",
                 "__meta_jupyterhub_user": "alice", "__meta_jupyterhub_server_name": ""}}]

The user and server name are ``__meta_`` labels, dropped after relabelling: the servers' own series carry ``user``
and ``server_name`` already. A request must carry a token the Hub accepts with access to this service
(``access:services!service=tfgpu-discovery``, or broader), as ``Authorization: Bearer <token>`` or ``token <token>``.

If the Hub refuses the service's token or cannot be reached, one line is logged and the last good targets are
answered; before any good answer, 503 with a one-line reason (Prometheus then keeps the targets it had).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

from tornado import httpclient, web

log = logging.getLogger("tfgpu_magic.hub.discovery")

NAME = "tfgpu-discovery"
METRICS = "tfgpu/api/metrics"
PAGINATION = "application/jupyterhub-pagination+json"
DEFAULT_PORTS = {"http": 80, "https": 443}


# ---- the routing table as targets -------------------------------------------------------------------------------


class BadRoute(ValueError):
    """A user-server route whose target cannot be scraped as it stands."""


def route_path(routespec: str) -> str:
    """The URL path of a routespec, unescaped: ``/user/alice/``, also from a host-based one
    (``alice.hub.example.com/user/alice/``). Unescaped because Prometheus escapes ``__metrics_path__`` itself."""
    path = routespec if routespec.startswith("/") else "/" + routespec.partition("/")[2]
    path = unquote(path)
    return path if path.endswith("/") else path + "/"


def target_group(routespec: str, route: dict[str, Any]) -> dict[str, Any]:
    """The HTTP SD target group of one user-server route (``BadRoute`` when its target is no ``http(s)://host:port``).

    The proxy forwards ``/user/alice/x`` to ``{target}/user/alice/x`` (configurable-http-proxy prepends the target's
    own path, if any), so the metrics path is the target's path, the route's, then ``tfgpu/api/metrics``."""
    data = route.get("data") or {}
    target = route.get("target")
    if not isinstance(target, str):
        raise BadRoute(f"target {target!r} is not a URL")
    parts = urlsplit(target)
    try:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError as exc:  # a port that is no number, or out of range
        raise BadRoute(f"target {target!r}: {exc}") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        raise BadRoute(f"target {target!r} is not http(s)://host:port")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return {
        "targets": [f"{host}:{port}"],
        "labels": {
            "__metrics_path__": unquote(parts.path.rstrip("/")) + route_path(routespec) + METRICS,
            "__scheme__": parts.scheme,
            "__meta_jupyterhub_user": str(data["user"]),
            "__meta_jupyterhub_server_name": str(data.get("server_name") or ""),
        },
    }


def target_groups(routes: dict[str, dict[str, Any]], skipped: set[tuple[str, str]] | None = None) -> list[dict]:
    """One target group per user-server route (``data`` has ``user``), in routespec order: the Hub's own route,
    services' and extra routes are not servers. A route that cannot be parsed is logged (once per routespec and
    target, when ``skipped`` keeps them across calls) and left out; the others are listed."""
    skipped = set() if skipped is None else skipped
    groups = []
    for routespec in sorted(routes):
        route = routes[routespec]
        data = route.get("data") if isinstance(route, dict) else None
        if not isinstance(data, dict) or "user" not in data:
            continue
        try:
            groups.append(target_group(routespec, route))
        except BadRoute as exc:
            key = (routespec, repr(route.get("target")))
            if key not in skipped:
                skipped.add(key)
                log.warning("%s: skipping the route %s: %s", NAME, routespec, exc)
    return groups


# ---- the Hub's routing table --------------------------------------------------------------------------------------


class HubError(Exception):
    """The Hub did not give its routing table: refused the token, unreachable, or an answer that is no table."""


async def fetch_routes(client: httpclient.AsyncHTTPClient, api_url: str, token: str, *, page_size: int = 200,
                       timeout: float = 10.0) -> dict[str, dict[str, Any]]:
    """The Hub's whole routing table, every page of ``GET {api_url}/proxy`` (JupyterHub 5 pages it when asked with
    the pagination media type; an older Hub answers the whole table as one dict, which is taken as it is)."""
    routes: dict[str, dict[str, Any]] = {}
    offset, limit = 0, page_size
    base = api_url.rstrip("/") + "/proxy"
    while True:
        url = f"{base}?{urlencode({'offset': offset, 'limit': limit})}"
        try:
            response = await client.fetch(
                url, headers={"Authorization": f"token {token}", "Accept": f"{PAGINATION}, application/json"},
                connect_timeout=timeout, request_timeout=timeout, raise_error=False)
        except OSError as exc:  # not raised with raise_error=False in tornado 6, but a resolver may
            raise HubError(f"the Hub's API at {api_url} is unreachable: {exc}") from None
        if response.code == 599:
            raise HubError(f"the Hub's API at {api_url} is unreachable: {response.error}")
        if response.code in (401, 403):
            raise HubError(f"the Hub refused this service's token (HTTP {response.code} from GET {base}): "
                           "its role needs the 'proxy' scope, and a token that is not revoked")
        if response.code != 200:
            raise HubError(f"HTTP {response.code} from GET {base}: {response.body[:200]!r}")
        try:
            doc = json.loads(response.body)
        except ValueError:
            raise HubError(f"GET {base} answered no JSON: {response.body[:200]!r}") from None
        if isinstance(doc, dict) and isinstance(doc.get("_pagination"), dict):
            page, following = doc.get("items"), doc["_pagination"].get("next")
        else:
            page, following = doc, None
        if not isinstance(page, dict):
            raise HubError(f"GET {base} answered no routing table: {response.body[:200]!r}")
        routes.update(page)  # a route added between two pages may shift one over the boundary: listed once
        if not isinstance(following, dict) or int(following.get("offset", 0)) <= offset:
            return routes
        offset, limit = int(following["offset"]), int(following.get("limit") or limit)


class NoTargets(Exception):
    """No good routing table yet: the reason in one line."""


class RouteTable:
    """The target groups of the Hub's routes, fetched at most once per ``max_age`` seconds; concurrent requests
    share one fetch. A failed fetch keeps the last good answer (and is retried after ``max_age``)."""

    def __init__(self, fetch: Callable[[], Awaitable[dict]], max_age: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self._fetch = fetch
        self.max_age = max_age
        self._clock = clock
        self._checked = -math.inf
        self._good_at = -math.inf
        self._pending: asyncio.Future | None = None
        self._skipped: set[tuple[str, str]] = set()
        self.groups: list[dict] | None = None
        self.body: bytes | None = None  # the groups as JSON, made once per fetch
        self.reason = "the Hub's routing table was not read yet"
        self.failing = False

    async def answer(self) -> bytes:
        """The HTTP SD JSON (NoTargets before any good table)."""
        if self._clock() - self._checked >= self.max_age:
            if self._pending is None:
                self._pending = asyncio.ensure_future(self._refresh())
            await asyncio.shield(self._pending)
        if self.body is None:
            raise NoTargets(self.reason)
        return self.body

    async def _refresh(self) -> None:
        try:
            routes = await self._fetch()
        except Exception as exc:  # never an empty answer: whatever went wrong, the last good one stands
            self.reason = str(exc) if isinstance(exc, HubError) else f"reading the Hub's routing table failed: {exc!r}"
            self.failing = True
            if self.groups is None:
                log.warning("%s: %s; no targets to answer yet (503)", NAME, self.reason)
            else:
                log.warning("%s: %s; answering the last good targets (%d, read %.0f s ago)", NAME, self.reason,
                            len(self.groups), self._clock() - self._good_at)
        else:
            self.groups = target_groups(routes, self._skipped)
            self.body = json.dumps(self.groups).encode()
            if self.failing:
                log.info("%s: the Hub's routing table is read again: %d targets", NAME, len(self.groups))
            self.failing = False
            self._good_at = self._clock()
        finally:
            self._checked = self._clock()
            self._pending = None


# ---- the service ------------------------------------------------------------------------------------------------


class _Handler(web.RequestHandler):
    def initialize(self, service: DiscoveryService) -> None:
        self.service = service

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None))[1]
        reason = getattr(exc, "log_message", None) or self._reason
        if status_code == 401:  # send_error cleared the headers set before the error
            self.set_header("WWW-Authenticate", "Bearer")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{status_code}: {reason}\n")


class RootHandler(_Handler):
    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{NAME}: Prometheus HTTP service discovery of this Hub's user servers (tfgpu_magic): "
                    f"GET {self.service.prefix}targets with a token that has access to the service "
                    f"{self.service.name}.\n")


class TargetsHandler(_Handler):
    async def get(self) -> None:
        await self.service.authenticate(self)
        try:
            body = await self.service.routes.answer()
        except NoTargets as exc:
            raise web.HTTPError(503, str(exc)) from None
        self.set_header("Content-Type", "application/json")
        self.finish(body)


class DiscoveryService:
    """The routing table, the token check and the tornado application."""

    def __init__(self, *, api_url: str, token: str, prefix: str, name: str = NAME, cache_seconds: float = 5.0,
                 page_size: int = 200, timeout: float = 10.0, hub_auth: Any = None):
        self.api_url = api_url
        self.prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
        self.name = name
        self.scope = f"access:services!service={name}"
        self.client = httpclient.AsyncHTTPClient()
        self.routes = RouteTable(lambda: fetch_routes(self.client, api_url, token, page_size=page_size,
                                                      timeout=timeout), max_age=cache_seconds)
        self.auth = hub_auth if hub_auth is not None else _hub_auth(api_url, token)

    async def authenticate(self, handler: web.RequestHandler) -> None:
        """Pass a token the Hub accepts with access to this service; 401 without one, 403 for any other."""
        from jupyterhub.services.auth import check_scopes

        token = self.auth.get_token(handler, in_cookie=False)
        if not token:
            header = handler.request.headers.get("Authorization", "").strip()
            if header and " " not in header:
                # Prometheus 2.42's http_sd_configs sends the bare credential unless its type is given
                raise web.HTTPError(401, "the Authorization header has no type: send 'Authorization: Bearer <token>' "
                                         "(in Prometheus's http_sd_configs: authorization: {type: Bearer, ...})")
            raise web.HTTPError(401, "no token: send 'Authorization: Bearer <token>' with a token that has the "
                                     f"scope {self.scope}")
        try:
            model = await self.auth.user_for_token(token, sync=False)
        except web.HTTPError as exc:  # the Hub could not be asked (HubAuth logged why)
            raise web.HTTPError(503, f"the token could not be checked with the Hub: {exc.log_message}") from None
        if not model:
            raise web.HTTPError(403, "the Hub does not accept this token")
        if not check_scopes({self.scope}, set(model.get("scopes") or ())):
            raise web.HTTPError(403, f"{model.get('kind', 'user')} {model.get('name')} lacks the scope {self.scope}")

    def application(self) -> web.Application:
        here = re.escape(quote(self.prefix.rstrip("/")))
        return web.Application([(here + "/?", RootHandler, {"service": self}),
                                (here + "/targets/?", TargetsHandler, {"service": self})], log_function=_log_request)


def _require_jupyterhub() -> None:
    try:
        import jupyterhub.services.auth  # noqa: F401
    except ImportError:
        raise SystemExit(f"{NAME}: needs jupyterhub to check tokens with the Hub: pip install jupyterhub") from None


def _hub_auth(api_url: str, token: str) -> Any:
    _require_jupyterhub()
    from jupyterhub.services.auth import HubAuth

    return HubAuth(api_url=api_url, api_token=token)


def _log_request(handler: web.RequestHandler) -> None:
    """Prometheus asks every refresh interval: successes at debug level, the rest at warning."""
    status = handler.get_status()
    level = logging.DEBUG if status < 400 else logging.WARNING
    log.log(level, "%d %s %s %.1f ms", status, handler.request.method, handler.request.path,
            1000 * handler.request.request_time())


# ---- command line -------------------------------------------------------------------------------------------------

EPILOG = """\
As a JupyterHub managed service (the Hub sets every JUPYTERHUB_* variable this reads):

  c.JupyterHub.services = [{"name": "tfgpu-discovery", "url": "http://127.0.0.1:10101",
                            "command": ["tfgpu-discovery"]}]
  c.JupyterHub.load_roles = [{"name": "tfgpu-discovery", "services": ["tfgpu-discovery"], "scopes": ["proxy"]}]

Unmanaged: the same service entry without "command" and with "api_token", and this program run with
JUPYTERHUB_API_TOKEN set to that token (a token never goes on the command line) and --url, --api-url.

Prometheus: http_sd_configs url http://127.0.0.1:10101/services/tfgpu-discovery/targets, with the
authorization of a token that has access:services!service=tfgpu-discovery (and access:servers to scrape).
"""


def parse_args(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> argparse.Namespace:
    env = os.environ if environ is None else environ
    name = env.get("JUPYTERHUB_SERVICE_NAME") or NAME
    parser = argparse.ArgumentParser(
        prog=NAME, description="Prometheus HTTP service discovery of a JupyterHub's running user servers at their "
                               "internal addresses (tfgpu/api/metrics of each), never through the Hub's proxy.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=env.get("JUPYTERHUB_SERVICE_URL") or "http://127.0.0.1:10101",
                        help="where to listen, http://HOST:PORT (default: $JUPYTERHUB_SERVICE_URL, else %(default)s)")
    parser.add_argument("--prefix", default=env.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{name}/",
                        help="URL prefix of the answers (default: $JUPYTERHUB_SERVICE_PREFIX, else %(default)s)")
    parser.add_argument("--api-url", default=env.get("JUPYTERHUB_API_URL") or "http://127.0.0.1:8081/hub/api",
                        help="the Hub's API (default: $JUPYTERHUB_API_URL, else %(default)s)")
    parser.add_argument("--service-name", default=name,
                        help="a request needs access:services!service=NAME (default: $JUPYTERHUB_SERVICE_NAME, else "
                             "%(default)s)")
    parser.add_argument("--cache-seconds", type=_non_negative, default=5.0,
                        help="read the Hub's routing table at most once in this many seconds (default %(default)s)")
    parser.add_argument("--page-size", type=int, default=200,
                        help="routes asked per page of GET {api}/proxy; the Hub caps it at its api_page_max_limit "
                             "(default %(default)s)")
    parser.add_argument("--timeout", type=_non_negative, default=10.0,
                        help="seconds to wait for the Hub's answer (default %(default)s)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="(default %(default)s)")
    args = parser.parse_args(argv)
    parts = urlsplit(args.url)
    if parts.scheme != "http" or parts.port is None:
        parser.error(f"--url {args.url!r}: give http://HOST:PORT (this service serves plain HTTP)")
    if args.page_size < 1:
        parser.error(f"--page-size {args.page_size}: give 1 or more")
    return args


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds, 0 or more")
    return value


async def serve(args: argparse.Namespace, token: str) -> None:
    service = DiscoveryService(api_url=args.api_url, token=token, prefix=args.prefix, name=args.service_name,
                               cache_seconds=args.cache_seconds, page_size=args.page_size, timeout=args.timeout)
    parts = urlsplit(args.url)
    server = service.application().listen(parts.port, address=parts.hostname or "")
    log.info("%s: serving %s%stargets from the routing table of %s (read at most once in %g s)", NAME,
             args.url.rstrip("/"), service.prefix, args.api_url, args.cache_seconds)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.stop()
    log.info("%s: stopped", NAME)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not token:
        print(f"{NAME}: JUPYTERHUB_API_TOKEN is not set: run it as a JupyterHub service, or set it to the service's "
              "api_token (a token with the 'proxy' scope)", file=sys.stderr)
        return 2
    _require_jupyterhub()  # a one-line error before listening
    asyncio.run(serve(args, token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
