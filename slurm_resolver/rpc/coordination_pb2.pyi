from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Envelope(_message.Message):
    __slots__ = ("header", "seal")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SEAL_FIELD_NUMBER: _ClassVar[int]
    header: bytes
    seal: bytes
    def __init__(self, header: _Optional[bytes] = ..., seal: _Optional[bytes] = ...) -> None: ...

class Bundle(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, messages: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Round(_message.Message):
    __slots__ = ("kind", "name", "count")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    count: int
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class Records(_message.Message):
    __slots__ = ("ranks", "gpus", "first", "nodes", "ports", "spare_ports")
    class GpusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    RANKS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    SPARE_PORTS_FIELD_NUMBER: _ClassVar[int]
    ranks: _containers.RepeatedScalarFieldContainer[int]
    gpus: _containers.ScalarMap[int, str]
    first: int
    nodes: _containers.RepeatedScalarFieldContainer[int]
    ports: bytes
    spare_ports: bytes
    def __init__(self, ranks: _Optional[_Iterable[int]] = ..., gpus: _Optional[_Mapping[int, str]] = ..., first: _Optional[int] = ..., nodes: _Optional[_Iterable[int]] = ..., ports: _Optional[bytes] = ..., spare_ports: _Optional[bytes] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("missing", "missing_count", "reason", "failed_count", "cause", "status")
    MISSING_FIELD_NUMBER: _ClassVar[int]
    MISSING_COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    missing: _containers.RepeatedScalarFieldContainer[int]
    missing_count: int
    reason: str
    failed_count: int
    cause: str
    status: int
    def __init__(self, missing: _Optional[_Iterable[int]] = ..., missing_count: _Optional[int] = ..., reason: _Optional[str] = ..., failed_count: _Optional[int] = ..., cause: _Optional[str] = ..., status: _Optional[int] = ...) -> None: ...

class Call(_message.Message):
    __slots__ = ("job_key", "round", "source", "node", "nonce", "port", "failure", "records", "chunks", "votes")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    round: Round
    source: int
    node: int
    nonce: bytes
    port: int
    failure: Failure
    records: Records
    chunks: _containers.RepeatedScalarFieldContainer[bytes]
    votes: int
    def __init__(self, job_key: _Optional[str] = ..., round: _Optional[_Union[Round, _Mapping]] = ..., source: _Optional[int] = ..., node: _Optional[int] = ..., nonce: _Optional[bytes] = ..., port: _Optional[int] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., records: _Optional[_Union[Records, _Mapping]] = ..., chunks: _Optional[_Iterable[bytes]] = ..., votes: _Optional[int] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("nonce", "source", "failure", "total", "chunks", "key", "votes")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    source: int
    failure: Failure
    total: int
    chunks: _containers.RepeatedScalarFieldContainer[bytes]
    key: bytes
    votes: int
    def __init__(self, nonce: _Optional[bytes] = ..., source: _Optional[int] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., total: _Optional[int] = ..., chunks: _Optional[_Iterable[bytes]] = ..., key: _Optional[bytes] = ..., votes: _Optional[int] = ...) -> None: ...

class Who(_message.Message):
    __slots__ = ("job_key", "source", "nonce", "port", "early")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    EARLY_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    source: int
    nonce: bytes
    port: int
    early: bool
    def __init__(self, job_key: _Optional[str] = ..., source: _Optional[int] = ..., nonce: _Optional[bytes] = ..., port: _Optional[int] = ..., early: _Optional[bool] = ...) -> None: ...

class Identity(_message.Message):
    __slots__ = ("job_key", "rank", "node", "job", "index", "nonce")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    rank: int
    node: str
    job: str
    index: int
    nonce: bytes
    def __init__(self, job_key: _Optional[str] = ..., rank: _Optional[int] = ..., node: _Optional[str] = ..., job: _Optional[str] = ..., index: _Optional[int] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class Beat(_message.Message):
    __slots__ = ("job_key", "source", "node", "nonce", "port", "failed", "reason", "leaving", "cause", "status", "progress", "pid", "started", "more")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    source: int
    node: int
    nonce: bytes
    port: int
    failed: _containers.RepeatedScalarFieldContainer[int]
    reason: str
    leaving: bool
    cause: str
    status: int
    progress: Progress
    pid: int
    started: int
    more: _containers.RepeatedCompositeFieldContainer[Death]
    def __init__(self, job_key: _Optional[str] = ..., source: _Optional[int] = ..., node: _Optional[int] = ..., nonce: _Optional[bytes] = ..., port: _Optional[int] = ..., failed: _Optional[_Iterable[int]] = ..., reason: _Optional[str] = ..., leaving: _Optional[bool] = ..., cause: _Optional[str] = ..., status: _Optional[int] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., pid: _Optional[int] = ..., started: _Optional[int] = ..., more: _Optional[_Iterable[_Union[Death, _Mapping]]] = ...) -> None: ...

class Death(_message.Message):
    __slots__ = ("failed", "reason", "cause", "status")
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    failed: _containers.RepeatedScalarFieldContainer[int]
    reason: str
    cause: str
    status: int
    def __init__(self, failed: _Optional[_Iterable[int]] = ..., reason: _Optional[str] = ..., cause: _Optional[str] = ..., status: _Optional[int] = ...) -> None: ...

class HandOver(_message.Message):
    __slots__ = ("successor", "above", "gone_ranks", "gone_nodes")
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    ABOVE_FIELD_NUMBER: _ClassVar[int]
    GONE_RANKS_FIELD_NUMBER: _ClassVar[int]
    GONE_NODES_FIELD_NUMBER: _ClassVar[int]
    successor: int
    above: int
    gone_ranks: _containers.RepeatedScalarFieldContainer[int]
    gone_nodes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, successor: _Optional[int] = ..., above: _Optional[int] = ..., gone_ranks: _Optional[_Iterable[int]] = ..., gone_nodes: _Optional[_Iterable[int]] = ...) -> None: ...

class Lost(_message.Message):
    __slots__ = ("job_key", "source", "node", "port", "above", "reason")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ABOVE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    source: int
    node: int
    port: int
    above: int
    reason: str
    def __init__(self, job_key: _Optional[str] = ..., source: _Optional[int] = ..., node: _Optional[int] = ..., port: _Optional[int] = ..., above: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("nonce", "source", "failed", "reason", "leaving", "hand_over", "cause", "status", "pid", "started", "more")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    HAND_OVER_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    source: int
    failed: _containers.RepeatedScalarFieldContainer[int]
    reason: str
    leaving: bool
    hand_over: HandOver
    cause: str
    status: int
    pid: int
    started: int
    more: _containers.RepeatedCompositeFieldContainer[Death]
    def __init__(self, nonce: _Optional[bytes] = ..., source: _Optional[int] = ..., failed: _Optional[_Iterable[int]] = ..., reason: _Optional[str] = ..., leaving: _Optional[bool] = ..., hand_over: _Optional[_Union[HandOver, _Mapping]] = ..., cause: _Optional[str] = ..., status: _Optional[int] = ..., pid: _Optional[int] = ..., started: _Optional[int] = ..., more: _Optional[_Iterable[_Union[Death, _Mapping]]] = ...) -> None: ...

class RankSet(_message.Message):
    __slots__ = ("first", "last", "count")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    first: _containers.RepeatedScalarFieldContainer[int]
    last: _containers.RepeatedScalarFieldContainer[int]
    count: int
    def __init__(self, first: _Optional[_Iterable[int]] = ..., last: _Optional[_Iterable[int]] = ..., count: _Optional[int] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("lowest", "behind", "highest", "tasks")
    LOWEST_FIELD_NUMBER: _ClassVar[int]
    BEHIND_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    lowest: int
    behind: RankSet
    highest: int
    tasks: int
    def __init__(self, lowest: _Optional[int] = ..., behind: _Optional[_Union[RankSet, _Mapping]] = ..., highest: _Optional[int] = ..., tasks: _Optional[int] = ...) -> None: ...

class StacksAsk(_message.Message):
    __slots__ = ("job_key", "source", "nonce", "port", "within_ms", "time", "node", "rank")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    source: int
    nonce: bytes
    port: int
    within_ms: int
    time: int
    node: str
    rank: int
    def __init__(self, job_key: _Optional[str] = ..., source: _Optional[int] = ..., nonce: _Optional[bytes] = ..., port: _Optional[int] = ..., within_ms: _Optional[int] = ..., time: _Optional[int] = ..., node: _Optional[str] = ..., rank: _Optional[int] = ...) -> None: ...

class StackFrame(_message.Message):
    __slots__ = ("file", "line", "function")
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    file: str
    line: int
    function: str
    def __init__(self, file: _Optional[str] = ..., line: _Optional[int] = ..., function: _Optional[str] = ...) -> None: ...

class StackClass(_message.Message):
    __slots__ = ("frames", "main", "thread", "ranks", "skipped")
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    MAIN_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    frames: _containers.RepeatedCompositeFieldContainer[StackFrame]
    main: bool
    thread: str
    ranks: RankSet
    skipped: int
    def __init__(self, frames: _Optional[_Iterable[_Union[StackFrame, _Mapping]]] = ..., main: _Optional[bool] = ..., thread: _Optional[str] = ..., ranks: _Optional[_Union[RankSet, _Mapping]] = ..., skipped: _Optional[int] = ...) -> None: ...

class StacksAnswer(_message.Message):
    __slots__ = ("nonce", "source", "classes", "silent", "answered", "others", "nodes", "dropped")
    class NodesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    NONCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    SILENT_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_FIELD_NUMBER: _ClassVar[int]
    OTHERS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    source: int
    classes: _containers.RepeatedCompositeFieldContainer[StackClass]
    silent: RankSet
    answered: int
    others: RankSet
    nodes: _containers.ScalarMap[int, str]
    dropped: int
    def __init__(self, nonce: _Optional[bytes] = ..., source: _Optional[int] = ..., classes: _Optional[_Iterable[_Union[StackClass, _Mapping]]] = ..., silent: _Optional[_Union[RankSet, _Mapping]] = ..., answered: _Optional[int] = ..., others: _Optional[_Union[RankSet, _Mapping]] = ..., nodes: _Optional[_Mapping[int, str]] = ..., dropped: _Optional[int] = ...) -> None: ...
