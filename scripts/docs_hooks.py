"""MkDocs hooks (mkdocs.yml): tables of the docs written from the code's own values at build time,
so that they cannot go stale. ``<!-- bootstrap-keywords -->`` in a page becomes the table of
``bootstrap()``'s keywords: each `BootstrapOptions` field, its default and its meaning, from the
help the command line shows (``slurm-resolver bootstrap --help``)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["bootstrap_keywords", "on_page_markdown"]

DEFAULT = re.compile(r"\s*\(default: (.*)\)$", re.S)


def bootstrap_keywords() -> str:
    """The Markdown table of ``bootstrap()``'s keywords, with their real defaults."""
    from slurm_resolver.rpc.options import FIELDS

    rows = ["| keyword | default | what it sets |", "|---|---|---|"]
    for field in FIELDS:
        meaning = field.metadata["help"]
        default = DEFAULT.search(meaning)
        assert default, f"BootstrapOptions.{field.name}'s help ends without its (default: ...)"
        rows.append(f"| `{field.name}` | {default.group(1)} | {meaning[:default.start()]} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return markdown.replace("<!-- bootstrap-keywords -->", bootstrap_keywords()) if "<!-- " in markdown else markdown
