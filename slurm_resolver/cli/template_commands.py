"""The commands about the sbatch templates: ``templates``, ``render`` and ``submit``."""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def pairs(items: list[str] | None) -> dict[str, str]:
    """``--set KEY=VALUE`` arguments as a mapping (the template checks the keys and values)."""
    from ..template_schema import TemplateParameterError

    values = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TemplateParameterError(f"--set {item!r} is not KEY=VALUE", f"e.g. --set {key or 'nodes'}=4")
        values[key] = value
    return values


def render(args: argparse.Namespace) -> int:
    """``render``: the sbatch text of a template."""
    from ..templates import render as render_template

    print(render_template(args.template, pairs(args.set)), end="")
    return 0


def submit(args: argparse.Namespace) -> int:
    """``submit``: render and submit; the job id alone on stdout, or with ``--wait`` the job's output."""
    from ..submission import submit as submit_text
    from ..submission import wait
    from ..templates import render as render_template

    job_id = submit_text(render_template(args.template, pairs(args.set)))
    if not args.wait:
        print(job_id, flush=True)  # alone on stdout, as sbatch --parsable: JOB=$(slurm-resolver submit ...)
        return 0
    progress = io.StringIO() if args.quiet else sys.stderr
    print(f"slurm-resolver: submitted batch job {job_id}", file=progress, flush=True)
    return wait(job_id, timeout=args.timeout, progress=progress, failure=sys.stderr)  # -q: a failure still said


def templates(args: argparse.Namespace) -> int:
    """``templates``: the listing, or with ``--json`` the same as data."""
    if args.json:
        print(json.dumps(_as_data(args.name), indent=1))
    else:
        print(listing(args.name), end="")
    return 0


def listing(only: str | None = None) -> str:
    """Every bundled template (or ``only``) with its purpose and the defaults it changes, then every
    parameter with its default (``only``'s own, starred where it changes the schema's) and meaning."""
    from ..template_schema import SCHEMA
    from ..templates import available, defaults, describe

    names = [only] if only else available()  # describe() refuses a name that is not a template
    lines = ["templates (slurm-resolver render|submit NAME --set KEY=VALUE ...):"]
    for template in map(describe, names):
        lines.append(f"  {template.name:16} {template.purpose}")
        changes = " ".join(f"{k}={v}" for k, v in template.defaults.items() if k not in ("job_name",))
        lines.append(f"  {'':16} defaults: {changes}")
    values = defaults(only) if only else {p.name: p.default for p in SCHEMA}
    own = describe(only).defaults if only else {}
    lines.append(f"parameters of {only} (name, default, meaning; * {only}'s own default):" if only else
                 "parameters (name, default, meaning; a template's own defaults above win):")
    for p in SCHEMA:
        default = "(this Python)" if p.name == "python" else (values[p.name] or "-")
        lines.append(f"  {p.name:15} {'*' if p.name in own else ' '} {default:22} {p.meaning}")
    return "\n".join(lines) + "\n"


def _as_data(only: str | None) -> dict[str, Any]:
    from ..template_schema import KINDS, SCHEMA
    from ..templates import available, defaults, describe

    found = [describe(name) for name in ([only] if only else available())]
    return {
        "templates": [{"name": t.name, "purpose": t.purpose, "own_defaults": dict(t.defaults),
                       "defaults": defaults(t.name)} for t in found],
        "parameters": [{"name": p.name, "default": p.default, "kind": p.kind, "form": KINDS[p.kind].form,
                        "meaning": p.meaning, "sbatch_option": p.option} for p in SCHEMA],
    }
