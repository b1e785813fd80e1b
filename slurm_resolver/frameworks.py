"""Which framework a command runs, told from the imports of its Python script: the ``--format`` that
``slurm-resolver bootstrap -- COMMAND`` (and ``run``) export when none is given.

``python train.py``, ``python -u train.py ARGS``, ``python -m package.module``, ``python -c CODE``, an
executable ``train.py`` and ``env NAME=VALUE ... python ...`` are read; the script's own import
statements (anywhere in it, not those of the modules it imports) name the framework: ``torch``,
``lightning``, ``accelerate`` or ``deepspeed`` (PyTorch's variables, ``torch``), ``jax`` or ``flax``
(``jax``), ``tensorflow`` or ``tf_keras`` (``tf``). Where that cannot be told (another program, a script
that imports none of them, or two of them), the format is ``shell`` and the reason is given.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Sequence

__all__ = ["FRAMEWORKS", "format_for"]

FRAMEWORKS: dict[str, str] = {
    "torch": "torch", "lightning": "torch", "pytorch_lightning": "torch", "lightning_fabric": "torch",
    "accelerate": "torch", "deepspeed": "torch", "jax": "jax", "flax": "jax", "tensorflow": "tf", "tf_keras": "tf",
}
"""Top-level modules a script imports, and the ``--format`` their framework reads."""

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_WITH_VALUE = {"-W", "-X", "--check-hash-based-pycs"}
"""Options of ``python`` that take the next word as their value."""
_MOST_BYTES = 4 * 1024 * 1024


def _read(path: str) -> str | None:
    """The text of the file ``path`` (its first 4 MiB), or None where there is none to read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(_MOST_BYTES)
    except OSError:
        return None


def _module_file(name: str) -> str | None:
    """Where ``python -m name`` finds ``name``'s code, found without importing anything."""
    from importlib.machinery import PathFinder

    parts = name.split(".")
    spec = PathFinder.find_spec(parts[0])
    if spec is None or spec.origin is None and not spec.submodule_search_locations:
        return None
    base = os.path.dirname(spec.origin) if spec.origin else list(spec.submodule_search_locations or [""])[0]
    if len(parts) == 1:
        main = os.path.join(base, "__main__.py")
        return main if spec.submodule_search_locations else spec.origin
    path = os.path.join(base, *parts[1:])
    return next((p for p in (path + ".py", os.path.join(path, "__main__.py")) if os.path.isfile(p)), None)


def _source(command: Sequence[str], read: Callable[[str], str | None]) -> tuple[str, str | None]:
    """The Python code ``command`` runs, with what it is (``train.py``, ``-m pkg``, ``-c``); None where it runs none."""
    words = list(command)
    if words[:1] == ["env"]:  # env NAME=VALUE ... COMMAND
        words = words[1:]
        while words and ("=" in words[0] or words[0].startswith("-")):
            words = words[1:]
    if not words:
        return "no command", None
    program = os.path.basename(words[0])
    if not _PYTHON.fullmatch(program):
        text = read(words[0]) if words[0].endswith(".py") or os.path.sep in words[0] else None
        return words[0], text if text is not None and (words[0].endswith(".py") or "python" in text[:128]) else None
    rest = words[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-":
        option = rest.pop(0)
        if option == "-c" and rest:
            return "python -c", rest[0]
        if option.startswith("-c") and len(option) > 2:
            return "python -c", option[2:]
        if option == "-m" and rest:  # the module's code, or where it cannot be found its package's name
            found = _module_file(rest[0])
            return f"-m {rest[0]}", read(found) if found else rest[0].split(".")[0]
        if option in _WITH_VALUE and rest:
            rest.pop(0)
    if not rest or rest[0] == "-":
        return "python reading its standard input", None
    return rest[0], read(rest[0])


def _imports(code: str) -> set[str]:
    """The top-level modules ``code`` imports (absolute imports only); a bare module name is its own import."""
    if code.isidentifier():
        return {code}
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def format_for(command: Sequence[str], read: Callable[[str], str | None] = _read) -> tuple[str, str]:
    """The ``--format`` for ``command``, and why (for the log): its script's framework, else ``shell``.

    ``read`` reads a file (a seam for tests).

    >>> format_for(["python", "-c", "import torch.distributed as dist"])
    ('torch', 'python -c imports torch')
    >>> format_for(["python", "-c", "import jax, torch"])[0], format_for(["bash", "run.sh"])[0]
    ('shell', 'shell')
    """
    what, code = _source(command, read)
    if code is None:
        return "shell", f"{what} is no Python script that can be read"
    imported = sorted(name for name in _imports(code) if name in FRAMEWORKS)
    formats = {FRAMEWORKS[name] for name in imported}
    if len(formats) == 1:
        return formats.pop(), f"{what} imports {', '.join(imported)}"
    if not formats:
        return "shell", f"{what} imports none of {', '.join(sorted(FRAMEWORKS))}"
    return "shell", f"{what} imports {', '.join(imported)}: more than one framework"
