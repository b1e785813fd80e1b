"""Trust: who may call, and what an answer proves.

It owns seals (`seals`: a secret, MUNGE, or none), a task's identity and WhoAreYou's both sides
(`identity`), the verification of the peers found (`verify`), and the one gate every call meets
before anything of it is believed (`gate`). It knows nothing of the network a call came over.
"""

from __future__ import annotations

__all__: list[str] = []
