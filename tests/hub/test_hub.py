"""Under a real JupyterHub (tests/support/hubsession.py): alice's and bob's single-user servers run as one OS user,
each with tfgpu_magic as installed and the fake NVML. The endpoints live under ``/user/NAME/``; alice's token reads
hers and bob's is refused; the metrics are scraped with a user's API token; bob's server does not count alice's
kernel as his (own_processes is "server" under a Hub); what the Hub's proxy counts as activity is measured, as
docs/server.md says; and in Chromium, alice's sidebar shows her notebook's GPU memory, offers to shut her kernel
down, and after the Hub restarts her server says to reload the page, which works again."""

from __future__ import annotations

import json
import os
import pwd
import time

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from hubsession import Hub, require_hub
from labsession import CHROMIUM, CHROMIUM_ARGS, element_screenshot, keep_screenshot, require_browser, set_theme
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.hub

SIDEBAR = "#tfgpu-sidebar"
SIDEBAR_TAB = '.jp-SideBar [data-id="tfgpu-sidebar"]'


class Fake:
    def __init__(self, path, config):
        self.path = path
        self.config = config

    def hold(self, holders: dict[int, int]) -> None:
        """GPU 1 lists each pid with the MiB given."""
        self.config["gpus"][1]["processes"] = [{"pid": pid, "used": mib * MIB} for pid, mib in holders.items()]
        write_config(self.path, self.config)
        time.sleep(1.1)  # past the server's shared answer (snapshot_max_age, 0.5 s) and metrics text (1 s)


@pytest.fixture(scope="module")
def hub(fake_nvml_lib, tmp_path_factory):
    require_hub()
    config = three_gpus()
    path = write_config(tmp_path_factory.mktemp("hub_nvml") / "fake_nvml.cfg", config)
    # The Hub copies the proxy's activity every 2 s instead of 300, so the test sees it move in seconds.
    with Hub(fake_env(fake_nvml_lib.parent, path, base={}), activity_interval=2) as running:
        running.fake = Fake(path, config)
        running.start_server("alice")
        running.start_server("bob")
        running.tokens = {"alice": running.user_token("alice"), "bob": running.user_token("bob")}
        yield running


def get(hub: Hub, path: str, user: str | None):
    status, body = hub.request("GET", path, hub.tokens[user] if user else None)
    return status, body


def start_kernel(hub: Hub, user: str, notebook: str) -> tuple[str, int]:
    return hub.start_kernel(user, notebook, hub.tokens[user])


def test_each_users_endpoints_answer_their_token_only(hub):
    for name in ("gpus", "metrics"):
        path = f"/user/alice/tfgpu/api/{name}"
        assert get(hub, path, "alice")[0] == 200
        assert get(hub, path, "bob")[0] == 403  # bob's token, alice's server
        assert get(hub, path, None)[0] in (302, 401, 403)  # no token: sent to log in, or refused
    doc = json.loads(get(hub, "/user/alice/tfgpu/api/gpus", "alice")[1])
    assert [g["name"] for g in doc["gpus"]] == [g["name"] for g in three_gpus()["gpus"]]
    assert doc["own_processes"] == "server"
    assert doc["server_user"] == pwd.getpwuid(os.geteuid()).pw_name  # the OS user, not $USER (the Hub sets alice)


def test_a_scraper_with_the_users_token_gets_the_notebooks_memory(hub):
    _, pid = start_kernel(hub, "alice", "scraped.ipynb")
    hub.fake.hold({pid: 1536})
    status, body = get(hub, "/user/alice/tfgpu/api/metrics", "alice")
    assert status == 200
    held = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            assert sample.labels["user"] == "alice", sample  # every series says whose server it comes from
            if sample.name == "tfgpu_kernel_gpu_memory_used_bytes":
                # Per notebook under a Hub (metrics_detail auto): no kernel id or pid, no new series at a restart.
                assert "kernel_id" not in sample.labels and "pid" not in sample.labels, sample
                held[sample.labels["notebook"]] = sample.value
    assert held == {"scraped.ipynb": 1536 * MIB}


def test_bob_does_not_see_alices_kernel_as_his(hub):
    _, alice_pid = start_kernel(hub, "alice", "alice.ipynb")
    _, bob_pid = start_kernel(hub, "bob", "bob.ipynb")
    hub.fake.hold({alice_pid: 2048, bob_pid: 1024})
    bob = json.loads(get(hub, "/user/bob/tfgpu/api/gpus", "bob")[1])
    rows = {p["pid"]: p for p in bob["gpus"][1]["processes"]}
    # Same OS user for both servers: only bob's own kernel is his; alice's is another server's.
    bob_kernel = next(k for k in bob["kernels"] if k["id"] == rows[bob_pid]["kernel"]["id"])
    assert rows[bob_pid]["mine"] is True and bob_kernel["sessions"][0]["path"] == "bob.ipynb"
    assert rows[alice_pid]["mine"] is False and rows[alice_pid]["kernel"] is None
    alice = json.loads(get(hub, "/user/alice/tfgpu/api/gpus", "alice")[1])
    assert {p["pid"]: p["mine"] for p in alice["gpus"][1]["processes"]} == {alice_pid: True, bob_pid: False}


