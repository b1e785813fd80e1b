"""Where a hung job is: every task's Python stacks, merged into classes of identical stacks.

A task's stacks are taken by its own server's thread (`capture`: code paths, lines and function
names of each thread, never a variable's value), merged up the bootstrap's tree into classes of
identical stacks with the ranks in each (`classes`: what one message carries grows with the number
of distinct stacks, never with the job), and shown once for the job as a tree of call paths with
the ranks of each, the smallest classes first (`render`), or drawn (`picture`). The call that
gathers them is the bootstrap's (`slurm_resolver.rpc`); nothing here opens a socket.
"""

from __future__ import annotations

__all__: list[str] = []
