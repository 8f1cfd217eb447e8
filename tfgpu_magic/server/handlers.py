"""Tornado handlers of the server extension: thin, authenticated, and never a 500 for a GPU fault.

Polling, not a websocket: the sidebar asks every few seconds and only while it is visible, through the
server's own URL (``base_url`` and any proxy in front of it work as for every other Jupyter API call), and
each answer is a complete document, so a lost request costs nothing to recover from. Every answer comes from
the shared feed (feed.GpuFeed), made off the event loop; the metrics are that same answer in Prometheus's
format. One more route is no GPU's: the user's consent to a notebook's saved settings (core/consent.py), which
the sidebar asks before it applies them at a kernel start.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import json
import math
import os
from typing import Any

import prometheus_client
import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from ..core import i18n, nvml_processes, pidns, words
from ..core.consent import ConsentStore
from ..core.inputs import shown
from ..core.reports import ReportReader
from .activity import KernelActivity
from .culler import IdleGpuCuller
from .deaths import KernelDeaths
from .feed import Answer, GpuFeed, encode, failure_document
from .gpus import ParentCache, checked_reports, gpu_document, only_indices, parse_indices
from .kernels import kernels_of
from .metrics import LatestCollector, Scope, renderer
from .options import load_options

API_PATH = ("tfgpu", "api")
AUTH_RESOURCE = "tfgpu"
MAX_HISTORY_S = 24 * 3600.0
MAX_CONSENT_BODY = 64 * 1024


class _FeedHandler(APIHandler):
    auth_resource = AUTH_RESOURCE
    # The server's own idle figure ignores these requests: an open sidebar polling, or a scraper, must not keep
    # an idle server from being culled by jupyter_server. (A JupyterHub's proxy counts them anyway: docs/server.md.)
    _track_activity = False

    def initialize(self, feed: GpuFeed, **_: Any) -> None:
        self.feed = feed

    async def _answer(self) -> Answer:
        try:
            return await self.feed.answer()
        except Exception as exc:  # never a 500: the sidebar shows the reason like any other missing value
            self.log.exception("tfgpu: reading the GPUs failed")
            document = failure_document(f"the tfgpu server extension failed: {type(exc).__name__}: {exc}",
                                        self.feed.other_users)
            return Answer(document, encode(document))

    def _refuse(self, message: str) -> None:
        self.set_status(400)
        self.finish(json.dumps({"message": message, "reason": "bad_query"}))

    def _one(self, name: str, example: str) -> str | None:
        given = self.get_query_arguments(name)
        if len(given) > 1:
            raise ValueError(f"tfgpu: {name} given more than once; give it once, e.g. {example}")
        return given[0] if given else None


def _seconds(raw: str, name: str, what: str = "seconds") -> float:
    try:
        value = float(raw) if len(raw) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"tfgpu: bad {name} {shown(raw)}: expected {what}, a number from 0 up, e.g. ?history=600")
    return value


class GpusHandler(_FeedHandler):
    """``GET {base_url}tfgpu/api/gpus[?index=0,2][&history=SECONDS[&since=T]][&language=zh-CN]``: every GPU, its
    processes matched to this server's kernels; with ``history``, the server's samples of the last SECONDS (after
    Unix time T); with ``language`` (the sidebar's, JupyterLab's), the vocabulary (``words``) and the answer's
    sentences in that language."""

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        try:
            index = self._one("index", "?index=0,2")
            indices = parse_indices(index) if index is not None else None
            history = self._one("history", "?history=600")
            seconds = min(_seconds(history, "history"), MAX_HISTORY_S) if history is not None else None
            since = self._one("since", "?history=600&since=1796011399.5")
            after = _seconds(since, "since", "a Unix time") if since is not None else None
            language = self._one("language", "?language=zh-CN")
        except ValueError as exc:
            self._refuse(str(exc))
            return
        answer = await self._answer()
        # The shared answer is in the server's locale; a browser in another language gets its words, and the answer's
        # sentences (i18n.said: a kernel's activity, the notes on what cannot be matched) said again in it.
        with i18n.using(language):
            localized = words.to_dict()
        relabel = isinstance(answer.document.get("words"), dict) and localized != answer.document["words"]
        if indices is None and seconds is None and not relabel:
            self.finish(answer.body)
            return
        document = answer.document if indices is None else only_indices(answer.document, indices)
        if relabel:
            with i18n.using(language):
                document = {**i18n.localize(document), "words": localized}
        body = await asyncio.to_thread(self._encode, document, seconds, after, indices)
        self.finish(body)

    def _encode(self, document: dict[str, Any], seconds: float | None, since: float | None,
                indices: tuple[int, ...] | None) -> bytes:
        # In a thread: an hour of samples for eight GPUs is a lot of numbers to write on the event loop.
        if seconds is not None:
            history = self.feed.history(seconds, since)
            if indices is not None:
                wanted = {str(i) for i in indices} | {m.get("uuid") for g in document["gpus"]
                                                      for m in g.get("mig_devices") or ()}
                history["gpus"] = {k: v for k, v in history["gpus"].items() if k in wanted}
            document = {**document, "history": history}
        return encode(document)


class MetricsHandler(_FeedHandler):
    """``GET {base_url}tfgpu/api/metrics``: the shared answer in Prometheus's text format (OpenMetrics when the
    scraper asks for it): per GPU, MIG device, and this server's kernels with their notebooks."""

    def initialize(self, feed: GpuFeed, metrics_scope: Scope | None = None, **_: Any) -> None:
        super().initialize(feed)
        self.scope = metrics_scope

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        render, content_type = renderer(self.request.headers.get("Accept", ""), self.scope)
        try:
            body = await self.feed.metrics(content_type, render)
        except Exception as exc:  # never a 500: tfgpu_nvml_available 0, as for any other missing figure
            self.log.exception("tfgpu: making the metrics failed")
            body = render(failure_document(f"the tfgpu server extension failed: {type(exc).__name__}: {exc}",
                                           self.feed.other_users))
        self.finish(body, set_content_type=content_type)


