"""The message classes of ``coordination.proto``, built at the least cost to a task's start.

The generated module, `coordination_pb2`, builds them through protobuf's Python layer, whose
descriptor pool imports protobuf's pure-Python implementation (``python_message``, ``text_format``,
``pickle``...) even where protobuf runs on upb, its C core and default: about 12 ms of CPU in
every task's start on the project's machine, more than any module of ours (benchmarks/README.md).
Where upb runs, the classes are made here from the same serialized descriptor
(`coordination_descriptor`, generated beside it) with the metaclass the generated code's builder
uses, and upb keeps one class per message type: they are the very classes `coordination_pb2`
gives in the same process, whichever of the two comes first. Elsewhere (protobuf's Python
implementation, or a protobuf whose internals moved) they are `coordination_pb2`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

def _on_upb() -> dict[str, Any] | None:
    """The top-level message classes by name, built on upb; None where protobuf does not run on it."""
    try:
        from google.protobuf.internal import api_implementation

        if api_implementation.Type() != "upb":
            return None
        from google.protobuf.message import Message
        from google.protobuf.pyext.cpp_message import GeneratedProtocolMessageType

        from .coordination_descriptor import SERIALIZED

        file = api_implementation._c_module.default_pool.AddSerializedFile(SERIALIZED)
    except (ImportError, AttributeError, TypeError):
        return None

    def built(descriptor: Any, outer: str = "") -> Any:  # as protobuf's builder does, nested types first
        body = {name: built(nested, f"{outer}{descriptor.name}.")
                for name, nested in descriptor.nested_types_by_name.items()}
        body.update(DESCRIPTOR=descriptor, __module__=f"{__package__}.coordination_pb2",
                    __qualname__=outer + descriptor.name)
        return GeneratedProtocolMessageType(descriptor.name, (Message,), body)

    return {name: built(descriptor) for name, descriptor in file.message_types_by_name.items()}


def _classes() -> dict[str, Any]:
    """Every top-level message class of ``coordination.proto``, by name (the descriptor's names)."""
    found = _on_upb()
    if found is None:
        from . import coordination_pb2

        found = {name: getattr(coordination_pb2, name) for name in coordination_pb2.DESCRIPTOR.message_types_by_name}
    return found


if TYPE_CHECKING:  # typed by the generated module's stubs (setup.cfg lets mypy see them re-exported)
    from .coordination_pb2 import *  # noqa: F403
else:
    globals().update(_classes())
