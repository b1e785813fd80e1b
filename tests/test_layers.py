"""The package's import graph: no cycles, no module imports one of a layer above its own, and every import
goes down a level (levels are the package's real order, finer than its layers).

Every ``import`` statement of every module counts, those inside functions too (a lazy import
still ties two modules together), and so do ``importlib`` imports. The body of ``if TYPE_CHECKING:``
counts for cycles (two modules that name each other's types are one, whatever runs), not for layers
and levels (its ``else:`` runs, and counts for all). A module new to the package must be given a
layer and a level here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "slurm_resolver"

LAYERS: list[set[str]] = [
    # Values (and `Value`, the frozen class of the bootstrap's), parsing, and the one reader of the environment;
    # failures, typed, and who says them.
    {"values", "faults", "speakers", "errors", "environment", "variables", "parsing", "optional", "hostlists",
     "hostlist_order", "template_schema", "jax_detection", "frameworks", "stacks", "stacks.*"},
    # The parts of resolution, and the seams to outside systems.
    {"launchers", "launchers.*", "layout", "placement", "packing", "gpus", "nvml", "mpi", "munge", "slurmctl",
     "addresses", "exchange", "cluster_spec", "outcome", "attempts"},
    # The resolved cluster (resolution opens no socket).
    {"cluster", "resolution"},
    # The bootstrap.
    {"rpc", "rpc.*"},
    # What users call: the TensorFlow-shaped resolvers, adapters, training jobs.
    {"adapters", "lightning", "resolvers", "resolvers.*", "supervise", "supervise.*", "srun_step", "restart",
     "preemption", "training",
     "training.*", "submission", "templates", "diagnostics"},
    # The command line, and the package's lazy names.
    {"cli", "cli.*", "", "__main__"},
]
"""The package's layers, for the reader: what may use what."""

def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, known: set[str], typed: bool = False) -> set[str]:
    """The package's modules that ``name`` imports (``''`` is the package itself): import statements
    anywhere (in functions, in the ``else:`` of ``if TYPE_CHECKING:``, and in its body where ``typed``),
    and ``importlib.import_module``/``__import__`` calls (a name built at run time counts as every
    module named in the file's strings)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    strings: set[str] = set()
    dynamic = [False]

    def absolute(module: str, level: int) -> str:
        if not level:
            return module.partition(".")[2] if module.split(".")[0] == "slurm_resolver" else "\0"
        base = package.split(".") if package else []
        base = base[:len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, *([module] if module else [])])

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for child in [*(node.body if typed else []), *node.orelse]:  # what runs is imported for real
                    self.visit(child)
            else:
                self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            module = absolute(node.module or "", node.level)
            for alias in node.names:
                whole = f"{module}.{alias.name}".lstrip(".")
                found.add(whole if whole in known else module)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                found.add(absolute(alias.name, 0))

        def visit_Call(self, node: ast.Call) -> None:
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    text = first.value
                    found.add(absolute(text.lstrip("."), len(text) - len(text.lstrip("."))))
                elif len(node.args) > 1 or (isinstance(first, ast.JoinedStr) and first.values
                                            and isinstance(first.values[0], ast.Constant)
                                            and str(first.values[0].value).startswith((".", "slurm_resolver."))):
                    dynamic[0] = True  # a module of this package, named at run time
            self.generic_visit(node)

        def visit_Constant(self, node: ast.Constant) -> None:
            if isinstance(node.value, str):
                strings.add(node.value.lstrip("."))

    Visitor().visit(ast.parse(path.read_text()))
    if dynamic[0]:
        found |= {absolute(s, 1) for s in strings if s and absolute(s, 1) in known}
    return {m for m in found if m in known and m != name}


def _layer(name: str, layers: list[set[str]]) -> int:
    for number, members in enumerate(layers):
        if name in members or any(m.endswith(".*") and name.startswith(m[:-1]) for m in members):
            return number
    raise AssertionError(f"slurm_resolver.{name} has no layer in tests/test_layers.py: give it one")


GRAPH = {name: _imports(name, path, set(_modules())) for name, path in _modules().items()}
TYPED = {name: _imports(name, path, set(_modules()), typed=True) for name, path in _modules().items()}
"""`GRAPH` with the imports of types alone (``if TYPE_CHECKING:``): what the cycles are looked for in."""


def _levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Every module's level, from the import graph: 0 for a module that imports none of the package, else one
    above the highest it imports (the order in which the package could be read). Computed, never listed: a
    module new to the package has its level at once. A cycle has none (its own test names it)."""
    levels: dict[str, int] = {}

    def level(name: str, path: tuple[str, ...]) -> int:
        if name not in levels:
            below = [level(other, (*path, name)) for other in graph[name] if other not in path]
            levels[name] = 1 + max(below, default=-1)
        return levels[name]

    for name in sorted(graph):
        level(name, ())
    return levels


