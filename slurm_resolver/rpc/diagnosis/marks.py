"""The sets of ranks and the progress marks, as messages carry them: the hung job's two codecs (the marks ride
the watch's beats; a class of stacks names its ranks), each bounded whatever the job's size."""

from __future__ import annotations

from ...stacks.classes import MOST_RANGES, Ranks
from ...stacks.progress import Marks
from .. import protos as pb
from ..messages import WireError

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


def ranks_pb(ranks: Ranks) -> pb.RankSet:
    """A set of ranks as messages carry it."""
    return pb.RankSet(first=[f for f, _ in ranks.ranges], last=[last for _, last in ranks.ranges], count=ranks.count)


def ranks_of(message: pb.RankSet, world_size: int) -> Ranks:
    """A set of ranks from a message, checked against the job's size."""
    if len(message.first) != len(message.last) or len(message.first) > MOST_RANGES or message.count > world_size \
            or any(f > last or last >= world_size for f, last in zip(message.first, message.last)):
        raise WireError("a malformed set of ranks")
    return Ranks(tuple(zip(message.first, message.last)), message.count)


def progress_pb(marks: Marks) -> pb.Progress:
    """Marks as a beat carries them."""
    return pb.Progress(lowest=marks.lowest, behind=ranks_pb(marks.behind), highest=marks.highest, tasks=marks.tasks)


def read_progress(message: pb.Progress, world_size: int) -> Marks:
    """Marks from a beat, checked."""
    if message.tasks > world_size or message.lowest > message.highest:
        raise WireError("malformed progress marks")
    return Marks(message.lowest, ranks_of(message.behind, world_size), message.highest, message.tasks)
