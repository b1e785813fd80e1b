"""docs/protocol.md's worked example: a new call, Versions, in a module of its own (`versions_call`)."""
