from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Records(_message.Message):
    __slots__ = ("ranks", "ports", "spare_ports", "gpus", "first", "nodes")
    class GpusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    RANKS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    SPARE_PORTS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ranks: _containers.RepeatedScalarFieldContainer[int]
    ports: _containers.RepeatedScalarFieldContainer[int]
    spare_ports: _containers.RepeatedScalarFieldContainer[int]
    gpus: _containers.ScalarMap[int, str]
    first: int
    nodes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ranks: _Optional[_Iterable[int]] = ..., ports: _Optional[_Iterable[int]] = ..., spare_ports: _Optional[_Iterable[int]] = ..., gpus: _Optional[_Mapping[int, str]] = ..., first: _Optional[int] = ..., nodes: _Optional[_Iterable[int]] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("missing", "missing_count", "reason", "failed_count")
    MISSING_FIELD_NUMBER: _ClassVar[int]
    MISSING_COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    missing: _containers.RepeatedScalarFieldContainer[int]
    missing_count: int
    reason: str
    failed_count: int
    def __init__(self, missing: _Optional[_Iterable[int]] = ..., missing_count: _Optional[int] = ..., reason: _Optional[str] = ..., failed_count: _Optional[int] = ...) -> None: ...

class Contribution(_message.Message):
    __slots__ = ("job_key", "round", "source", "records", "failure", "node", "credential")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    round: str
    source: int
    records: Records
    failure: Failure
    node: int
    credential: bytes
    def __init__(self, job_key: _Optional[str] = ..., round: _Optional[str] = ..., source: _Optional[int] = ..., records: _Optional[_Union[Records, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., node: _Optional[int] = ..., credential: _Optional[bytes] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("token", "failure", "records", "total")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    token: str
    failure: Failure
    records: Records
    total: int
    def __init__(self, token: _Optional[str] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., records: _Optional[_Union[Records, _Mapping]] = ..., total: _Optional[int] = ...) -> None: ...

class Identity(_message.Message):
    __slots__ = ("job_key", "rank", "node", "job", "index")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    rank: int
    node: str
    job: str
    index: int
    def __init__(self, job_key: _Optional[str] = ..., rank: _Optional[int] = ..., node: _Optional[str] = ..., job: _Optional[str] = ..., index: _Optional[int] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Beat(_message.Message):
    __slots__ = ("job_key", "source", "node", "credential", "failed", "reason", "leaving")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    source: int
    node: int
    credential: bytes
    failed: _containers.RepeatedScalarFieldContainer[int]
    reason: str
    leaving: bool
    def __init__(self, job_key: _Optional[str] = ..., source: _Optional[int] = ..., node: _Optional[int] = ..., credential: _Optional[bytes] = ..., failed: _Optional[_Iterable[int]] = ..., reason: _Optional[str] = ..., leaving: _Optional[bool] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("failed", "reason", "leaving", "successor", "above", "gone")
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    ABOVE_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    failed: _containers.RepeatedScalarFieldContainer[int]
    reason: str
    leaving: bool
    successor: int
    above: int
    gone: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, failed: _Optional[_Iterable[int]] = ..., reason: _Optional[str] = ..., leaving: _Optional[bool] = ..., successor: _Optional[int] = ..., above: _Optional[int] = ..., gone: _Optional[_Iterable[int]] = ...) -> None: ...
