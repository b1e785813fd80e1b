"""Sessions beside CI (scripts/test). The contract tests against the oldest release of each framework setup.cfg
supports and the newest the registry has: ``nox -s jax`` (both), ``nox -s "jax(oldest)"``, ``nox -l`` lists them;
and every real-cluster test on a newer Slurm, only when named: ``nox -s "newer_slurm(suite='trixie')"``.
A contract session makes a fresh virtual environment, installs the package (``pip install -e .``), the
framework at that release and the test tools, prints what it installed, and runs the framework's contract
tests. docs/frameworks.md lists the releases checked, when, and what each session costs; CI (scripts/test)
keeps its one environment.

The newest is what pip resolves unpinned on the day (JAX 0.11 and later need Python 3.12: its sessions run
there). Interpreters are found on PATH as ``python3.11``/``python3.12`` (pyenv: ``PYENV_VERSION=3.11.7:3.12.1``).
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True

TEST_TOOLS = ("pytest>=7", "pytest-timeout>=2", "hypothesis>=6")
PYTHON = "3.11"

# session: (oldest supported release(s), newest (unpinned: what pip resolves that day), Python for the newest,
#           the contract tests). The oldest are setup.cfg's floors, at the first release that exists.
FRAMEWORKS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str, tuple[str, ...]]] = {
    "jax": (("jax==0.4.30", "jaxlib==0.4.30"), ("jax", "jaxlib"), "3.12",
            ("tests/test_jax_detection.py", "slurm_resolver/jax_detection.py")),
    "tensorflow": (("tensorflow-cpu==2.16.1", "tf_keras==2.16.0"), ("tensorflow-cpu", "tf_keras"), PYTHON,
                   ("tests/resolvers/test_tensorflow_contract.py",)),
    "lightning": (("lightning==2.1.0", "torch==2.1.0", "numpy<2"), ("lightning", "torch"), PYTHON,
                  ("tests/test_lightning.py",)),
    "torchrun": (("torch==2.1.0", "numpy<2"), ("torch",), PYTHON, ("tests/launchers/test_below.py", "-k", "torchrun")),
    "submitit": (("submitit==1.5.0",), ("submitit",), PYTHON, ("tests/test_submitit_contract.py",)),
}
"""The frameworks whose contracts the package keeps, each checked at both ends of what it supports."""


def _contract(session: nox.Session, framework: str, end: str) -> None:
    """Install the package and ``framework`` at ``end`` (``oldest`` or ``newest``), then run its contract tests."""
    oldest, newest, _, tests = FRAMEWORKS[framework]
    session.install("-e", ".", *TEST_TOOLS)
    session.install(*(oldest if end == "oldest" else ("--upgrade", *newest)))
    names = [spec.split("=")[0].split("<")[0] for spec in (oldest if end == "oldest" else newest)]
    session.run("python", "-c", "import importlib.metadata as m, sys; print(sys.version.split()[0], *("
                f"f'{{n}}=={{m.version(n)}}' for n in {names!r}))")
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q", *tests, *session.posargs)


def _ends(framework: str) -> list[nox.param]:
    newest_python = FRAMEWORKS[framework][2]
    return [nox.param(PYTHON, "oldest", id="oldest"), nox.param(newest_python, "newest", id="newest")]


@nox.session
@nox.parametrize(("python", "end"), _ends("jax"))
def jax(session: nox.Session, end: str) -> None:
    """JAX's cluster detection against slurm_resolver's mirror of it (every captured launch)."""
    _contract(session, "jax", end)


@nox.session
@nox.parametrize(("python", "end"), _ends("tensorflow"))
def tensorflow(session: nox.Session, end: str) -> None:
    """TensorFlow's cluster resolvers beside slurm_resolver's."""
    _contract(session, "tensorflow", end)


@nox.session
@nox.parametrize(("python", "end"), _ends("lightning"))
def lightning(session: nox.Session, end: str) -> None:
    """Lightning's ClusterEnvironment and its own SLURMEnvironment (PyTorch from PyPI: a CUDA build on x86_64)."""
    _contract(session, "lightning", end)


@nox.session
@nox.parametrize(("python", "end"), _ends("torchrun"))
def torchrun(session: nox.Session, end: str) -> None:
    """Workers below srun as torchrun starts them; its real-cluster test needs SR_CLUSTER_* (docs/testcluster.md)."""
    _contract(session, "torchrun", end)


@nox.session
@nox.parametrize(("python", "end"), _ends("submitit"))
def submitit(session: nox.Session, end: str) -> None:
    """submitit's job environment and PyTorch helper beside slurm_resolver's answers."""
    _contract(session, "submitit", end)


@nox.session(venv_backend="none", default=False)  # a few minutes to tens: only when named
@nox.parametrize("suite", ["trixie", "sid"])
def newer_slurm(session: nox.Session, suite: str) -> None:
    """Every real-cluster test (-m slurm) on Debian ``suite``'s Slurm (trixie: 24.11, sid: Debian's newest), in a
    test cluster of its own (scripts/test-newer-slurm, docs/testcluster.md), in the project's own environment
    (``.venv``, or ``PYTHON``: the real-cluster tests need all of its frameworks); root is needed (debootstrap,
    chroot, bind mounts). Arguments after ``--`` go to pytest."""
    session.run("scripts/test-newer-slurm", suite, *session.posargs, external=True)
