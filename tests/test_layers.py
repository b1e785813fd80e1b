"""The package's import graph: no cycles, and no module imports one of a layer above its own.

Every ``import`` statement of every module counts, those inside functions too (a lazy import
still ties two modules together); only ``if TYPE_CHECKING:`` blocks do not. A module new to
the package must be given a layer here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "slurm_resolver"

LAYERS: list[set[str]] = [
    # Values, parsing, and the one reader of the environment.
    {"errors", "environment", "variables", "parsing", "optional", "hostlists", "template_schema"},
    # The parts of resolution, and the seams to outside systems.
    {"launchers", "launchers.*", "layout", "placement", "packing", "gpus", "nvml", "mpi", "munge", "slurmctl",
     "addresses", "exchange", "cluster_spec", "outcome", "attempts"},
    # The resolved cluster (resolution opens no socket).
    {"cluster", "resolution"},
    # The bootstrap (its own layers below).
    {"rpc", "rpc.*"},
    # What users call: the TensorFlow-shaped resolvers, adapters, training jobs, the command line.
    {"adapters", "resolvers", "resolvers.*", "supervise", "srun_step", "restart", "preemption", "training",
     "training.*", "submission", "templates", "diagnostics", "cli", "cli.*", "", "__main__"},
]

RPC_LAYERS: list[set[str]] = [
    {"messages", "coordination_pb2", "loop", "ports", "transport", ""},  # values and contracts
    {"wire", "auth", "tree"},  # every message built and read; seals; the tree's shape
    {"rounds", "heartbeat", "options"},  # a server's rounds; what both sides of the watch share; the knobs
    # a server; calls up; asking who answers; networks; the watch
    {"coordinator", "uplink", "verify", "server", "local", "watch", "listen"},
    {"grpc_network", "member", "detector"},  # the real network; one task's rounds; its failure detection
    {"bootstrapped"},  # what the bootstrap returns
    {"bootstrap"},  # the phases
    {"learn", "simulate", "loopback"},  # what runs bootstraps
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports (``''`` is the package itself)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                module = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "slurm_resolver":
                module = node.module.partition(".")[2]
            else:
                return
            for alias in node.names:
                whole = f"{module}.{alias.name}".lstrip(".")
                found.add(whole if whole in known else module)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                if alias.name.split(".")[0] == "slurm_resolver":
                    found.add(alias.name.partition(".")[2])

    Visitor().visit(ast.parse(path.read_text()))
    return {m for m in found if m in known and m != name}


def _layer(name: str, layers: list[set[str]]) -> int:
    for number, members in enumerate(layers):
        if name in members or any(m.endswith(".*") and name.startswith(m[:-1]) for m in members):
            return number
    raise AssertionError(f"slurm_resolver.{name} has no layer in tests/test_layers.py: give it one")


GRAPH = {name: _imports(name, path, set(_modules())) for name, path in _modules().items()}


def test_every_module_has_a_layer() -> None:
    for name in GRAPH:
        _layer(name, LAYERS)
        if name.startswith("rpc.") or name == "rpc":
            _layer(name.partition(".")[2], RPC_LAYERS)


def test_the_import_graph_has_no_cycle() -> None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            pytest.fail("an import cycle: " + " -> ".join([*path[path.index(name):], name]))
        if name in done:
            return
        for imported in sorted(GRAPH[name]):
            visit(imported, [*path, name])
        done.add(name)

    for name in sorted(GRAPH):
        visit(name, [])


@pytest.mark.parametrize("scope", ["package", "rpc"])
def test_no_module_imports_a_layer_above_its_own(scope: str) -> None:
    upward = []
    for name, imported in GRAPH.items():
        for other in imported:
            if scope == "package":
                mine, theirs = _layer(name, LAYERS), _layer(other, LAYERS)
            elif name.partition(".")[0] == other.partition(".")[0] == "rpc":
                mine, theirs = _layer(name.partition(".")[2], RPC_LAYERS), _layer(other.partition(".")[2], RPC_LAYERS)
            else:
                continue
            if theirs > mine:
                upward.append(f"{name} (layer {mine}) imports {other} (layer {theirs})")
    assert not upward, upward