def _consent_body(body: bytes) -> tuple[Any, Any, bool]:
    """The consent request's path, settings and agree, or ValueError with a one-line ``tfgpu:`` reason."""
    example = 'e.g. {"path": "train.ipynb", "settings": {"cpus": "2"}, "agree": true}'
    if len(body) > MAX_CONSENT_BODY:
        raise ValueError(f"tfgpu: the request body is larger than {MAX_CONSENT_BODY // 1024} KiB")
    try:
        document = json.loads(body or b"null")
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise ValueError(f"tfgpu: the request body must be a JSON object, {example}")
    unknown = sorted(set(document) - {"path", "settings", "agree"})
    if unknown:
        raise ValueError(f"tfgpu: unknown key {shown(unknown[0])} in the request; valid: path, settings, agree")
    agree = document.get("agree", False)
    if not isinstance(agree, bool):
        raise ValueError(f"tfgpu: agree must be true or false, {example}")
    return document.get("path"), document.get("settings"), agree


class ConsentHandler(APIHandler):
    """``POST {base_url}tfgpu/api/consent`` with ``{"path": ..., "settings": {...}, "agree": bool}``: whether this
    user agreed to these saved settings for the notebook at ``path`` (``{"agreed": bool}``); with ``"agree": true``,
    record that they do first. The sidebar applies a notebook's saved settings at kernel start only when agreed
    (core/consent.py says why it is kept here, not in the workspace or the notebook)."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, consent: ConsentStore, **_: Any) -> None:
        self.consent = consent

    @tornado.web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            path, settings, agree = _consent_body(self.request.body)
            # In a worker thread: the store reads (and writes) its files.
            agreed = await asyncio.to_thread(self._answer, path, settings, agree)
        except ValueError as exc:  # a bad body, or a ConsentError (a path or settings that cannot be signed)
            self.set_status(400)
            self.finish(json.dumps({"message": str(exc), "reason": "bad_request"}))
            return
        except OSError as exc:  # the data folder cannot be read or written: not agreed, so the sidebar asks
            self.log.exception("tfgpu: the consent store failed")
            self.finish(json.dumps({"agreed": False, "message": f"tfgpu: cannot read or keep the consent: {exc}"}))
            return
        self.finish(json.dumps({"agreed": agreed}))

    def _answer(self, path: Any, settings: Any, agree: bool) -> bool:
        if agree:
            self.consent.agree(path, settings)
            return True
        return self.consent.agreed(path, settings)


@functools.cache
def _server_user() -> str | None:
    """The OS user the server runs as, named as the processes' users are (from the uid, like /proc's owner): not
    $USER, which a JupyterHub spawner sets to the Hub user's name."""
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        pass
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry, no USER: compare by nothing, so others count as others
        return None


