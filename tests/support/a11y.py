"""Accessibility checks of tfgpu's parts of a JupyterLab page in Chromium: axe-core (WCAG 2.0/2.1 A and AA) on
tfgpu's elements only, the name Chromium's accessibility tree gives the focused element, and what a Tab press
focuses. JupyterLab's own parts are not ours to fix, so axe runs on tfgpu's elements only.
"""

from __future__ import annotations

WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

# tfgpu's parts of the page: the sidebar, the status-bar item, tfgpu's dialogs and the panel's output.
SIDEBAR = "#tfgpu-sidebar"
STATUS_ITEM = ".tfgpu-status-item"
# A JupyterLab dialog holding tfgpu's body (``DIALOG_OF.format(".tfgpu-shutdown-dialog")``).
DIALOG_OF = ".jp-Dialog:has({})"
PANEL = ".tfgpu-panel"


def axe_violations(page, selectors: list[str]) -> list[dict]:
    """axe-core's WCAG 2.0/2.1 A and AA violations inside the elements ``selectors`` match (those on the page; a
    missing one is left out, and with none at all there is nothing to check)."""
    from axe_playwright_python.sync_playwright import Axe

    present = [[s] for s in selectors if page.locator(s).count()]
    assert present, f"none of {selectors} is on the page"
    options = {"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]}
    results = Axe().run(page, context={"include": present}, options=options)
    return results.response["violations"]


def describe(violations: list[dict]) -> str:
    """One block per violation: its id, impact, help and each element's target and summary."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} <{v['helpUrl']}>")
        for node in v["nodes"]:
            lines.append(f"    {node['target']}: {node.get('failureSummary', '').replace(chr(10), ' ')}")
    return "\n".join(lines)


def assert_no_violations(page, selectors: list[str], what: str) -> None:
    violations = axe_violations(page, selectors)
    assert not violations, f"axe on {what}: {len(violations)} violation(s)\n{describe(violations)}"


# What the focused element is, as a test reads it: where it is, whether it shows, and its name in Chromium's
# accessibility tree (the name a screen reader says, not a guess from attributes).
_FOCUSED_JS = """() => {
  let node = document.activeElement;
  while (node && node.shadowRoot && node.shadowRoot.activeElement) node = node.shadowRoot.activeElement;
  if (!node || node === document.body) return null;
  const box = node.getBoundingClientRect();
  const style = getComputedStyle(node);
  return {
    tag: node.tagName.toLowerCase(),
    cls: node.className && node.className.baseVal === undefined ? String(node.className) : '',
    text: (node.textContent || '').trim().slice(0, 80),
    tabindex: node.getAttribute('tabindex'),
    inSidebar: !!node.closest('#tfgpu-sidebar'),
    visible: box.width > 0 && box.height > 0 && style.visibility !== 'hidden' && style.display !== 'none',
    focusVisible: node.matches(':focus-visible'),
    outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0,
  };
}"""


def focused(page) -> dict | None:
    """The focused element (None: the body), with ``name``: its accessible name as Chromium computes it."""
    info = page.evaluate(_FOCUSED_JS)
    if info is None:
        return None
    session = page.context.new_cdp_session(page)
    try:
        handle = session.send("Runtime.evaluate", {"expression": "document.activeElement"})
        object_id = handle["result"]["objectId"]
        tree = session.send("Accessibility.getPartialAXTree", {"objectId": object_id, "fetchRelatives": False})
        node = tree["nodes"][0] if tree["nodes"] else {}
        info["name"] = (node.get("name") or {}).get("value", "")
        info["role"] = (node.get("role") or {}).get("value", "")
    finally:
        session.detach()
    return info


_DIFF_JS = """async ([a, b]) => {
  const load = src => new Promise((ok, fail) => { const i = new Image(); i.onload = () => ok(i); i.onerror = fail;
                                                    i.src = 'data:image/png;base64,' + src; });
  const [x, y] = await Promise.all([load(a), load(b)]);
  if (x.width !== y.width || x.height !== y.height) return -1;
  const pixels = img => { const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
                          const g = c.getContext('2d'); g.drawImage(img, 0, 0);
                          return g.getImageData(0, 0, img.width, img.height).data; };
  const p = pixels(x), q = pixels(y);
  let n = 0;
  for (let i = 0; i < p.length; i += 4) {
    if (p[i] !== q[i] || p[i + 1] !== q[i + 1] || p[i + 2] !== q[i + 2]) n++;
  }
  return n;
}"""


def pixels_differing(page, a: bytes, b: bytes) -> int:
    """How many pixels differ between two PNG screenshots of the same size (-1: different sizes), counted by the
    page's own canvas (no image library needed)."""
    import base64

    return page.evaluate(_DIFF_JS, [base64.b64encode(a).decode(), base64.b64encode(b).decode()])