def test_the_graph_is_the_packages() -> None:
    """A checker that finds nothing passes everything: the graph holds every module and their imports."""
    assert len(GRAPH) >= 80 and sum(map(len, GRAPH.values())) >= 250
    assert {"rpc.rounds.member", "rpc.rounds.coordinator", "rpc.messages"} <= \
        GRAPH["rpc.bootstrap"] | GRAPH["rpc.rounds.member"]
    assert "rpc.bootstrap" in GRAPH[""]  # the package's lazy names (importlib) count


def test_every_module_has_a_layer_and_a_level() -> None:
    levels = _levels(GRAPH)
    for name in GRAPH:
        _layer(name, LAYERS)
    assert set(levels) == set(GRAPH)
    assert levels["values"] == 0 and levels["faults"] == 1  # the package's bottom: its values, then faults
    assert levels["__main__"] == max(levels.values())  # and its top


def test_levels_come_from_the_graph() -> None:
    """A module sits one level above the highest it imports, and imports nothing of its own level or above."""
    graph = {"a": set(), "b": {"a"}, "c": {"a", "b"}, "d": {"a"}}
    assert _levels(graph) == {"a": 0, "b": 1, "c": 2, "d": 1}
    levels = _levels(GRAPH)
    upward = [f"{name} (level {levels[name]}) imports {other} (level {levels[other]})"
              for name, imported in GRAPH.items() for other in imported if levels[other] >= levels[name]]
    assert not upward, upward


def test_imports_are_found_wherever_they_run(tmp_path: Path) -> None:
    """In functions, in the ``else:`` of ``if TYPE_CHECKING:`` (not its body), and through importlib."""
    module = tmp_path / "x.py"
    module.write_text("""
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .cluster import Cluster
else:
    from .errors import ConfigurationError
def later():
    from . import placement
    import importlib
    importlib.import_module("slurm_resolver.gpus")
    importlib.import_module(".nvml", __package__)
""")
    assert _imports("x", module, set(GRAPH)) == {"errors", "placement", "gpus", "nvml"}
    assert _imports("x", module, set(GRAPH), typed=True) == {"cluster", "errors", "placement", "gpus", "nvml"}
    dynamic = tmp_path / "y.py"
    dynamic.write_text("import importlib\nNAMES = {'a': 'rpc.tree'}\n"
                       "def get(n):\n    return importlib.import_module(f'.{NAMES[n]}', 'slurm_resolver')\n")
    assert _imports("y", dynamic, set(GRAPH)) == {"rpc.tree"}


def test_the_import_graph_has_no_cycle() -> None:
    """Imports of types alone included: two modules that name each other's types are one."""
    assert any(TYPED[name] > GRAPH[name] for name in GRAPH)  # the imports of types alone are looked at
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            pytest.fail("an import cycle: " + " -> ".join([*path[path.index(name):], name]))
        if name in done:
            return
        for imported in sorted(TYPED[name]):
            visit(imported, [*path, name])
        done.add(name)

    for name in sorted(GRAPH):
        visit(name, [])


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [f"{name} (layer {_layer(name, LAYERS)}) imports {other} (layer {_layer(other, LAYERS)})"
              for name, imported in GRAPH.items() for other in imported
              if _layer(other, LAYERS) > _layer(name, LAYERS)]
    assert not upward, upward


def test_every_module_of_the_bootstrap_has_its_own_test_file() -> None:
    """Tests mirror the package: ``slurm_resolver/rpc/x.py`` is tested in ``tests/rpc/test_x.py``, a wing's
    ``slurm_resolver/rpc/rounds/x.py`` in ``tests/rpc/rounds/test_x.py``."""
    generated = {"coordination_pb2": "protos"}  # its test checks it is current
    missing = []
    for name in GRAPH:
        parts = name.split(".")
        if parts[0] != "rpc" or name in {"rpc", *(f"rpc.{wing}" for wing in WINGS)}:
            continue
        *folders, leaf = parts[1:]
        if not (ROOT / "tests" / "rpc" / Path(*folders, f"test_{generated.get(leaf, leaf)}.py")).exists():
            missing.append(name)
    assert not missing, missing


