"""Sessions beside CI (scripts/test): ``nox -s newer_slurm`` runs every real-cluster test on a newer Slurm.

``nox -s "newer_slurm(suite='trixie')"`` (Slurm 24.11) or ``"newer_slurm(suite='sid')"`` (Debian's newest),
each in a test cluster of its own (scripts/test-newer-slurm, docs/testcluster.md); arguments after ``--`` go
to pytest. It runs in the project's own environment (``.venv``, or ``PYTHON``): the real-cluster tests need
all of its frameworks. Root is needed (debootstrap, chroot, bind mounts).
"""

from __future__ import annotations

import nox


@nox.session(venv_backend="none", default=False)  # a few minutes to tens: only when named
@nox.parametrize("suite", ["trixie", "sid"])
def newer_slurm(session: nox.Session, suite: str) -> None:
    """Every real-cluster test (-m slurm) on Debian ``suite``'s Slurm, in a cluster of its own."""
    session.run("scripts/test-newer-slurm", suite, *session.posargs, external=True)