class KeepHandler(APIHandler):
    """``POST {base_url}tfgpu/api/keep`` with ``{"kernel_id": ...}``: the user keeps a kernel the culler warned
    about running (the notification's button). 200 ``{"kept": true, "kernel_id", "idle_again_at"}``; 404 when the
    kernel is not warned (any more); 400 for a bad body."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, culler: IdleGpuCuller, **_: Any) -> None:
        self.culler = culler

    @tornado.web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"null") if len(self.request.body) <= MAX_CONSENT_BODY else None
        except ValueError:
            body = None
        kernel_id = body.get("kernel_id") if isinstance(body, dict) and set(body) == {"kernel_id"} else None
        if not isinstance(kernel_id, str) or not kernel_id:
            self.set_status(400)
            self.finish(json.dumps({"message": 'tfgpu: the request body must be {"kernel_id": "..."}, the kernel to '
                                               "keep running", "reason": "bad_request"}))
            return
        again = self.culler.keep(kernel_id)
        if again is None:
            self.set_status(404)
            self.finish(json.dumps({"message": f"tfgpu: kernel {shown(kernel_id)} is not about to be shut down (it "
                                               "was kept, is busy again, or is gone)", "reason": "not_warned"}))
            return
        self.finish(json.dumps({"kept": True, "kernel_id": kernel_id, "idle_again_at": round(again, 3)}))


# Every handler the extension serves: tests check each one refuses an unauthenticated request.
HANDLERS: tuple[tuple[str, type[APIHandler]], ...] = (
    ("gpus", GpusHandler), ("metrics", MetricsHandler), ("consent", ConsentHandler), ("keep", KeepHandler))


class Extension:
    """What the extension runs in one server: the feed (and its sampler), the culler, the routes."""

    def __init__(self, server_app: Any):
        options = load_options(server_app)
        own = options.own()
        show = options.show_other_users

        async def kernels() -> list[dict[str, Any]]:
            listed = await kernels_of(server_app, server_app.log)
            self.deaths.look(listed)  # the previous answer's holdings; each kernel's restarter heard
            return self.activity.annotate(listed)

        parents = ParentCache()  # used in the worker thread only
        view = pidns.use_host_proc(options.host_proc or None)
        if not view.comparable:
            server_app.log.warning("tfgpu: %s", view.note)
        reader = ReportReader(log=server_app.log.warning)  # the kernels' reports, read in the worker thread only

        def build(reading: dict[str, Any], kernel_list: list[dict[str, Any]]) -> dict[str, Any]:
            return gpu_document(reading, kernel_list, user=_server_user(), show_other_users=show, own_processes=own,
                                parent_of=parents, reports=checked_reports(reader, reading, kernel_list),
                                busy_threshold=options.gpu_busy_threshold, culler=self.culler.public(),
                                dead_kernels=self.deaths.public())

        # Each reading looks back one activity interval in NVML's per-process samples: consecutive looks cover all
        # the time between them.
        nvml_processes.window_s = max(options.activity_interval, 1.0)

        self.options = options
        self.feed = GpuFeed(options.snapshot_max_age, kernels, build, stale_after=options.stale_after,
                            interval_s=options.history_interval, kept_s=options.history_seconds,
                            other_users="shown" if show else "hidden")
        self.deaths = KernelDeaths(server_app.kernel_manager, self.feed.latest, server_app.log)
        self.activity = KernelActivity(server_app.kernel_manager, server_app.web_app.settings, self.feed.answer,
                                       options.activity_interval, server_app.log)
        self.culler = IdleGpuCuller(options.cull_idle_gpu_kernels_after, options.cull_interval, self.feed.answer,
                                    server_app.kernel_manager, server_app.log, warning=options.warning_s(),
                                    activity=self.activity)
        # The user's Jupyter data folder, as the server's notary has it (JUPYTER_DATA_DIR first).
        self.consent = ConsentStore(getattr(server_app, "data_dir", None) or None)
        base_url = server_app.web_app.settings["base_url"]
        scope = options.metrics_scope()
        resources = {"feed": self.feed, "consent": self.consent, "culler": self.culler, "metrics_scope": scope}
        server_app.web_app.add_handlers(".*$", [
            (url_path_join(base_url, *API_PATH, name), handler, resources) for name, handler in HANDLERS
        ])
        self.server_metrics = None
        if options.server_metrics:  # jupyter_server's /metrics serves prometheus_client's process-wide registry
            self.server_metrics = LatestCollector(self.feed.latest, self.feed.refresh, scope)
            prometheus_client.REGISTRY.register(self.server_metrics)
        server_app.web_app.settings["tfgpu_feed"] = self.feed
        server_app.web_app.settings["tfgpu_extension"] = self
        server_app.log.info("tfgpu: endpoints at %s (gpus, metrics, consent); history every %s s; processes are "
                            "this user's by %s", url_path_join(base_url, *API_PATH),
                            options.history_interval or "(off)",
                            "OS user" if own == "user" else "server (kernels and their children)")

    def start(self) -> None:
        """Once the server's event loop runs: the sampler's first reading, the culler."""
        self.feed.start_sampling()
        self.activity.start()
        self.culler.start()

    def stop(self) -> None:
        if self.server_metrics is not None:
            prometheus_client.REGISTRY.unregister(self.server_metrics)
            self.server_metrics = None
        self.culler.stop()
        self.activity.stop()
        self.deaths.stop()
        self.feed.close()