WINGS = {"rounds", "detection", "diagnosis", "trust", "network", "simulation"}
"""The bootstrap's wings (``slurm_resolver/rpc/<wing>/``), each a feature with a docstring that says what it owns."""

APART = [("rounds", "detection"), ("network", "trust"), ("rounds", "diagnosis")]
"""Wings that never import each other, either way: the rounds know nothing of failure detection, nor
failure detection of the rounds; the network carries bytes and knows nothing of trust, nor trust of it;
the rounds know nothing of a hung job's diagnosis, nor it of the rounds."""

BELOW = [("diagnosis", "detection")]
"""Wings of which the first never imports the second: diagnosis knows nothing of failure detection (the
detector hands it what to call), while the beats carry diagnosis's progress marks."""


def _wing(name: str) -> str:
    """The wing of module ``name`` (``''``: the bootstrap's base or top, or not the bootstrap)."""
    parts = name.split(".")
    return parts[1] if parts[0] == "rpc" and len(parts) > 1 and parts[1] in WINGS else ""


def test_the_wings_found_are_the_packages() -> None:
    found = {path.parent.name for path in (PACKAGE / "rpc").glob("*/__init__.py")}
    assert found == WINGS
    for wing in WINGS:
        assert len(ast.get_docstring(ast.parse((PACKAGE / "rpc" / wing / "__init__.py").read_text())) or "") > 200


@pytest.mark.parametrize(("one", "other"), APART)
def test_wings_apart_never_import_each_other(one: str, other: str) -> None:
    crossing = [f"{name} imports {imported}" for name, imports in GRAPH.items() for imported in imports
                if {_wing(name), _wing(imported)} == {one, other}]
    assert not crossing, crossing


@pytest.mark.parametrize(("one", "other"), BELOW)
def test_a_wing_below_another_never_imports_it(one: str, other: str) -> None:
    crossing = [f"{name} imports {imported}" for name, imports in GRAPH.items() for imported in imports
                if _wing(name) == one and _wing(imported) == other]
    assert not crossing, crossing


TOP = {"rpc.bootstrap", "rpc.bootstrapped", "rpc.calls", "rpc.exchanges", "rpc.handlers", "rpc.learn",
       "rpc.options", "rpc.start", "rpc.view"}
"""The bootstrap's top: what puts the wings together (the table of calls, a task's server, the phases)."""


def test_the_base_imports_no_wing_and_only_tests_and_benchmarks_import_the_simulation() -> None:
    """The base (messages, the envelope, transport, the tree) is under every wing; the simulation is
    for benchmarks and tests."""
    base = [name for name in GRAPH if name.startswith("rpc.") and name.count(".") == 1 and not _wing(name)
            and name not in TOP]
    assert {"rpc.messages", "rpc.wire", "rpc.transport", "rpc.tree", "rpc.shapes", "rpc.refusals"} <= set(base)
    upward = [f"{name} imports {imported}" for name in base for imported in GRAPH[name] if _wing(imported)]
    assert not upward, upward
    simulated = [name for name, imports in GRAPH.items() if _wing(name) != "simulation"
                 and any(_wing(imported) == "simulation" for imported in imports)]
    assert not simulated, simulated


def test_the_maps_of_the_bootstrap_list_every_module() -> None:
    """``rpc/__init__.py``'s map names every module of the bootstrap, and docs/protocol.md's table its file;
    a call's own module (``*_call``) is named by the table of calls instead (a new call edits no map)."""
    mapped = ast.get_docstring(ast.parse((PACKAGE / "rpc" / "__init__.py").read_text())) or ""
    docs = (ROOT / "docs" / "protocol.md").read_text()
    table = docs[docs.index("## Where the code lives"):].split("\n## ")[0]
    modules = [name for name in GRAPH if name.startswith("rpc.") and name not in {f"rpc.{wing}" for wing in WINGS}
               and not name.endswith("_call")]  # a call's own module: the table of calls names it
    unmapped = [name for name in modules if f"`{name.rpartition('.')[2]}`" not in mapped]
    untabled = [name for name in modules if f"`{'/'.join(name.split('.')[1:])}.py`" not in table]
    assert not unmapped and not untabled, (unmapped, untabled)
