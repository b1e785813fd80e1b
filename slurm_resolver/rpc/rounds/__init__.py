"""The rounds: how a task's tasks agree, one round at a time, up the tree and back down.

It owns Join's messages (`codec`: a call, its records, the answer), one server's round state (`state`:
`Rounds`, the one writer), the server side of Join (`coordinator`), a task's calls up the tree
(`uplink`), and one task's rounds, barriers, votes and notices (`member`). It knows nothing of
failure detection: a round fails by its own deadline, and is told of deaths only by its caller.
"""

from __future__ import annotations

__all__: list[str] = []
