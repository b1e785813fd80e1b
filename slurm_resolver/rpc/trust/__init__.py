"""Trust: who may call, and what an answer proves.

It owns seals (`seals`: a secret's, MUNGE's, or none, made and checked; `choice`: which of them a
task makes, from ``auth=`` and its environment), WhoAreYou's both sides (`identity`; what a server
says of itself is a message, `rpc.messages.Identity`), the verification of the peers found
(`verify`), and the one gate every call meets before anything of it is believed (`gate`). It knows
nothing of the network a call came over.
"""

from __future__ import annotations

__all__: list[str] = []
