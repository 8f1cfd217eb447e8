"""Under a real JupyterHub: what alice's server reports as activity is true.

- A kernel that computes on the GPU in silence (no cell, no message) moves the server's activity, which the
  single-user extension reports to the Hub; bob's kernel holding memory at 0 % moves nothing.
- With the sidebar and a live panel open on an idle kernel, the kernel sends nothing once
  ``TfgpuMagics.live_pause_after`` has passed: jupyter_server's activity figure for it stops.
- With the page hidden, the Hub's last_activity of alice's server (tfgpu's sidebar and panel open) equals, within
  one poll interval, that of bob's server, the same server without tfgpu (its server and lab extensions disabled in
  his ~/.jupyter), measured in the same run.

Headless Chromium keeps every page "visible", so a page is hidden as the browser reports it (labsession's
``set_page_visible``)."""

from __future__ import annotations

import datetime
import json
import time

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from hubsession import Hub, require_hub
from labsession import (
    CHROMIUM,
    CHROMIUM_ARGS,
    open_notebook,
    require_browser,
    run_cell,
    set_page_visible,
    write_notebook,
)

pytestmark = pytest.mark.hub

SIDEBAR = "#tfgpu-sidebar"
SIDEBAR_TAB = '.jp-SideBar [data-id="tfgpu-sidebar"]'
# The longest of JupyterLab's own polls that go on in a hidden tab (the user's identity, the kernel specs): the
# Hub's activity of two servers whose pages were hidden at once differs by at most this.
JUPYTERLAB_POLL_S = 61.0


