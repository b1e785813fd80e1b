"""The stacks of a job as a tree of call paths, and as a picture: the odd ones out first."""

from __future__ import annotations

from slurm_resolver.stacks.capture import Frame, ThreadStack
from slurm_resolver.stacks.classes import Stacks
from slurm_resolver.stacks.picture import svg
from slurm_resolver.stacks.render import render

MAIN, STEP, BARRIER = Frame("train.py", 60, "<module>"), Frame("train.py", 40, "step"), Frame("c10d.py", 9, "barrier")
LOAD, READ = Frame("train.py", 22, "load_batch"), Frame("train.py", 10, "slow_read")


def _job(tasks: int, odd: int) -> Stacks:
    merged = Stacks()
    for rank in range(tasks):
        frames = (MAIN, LOAD, READ) if rank == odd else (MAIN, STEP, BARRIER)
        merged = merged | Stacks.of_task(rank, [ThreadStack("main", frames)])
    return merged


def test_the_tree_names_the_odd_rank_and_its_node_first_and_the_rest_in_ranges() -> None:
    text = render(_job(4096, 1023) | Stacks.silent_tasks([4096]), lambda rank: f"node{rank // 4 + 1}", "job 9.0")
    assert text.splitlines() == [
        "stacks of job 9.0: 4,097 tasks, 4,096 answered; 2 distinct stacks of the main thread",
        "did not answer (gone, or holding the GIL in C code): rank 4096 (node1025)",
        "main thread:",
        "└─ <module> (train.py:60)    ranks 0-4095 (4,096 tasks)",
        "   ├─ load_batch (train.py:22)    rank 1023 (node256)",
        "   │  └─ slow_read (train.py:10)",
        "   └─ step (train.py:40)    ranks 0-1022,1024-4095 (4,095 tasks)",
        "      └─ barrier (c10d.py:9)",
    ]


def test_the_picture_colours_the_odd_path_and_escapes_what_code_names_hold() -> None:
    odd = Frame("<stdin>", 1, "<lambda>")
    merged = _job(8, 3) | Stacks.of_task(8, [ThreadStack("main", (MAIN, odd))])
    picture = svg(merged, title="job <9>")
    assert picture.startswith("<svg") and picture.rstrip().endswith("</svg>")
    assert "&lt;lambda&gt;" in picture and "job &lt;9&gt;" in picture and "<lambda>" not in picture
    assert picture.count("#f6c48e") == 3  # load_batch, slow_read and the lambda: off the commonest path
