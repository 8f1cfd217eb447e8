"""A cell's outputs as the text a reader sees."""

from __future__ import annotations

import html
import re


def outputs_text(outputs, with_html: bool = False, raw_html: bool = False) -> str:
    """Stream outputs joined as written, every other output on lines of its own: its text/plain, then with
    ``with_html`` its text/html as text (tags dropped, entities decoded), or with ``raw_html`` as markup.

    One print can reach the notebook as several stream outputs (the kernel flushes between its pieces, more
    often on a loaded machine), so joining streams with a newline would split 'alive: False' in two.
    """
    text = ""
    for out in outputs:
        if out.output_type == "stream":
            text += out.text
            continue
        if out.output_type == "error":
            pieces = [f"{out.ename}: {out.evalue}"]
        else:
            data = out.get("data", {})
            pieces = [str(data.get("text/plain", ""))]
            if (with_html or raw_html) and "text/html" in data:
                markup = str(data["text/html"])
                pieces.append(markup if raw_html else html.unescape(re.sub(r"<[^>]+>", " ", markup)))
        text += "".join(f"\n{piece}\n" for piece in pieces)
    return text