def _time(stamp: str | None) -> float:
    assert stamp, "no last_activity"
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def hub(fake_nvml_lib, tmp_path_factory):
    require_hub()
    config = three_gpus()
    path = write_config(tmp_path_factory.mktemp("hub_idle_nvml") / "fake_nvml.cfg", config)
    environment = {**fake_env(fake_nvml_lib.parent, path, base={}), "JUPYTERHUB_ACTIVITY_INTERVAL": "1"}
    with Hub(environment, activity_interval=2, args=["--TfgpuServer.activity_interval=1"]) as running:
        # bob's server is the same server without tfgpu: both extensions disabled in his own Jupyter config.
        jupyter = running.folder / "home" / "bob" / ".jupyter"
        (jupyter / "labconfig").mkdir(parents=True)
        (jupyter / "labconfig" / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {"tfgpu_magic": True}}))
        (jupyter / "jupyter_server_config.json").write_text(json.dumps(
            {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": False}}}))
        running.config, running.path = config, path
        running.start_server("alice")
        running.start_server("bob")
        running.tokens = {"alice": running.user_token("alice"), "bob": running.user_token("bob")}
        yield running


def _kernel(hub: Hub, user: str, notebook: str) -> str:
    status, body = hub.request("POST", f"/user/{user}/api/sessions", hub.tokens[user],
                               {"path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}})
    assert status == 201, body
    return json.loads(body)["kernel"]["id"]


def _pid(hub: Hub, kernel_id: str) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        doc = json.loads(hub.request("GET", "/user/alice/tfgpu/api/gpus", hub.tokens["alice"])[1])
        pid = next((k["pid"] for k in doc["kernels"] if k["id"] == kernel_id), None)
        if pid:
            return pid
        time.sleep(0.3)
    raise AssertionError(f"no PID for kernel {kernel_id}")


def _hold(hub: Hub, holders: dict[int, int]) -> None:
    """GPU 1 lists each pid with 2 GiB at the SM utilization given."""
    hub.config["gpus"][1]["processes"] = [{"pid": p, "used": 2048 * MIB, "sm": sm} for p, sm in holders.items()]
    write_config(hub.path, hub.config)


def test_a_silent_kernel_computing_on_the_gpu_moves_the_hubs_activity_an_idle_holder_does_not(hub):
    busy = _kernel(hub, "alice", "silent training.ipynb")
    busy_pid = _pid(hub, busy)
    assert hub.request("GET", "/user/bob/api/kernels", hub.tokens["bob"])[0] == 200
    _hold(hub, {busy_pid: 100})
    time.sleep(6)  # the requests above are behind us: the proxy's activity is theirs, settled in the Hub
    alice_before, bob_before = _time(hub.server_activity("alice")), _time(hub.server_activity("bob"))
    time.sleep(8)  # nobody asks alice's or bob's server anything: only the GPU work can move an activity
    alice_after, bob_after = _time(hub.server_activity("alice")), _time(hub.server_activity("bob"))
    assert alice_after > alice_before + 4, (alice_before, alice_after)  # reported each second or so
    assert alice_after > time.time() - 4
    assert bob_after == bob_before  # bob's server, without tfgpu and with no work, reports nothing new
    _hold(hub, {busy_pid: 0})  # the same kernel at 0 %: its activity stops moving
    time.sleep(4)
    settled = _time(hub.server_activity("alice"))
    time.sleep(6)
    assert _time(hub.server_activity("alice")) == settled
    hub.request("DELETE", f"/user/alice/api/kernels/{busy}", hub.tokens["alice"])


def _login(browser, hub: Hub, user: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{hub.url}/hub/login", wait_until="domcontentloaded")
    page.fill("input#username_input", user)
    page.fill("input#password_input", "any")
    page.click("#login_submit")
    page.wait_for_url(lambda url: "/hub/login" not in url, timeout=60_000)
    page.goto(f"{hub.url}/user/{user}/lab?reset", wait_until="domcontentloaded")
    page.wait_for_selector('.jp-SideBar [data-id="filebrowser"]', timeout=120_000)
    return page


def _kernel_activity(hub: Hub, kernel_id: str) -> str:
    status, body = hub.request("GET", f"/user/alice/api/kernels/{kernel_id}", hub.tokens["alice"])
    assert status == 200, body
    return json.loads(body)["last_activity"]


def _activity_while_figures_change(hub: Hub, page, kernel_id: str, seconds: int) -> list[str]:
    """jupyter_server's last_activity of the kernel, read each second while GPU 1's utilization changes (what a
    live panel pushes)."""
    seen = []
    for _ in range(seconds):
        hub.config["gpus"][1]["utilization_gpu"] = (hub.config["gpus"][1].get("utilization_gpu", 0) + 1) % 100
        write_config(hub.path, hub.config)
        seen.append(_kernel_activity(hub, kernel_id))
        page.wait_for_timeout(1000)
    return seen


def test_an_open_sidebar_and_panel_pause_and_a_hidden_page_costs_what_jupyterlab_costs(hub):
    require_browser()
    from playwright.sync_api import sync_playwright

    write_notebook(hub.folder / "home" / "alice" / "panel.ipynb")
    _hold(hub, {})
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            alice = _login(browser, hub, "alice")
            bob = _login(browser, hub, "bob")
            assert bob.locator(SIDEBAR_TAB).count() == 0  # bob's JupyterLab has no tfgpu
            frames: list[float] = []  # when the kernel's comm messages reached alice's page (its websocket is opened
            # with the notebook: listened to from before)
            alice.on("websocket", lambda ws: ws.on(
                "framereceived", lambda f: frames.append(time.time()) if '"comm_msg"' in str(f) else None))
            alice.click(SIDEBAR_TAB)
            alice.wait_for_selector(f"{SIDEBAR} .tfgpu-gpu", timeout=60_000)
            open_notebook(alice, "panel.ipynb")
            run_cell(alice, 0, "%load_ext tfgpu_magic\n%config TfgpuMagics.refresh_interval = 0.5\n"
                               "%config TfgpuMagics.live_pause_after = 8\n%tfgpu panel")
            alice.locator(".jp-OutputArea-output").first.wait_for(state="visible", timeout=60_000)
            kernel_id = json.loads(hub.request("GET", "/user/alice/api/sessions", hub.tokens["alice"])[1])[0][
                "kernel"]["id"]
            # The figures change each second: a live panel pushes them while the kernel is young...
            moving = _activity_while_figures_change(hub, alice, kernel_id, 6)
            assert len(set(moving)) > 1, "the panel's pushes did not move the kernel's activity to begin with"
            assert frames, "no comm message reached the page to begin with"
            # ... and nothing once the kernel has been idle live_pause_after (8 s) after its cell.
            alice.wait_for_function("() => /paused: the kernel is idle/.test(document.body.innerText)",
                                    timeout=30_000)
            paused_at = time.time()
            still = _activity_while_figures_change(hub, alice, kernel_id, 8)
            assert len(set(still[1:])) == 1, still  # one last message at the pause, then none
            assert not [t for t in frames if t > paused_at + 1.5], "comm messages after the pause"

            # Both pages hidden at once: tfgpu asks nothing more (a request in flight may still land), and what
            # JupyterLab itself still asks (its user and kernel-spec polls, which go on in a hidden tab) is the same
            # on both servers, so their Hub activity differs by at most one of JupyterLab's poll intervals.
            traffic: list[tuple[float, str, str]] = []
            for who, page in (("alice", alice), ("bob", bob)):
                page.on("request", lambda r, who=who: traffic.append((time.time(), who, r.url)))
                page.on("websocket", lambda ws, who=who: ws.on(
                    "framesent", lambda f, who=who: traffic.append((time.time(), who, f"ws {str(f)[:200]}"))))
            frames.clear()
            hidden_at = time.time()
            set_page_visible(alice, False)
            set_page_visible(bob, False)
            alice.wait_for_timeout(20_000)
            last = {u: _time(hub.server_activity(u)) for u in ("alice", "bob")}
            late = [t for t in traffic if t[0] > hidden_at + 1.5 and "/tfgpu/" in t[2]]
            assert late == [], late
            assert not [t for t in frames if t > hidden_at + 3], "the kernel pushed comm messages to a hidden page"
            assert abs(last["alice"] - last["bob"]) <= JUPYTERLAB_POLL_S, (last, traffic)
        finally:
            browser.close()
