"""``bootstrap -- COMMAND`` without ``--format``: the framework told from the command's Python script."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_resolver.frameworks import format_for

SCRIPTS = {
    "torch.py": "import os\nimport torch.distributed as dist\n",
    "lightning.py": "from lightning.fabric import Fabric\n",
    "jax.py": "def main():\n    import jax\n",
    "tf.py": "import tensorflow as tf\n",
    "plain.py": "import numpy\nprint('hello')\n",
    "both.py": "import torch\nimport jax\n",
    "broken.py": "import torch\nthis is not python(\n",
}

COMMANDS = [
    (["python", "{dir}/torch.py"], "torch"),
    (["python3", "-u", "{dir}/torch.py", "--epochs", "3"], "torch"),
    (["/usr/bin/python3.11", "-W", "ignore", "-X", "dev", "{dir}/jax.py"], "jax"),
    (["env", "OMP_NUM_THREADS=1", "python", "{dir}/lightning.py"], "torch"),
    (["python", "{dir}/tf.py"], "tf"),
    (["{dir}/tf.py"], "tf"),  # an executable script
    (["python", "-c", "import jax; jax.distributed.initialize()"], "jax"),
    (["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "x.py"], "torch"),
    (["python", "{dir}/plain.py"], "shell"),
    (["python", "{dir}/both.py"], "shell"),
    (["python", "{dir}/broken.py"], "shell"),
    (["python", "{dir}/missing.py"], "shell"),
    (["bash", "run.sh"], "shell"),
    (["python"], "shell"),
    (["python", "-"], "shell"),
]


@pytest.mark.parametrize(("command", "fmt"), COMMANDS, ids=lambda c: " ".join(c) if isinstance(c, list) else c)
def test_the_format_is_the_scripts_framework(tmp_path: Path, command: list[str], fmt: str) -> None:
    for name, text in SCRIPTS.items():
        (tmp_path / name).write_text(text)
    told, why = format_for([word.format(dir=tmp_path) for word in command])
    assert told == fmt, why
    assert why  # every answer says why, for the log


def test_two_frameworks_are_named_in_the_reason(tmp_path: Path) -> None:
    (tmp_path / "both.py").write_text(SCRIPTS["both.py"])
    assert format_for(["python", str(tmp_path / "both.py")])[1].endswith("imports jax, torch: more than one framework")
