"""Shell completion, as a person meets it: an interactive bash and zsh, keys typed, the line run.

Each shell gets the script of ``slurm-resolver completion``, and ``slurm-resolver`` is a shell
function that prints its arguments: what a TAB completed is what the command receives.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import time
from typing import Any

import pytest

from slurm_resolver.cli.completion import words
from slurm_resolver.cli.parser import build_parser
from slurm_resolver.templates import available

TYPED = {  # keys (\t is TAB) -> the arguments the command receives
    "slurm-resolver sub\tdata_p\t--wait": "submit data_parallel --wait",
    "slurm-resolver render jax --set nod\t4": "render jax --set nodes=4",
    "slurm-resolver env --form\t\ttor\t": "env --format torch",
    "slurm-resolver show --exchange rend\t--json": "show --exchange rendezvous --json",
    "slurm-resolver completion z\t": "completion zsh",
}


def _read(fd: int, until: bytes, timeout: float) -> bytes:
    out, deadline = b"", time.monotonic() + timeout
    while until not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out


def run_typed(shell: str, script: str, lines: list[str]) -> list[str]:
    """Type each of ``lines`` into an interactive ``shell`` with the completion loaded; what each run printed."""
    setup = ("autoload -U compinit; compinit -u; " if shell == "zsh" else "") + \
        f"eval \"$(cat {script})\"; slurm-resolver() {{ echo \"GOT\"\"[$*]\"; }}; PS1='$ '\n"
    argv = [shell, "-f", "-i"] if shell == "zsh" else [shell, "--norc", "--noprofile", "-i"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child becomes the shell
        os.execvpe(shell, argv, {"PATH": os.environ["PATH"], "HOME": os.path.dirname(script), "TERM": "dumb"})
    got = []
    try:
        os.write(fd, setup.encode() + b"echo RE\"\"ADY\n")
        assert b"READY" in _read(fd, b"READY", 10), f"{shell} did not start"
        for line in lines:
            for key in line.split("\t")[:-1]:
                os.write(fd, key.encode() + b"\t")
                time.sleep(0.3)  # the shell completes before the next keys
            os.write(fd, line.split("\t")[-1].encode() + b"\n")
            out = _read(fd, b"]\r\n", 10).decode(errors="replace")
            got.append(out[out.find("GOT[") + 4:out.find("]\r\n")] if "GOT[" in out else out[-300:])
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return got


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_as_typed(cli: Any, shell: str, tmp_path: Any) -> None:
    assert shutil.which(shell), f"{shell} is installed by scripts/testcluster up"
    script = tmp_path / "completion.sh"
    script.write_text(cli("completion", shell).stdout)
    assert run_typed(shell, str(script), list(TYPED)) == list(TYPED.values())


def test_what_completes_where() -> None:
    table = words(build_parser())
    assert set(available()) == set(table["@templates"]) and "nodes=" in table["@parameters"]
    assert table["env --format"] == ["tf", "torch", "jax", "shell"]
    assert table["show --exchange"] == ["auto", "mpi", "rendezvous", "none"]
    assert table["bootstrap --timeout="] == []  # a free value: nothing offered
    assert "--all-ranks" in table["check"] and "--debug" in table["show"]


def test_the_scripts_are_valid_shell(cli: Any) -> None:
    for shell in ("bash", "zsh"):
        subprocess.run([shell, "-n"], input=cli("completion", shell).stdout, text=True, check=True)