def test_the_proxy_counts_polls_as_activity_the_server_does_not(hub):
    """What docs/server.md says: the Hub's proxy records every successful response as the server's activity, so
    polling tfgpu's endpoints (a scraper, an open sidebar) keeps the Hub's last_activity fresh, while the
    single-user server's own figure (what jupyter_server's culler reads) does not move."""
    own_before = json.loads(get(hub, "/user/alice/api/status", "alice")[1])["last_activity"]
    hub_before = hub.server_activity("alice")
    deadline = time.monotonic() + 20
    while hub.server_activity("alice") == hub_before:
        assert time.monotonic() < deadline, "the Hub's last_activity did not move with polls"
        get(hub, "/user/alice/tfgpu/api/gpus", "alice")
        time.sleep(0.5)
    assert json.loads(get(hub, "/user/alice/api/status", "alice")[1])["last_activity"] == own_before


# ---- in Chromium ------------------------------------------------------------------------------------------------


@pytest.fixture
def alice_page(hub):
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{hub.url}/hub/login", wait_until="domcontentloaded")
            page.fill("input#username_input", "alice")
            page.fill("input#password_input", "any")
            page.click("#login_submit")
            page.wait_for_url(lambda url: "/hub/login" not in url, timeout=60_000)  # logged in: sent on
            page.goto(f"{hub.url}/user/alice/lab?reset", wait_until="domcontentloaded")
            page.wait_for_selector(SIDEBAR_TAB, timeout=120_000)
            yield page
        finally:
            browser.close()


def open_sidebar(page):
    if not page.locator(SIDEBAR).is_visible():
        page.click(SIDEBAR_TAB)
    page.wait_for_selector(f"{SIDEBAR} .tfgpu-gpu", timeout=60_000)
    return page.locator(SIDEBAR)


def test_alices_sidebar_under_the_hub(hub, alice_page, tmp_path):
    page = alice_page
    _, pid = start_kernel(hub, "alice", "train.ipynb")
    _, bob_pid = start_kernel(hub, "bob", "bobs.ipynb")
    hub.fake.hold({pid: 4096, bob_pid: 512})
    sidebar = open_sidebar(page)
    page.wait_for_function("s => document.querySelector(s).textContent.includes('train.ipynb')", arg=SIDEBAR,
                           timeout=30_000)
    text = sidebar.inner_text()
    assert "NVIDIA H100 80GB HBM3" in text and "4,096 MiB" in text
    assert "bobs.ipynb" not in text  # bob's notebook is his server's: never named in alice's sidebar
    assert "not this server’s" in text  # bob's kernel runs as the same OS user: tagged, not taken for alice's
    assert sidebar.locator(".tfgpu-shutdown").count() == 1  # her kernel only; bob's process offers nothing
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        shot = tmp_path / f"sidebar-hub-{theme.split()[-1].lower()}.png"
        element_screenshot(sidebar, shot)
        keep_screenshot(shot)

    # The Hub stops and starts alice's server: the page's session is gone. The sidebar says to reload, and
    # reloading works.
    hub.stop_server("alice")
    hub.start_server("alice")
    page.wait_for_function("s => /reload the page/i.test(document.querySelector(s).textContent)", arg=SIDEBAR,
                           timeout=60_000)
    assert "logged out?" not in sidebar.inner_text()
    # JupyterLab's own Hub plugin may have asked "Your server ... is not running. Would you like to restart it?"
    # while the server was down: the user dismisses it (the server is back).
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and dialog.first.is_visible():
        dialog.get_by_role("button", name="Dismiss").click()
    sidebar.get_by_role("button", name="Reload page").click()
    page.wait_for_selector(SIDEBAR_TAB, timeout=120_000)
    sidebar = open_sidebar(page)
    assert "NVIDIA H100 80GB HBM3" in sidebar.inner_text()
    assert "reload the page" not in sidebar.inner_text().lower()


def test_an_open_jupyterlab_tab_is_activity_to_the_hub_with_the_sidebar_closed(hub, alice_page):
    """What docs/server.md says of JupyterLab's own polling: with alice's JupyterLab open, the GPUs sidebar closed and
    its status-bar item off (nothing of tfgpu asked), the Hub's last_activity of her server still moves."""
    page = alice_page
    settings = "/user/alice/lab/api/settings/tfgpu_magic:sidebar"
    status, _ = hub.request("PUT", settings, hub.tokens["alice"], {"raw": '{"statusBar": false}'})
    assert status == 204, status
    page.reload()
    page.wait_for_selector(SIDEBAR_TAB, timeout=120_000)
    # The settings applied (the sidebar's poll has stopped), its last request's activity copied into the Hub.
    page.wait_for_timeout(6000)
    assert not page.locator(SIDEBAR).is_visible()
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/tfgpu/api/" in r.url else None)
    before = hub.server_activity("alice")
    deadline = time.monotonic() + 45
    while hub.server_activity("alice") == before:
        assert time.monotonic() < deadline, "an open JupyterLab did not move the Hub's last_activity"
        page.wait_for_timeout(1000)
    hub.request("PUT", settings, hub.tokens["alice"], {"raw": "{}"})
    assert asked == []
