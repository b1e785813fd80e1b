from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Task(_message.Message):
    __slots__ = ("job", "index", "rank", "node", "host", "port", "gpus", "spare_port")
    JOB_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SPARE_PORT_FIELD_NUMBER: _ClassVar[int]
    job: str
    index: int
    rank: int
    node: str
    host: str
    port: int
    gpus: _containers.RepeatedScalarFieldContainer[str]
    spare_port: int
    def __init__(self, job: _Optional[str] = ..., index: _Optional[int] = ..., rank: _Optional[int] = ..., node: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., gpus: _Optional[_Iterable[str]] = ..., spare_port: _Optional[int] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("job_key", "task", "world_size")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    task: Task
    world_size: int
    def __init__(self, job_key: _Optional[str] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., world_size: _Optional[int] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class TableRequest(_message.Message):
    __slots__ = ("timeout",)
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    timeout: float
    def __init__(self, timeout: _Optional[float] = ...) -> None: ...

class TableReply(_message.Message):
    __slots__ = ("tasks", "missing")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    missing: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., missing: _Optional[_Iterable[int]] = ...) -> None: ...

class Identity(_message.Message):
    __slots__ = ("job_key", "task")
    JOB_KEY_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    job_key: str
    task: Task
    def __init__(self, job_key: _Optional[str] = ..., task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("key", "timeout")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    key: str
    timeout: float
    def __init__(self, key: _Optional[str] = ..., timeout: _Optional[float] = ...) -> None: ...

class BarrierRequest(_message.Message):
    __slots__ = ("name", "rank", "count", "timeout")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    rank: int
    count: int
    timeout: float
    def __init__(self, name: _Optional[str] = ..., rank: _Optional[int] = ..., count: _Optional[int] = ..., timeout: _Optional[float] = ...) -> None: ...
