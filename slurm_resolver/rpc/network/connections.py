"""Open connections to this process's servers, held per caller: a stranger's flood is cut to its share.

gRPC accepts every connection before any code of ours sees it, so two bounds hold them. gRPC's own,
per server (`incoming_limit`, set by `slurm_resolver.rpc.network.server.open_server`): beyond it gRPC accepts
a connection and closes it at once, so that the process never runs out of open files (at that limit
gRPC's listener stops accepting anyone's connections, and every file the process opens fails). And
ours, per caller (`Shedder`, one per process): a daemon thread counts the process's open files every
`CHECK_EVERY` seconds (`lowest_free`: two system calls), and only when they grew past a slack does it
ask the kernel for the connections of this process's server ports (both their ends, filtered by the
kernel: `slurm_resolver.rpc.network.sockets.around`, never the host's whole table), tell their callers apart
(`slurm_resolver.rpc.network.callers`: a user of this host, else a host) and cut each caller's connections
beyond `CONNECTIONS_SHARE` per server, newest first, with ``shutdown()``: gRPC then closes them itself.
The job's own user is never cut. This process's files are listed only to find those it cuts.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
import threading
from collections import Counter
from collections.abc import Callable, Container, Sequence

from .callers import CONNECTIONS_SHARE, caller_of
from .sockets import Socket, around

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

CHECK_EVERY = 0.5
"""Seconds between two counts of this process's open files (a few µs)."""
CUT_AGAIN = 0.05
"""Seconds to the next count after a caller was cut (it opens its connections again at once)."""
OWN_FILES = 64
"""Open files a process keeps for itself at least, beyond every server's connections (channels, logs):
an eighth of its limit where that is more (`incoming_limit`)."""
SLACK_PER_SERVER = 8
"""Open files a server of this process may add before the connections are counted again (a task's
channels and its callers'); never less than `CONNECTIONS_SHARE`."""


def incoming_limit(files: int) -> int | None:
    """gRPC's bound on one server's connections in a process that may open ``files`` files: those
    less what the process keeps for itself (None: no bound where the limit is none).

    >>> incoming_limit(1024), incoming_limit(20000)
    (896, 17500)
    """
    if files <= 0 or files == resource.RLIM_INFINITY:
        return None
    return max(1, files - max(OWN_FILES, files // 8))


def slack(servers: int, calm: int, files: int) -> int:
    """How many open files past ``calm`` (the count last found harmless) a process with ``servers``
    servers and a limit of ``files`` may reach before its connections are counted: a share, or a few
    per server where there are many (one process of the benchmark hosts a thousand), but at most half
    of what is left below the limit.

    >>> slack(1, 40, 1024), slack(1000, 100, 20000), slack(1000, 900, 1024)
    (64, 8000, 64)
    """
    return max(CONNECTIONS_SHARE, min(SLACK_PER_SERVER * servers, (files - calm) // 2))


def lowest_free() -> int | None:
    """The lowest file number this process has free: every one below it is open, so it is a count of
    the process's files that a flood cannot hide from (the kernel gives each connection accepted the
    lowest number free), at the cost of two system calls, not a read of every file's entry. None where
    no file is left."""
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None
    os.close(fd)
    return fd


def excess(sockets: Sequence[Socket], servers: Container[tuple[str, int]], me: int, share: int
           ) -> dict[tuple[int, str], list[int]]:
    """The connections to cut: of this host's established ``sockets`` (both ends of the connections of
    some ports), those accepted by one of this process's ``servers`` (their own end one's address and
    port; a socket still in a listener's queue has no inode yet, and is not counted), grouped by port
    and caller; for each caller beyond ``share`` at a server, the inodes beyond it, newest (highest)
    first. The callers of ``me`` (the job's own user) are never cut."""
    owners = {s.local: s.uid for s in sockets}
    held: dict[tuple[int, str], list[int]] = {}
    for s in sockets:
        if s.inode and s.local in servers:
            who, uid = caller_of(s.remote, owners)
            if uid != me:
                held.setdefault((s.local[1], who), []).append(s.inode)
    return {key: sorted(inodes, reverse=True)[:len(inodes) - share]
            for key, inodes in held.items() if len(inodes) > share}


def socket_inode(link: str) -> int | None:
    """The inode of ``socket:[1234]`` (the link of an open socket in /proc/self/fd); None for another file.

    >>> socket_inode("socket:[1234]"), socket_inode("/dev/null")
    (1234, None)
    """
    if link.startswith("socket:[") and link.endswith("]") and link[8:-1].isdigit():
        return int(link[8:-1])
    return None


def cut(fd: int, inode: int) -> bool:
    """Shut the socket ``fd`` down both ways, if it is still the socket ``inode`` (an fd closed since may
    be another file now); its owner (gRPC) sees the error and closes it. The fd is never closed here."""
    try:
        if os.fstat(fd).st_ino != inode:
            return False
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False
    finally:
        sock.detach()


class Shedder:
    """This process's server ports and the check that cuts each caller's connections beyond its share.

    Args:
        share: connections of one caller to one server.
        fds: the directory of this process's open files (read to find those it cuts).
        sockets: the established TCP sockets of this host with one end on one of some ports (asked when
            the count grew; None: the kernel does not say).
        files: this process's limit of open files, read at every check.
        count: the count of this process's open files (None: none is left to count with).
    """

    def __init__(self, share: int = CONNECTIONS_SHARE, fds: str = "/proc/self/fd",
                 sockets: Callable[[list[int]], list[Socket] | None] = around,
                 files: Callable[[], int] = lambda: resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                 count: Callable[[], int | None] = lowest_free) -> None:
        self.share, self._fds, self._sockets, self._files, self._count = share, fds, sockets, files, count
        self._servers: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._calm: int | None = None
        self._warned: set[tuple[int, str]] = set()
        self._reserve: int | None = None
        self._cut_last = False

    def watch(self, server: tuple[str, int]) -> None:
        """Hold the callers of ``server`` (address and port of a server of this process) to their share,
        until `forget`."""
        with self._lock:
            self._servers[server] += 1
            if self._thread is None:
                self._calm = self._count()  # before any caller: the files this process holds of its own
                self._thread = threading.Thread(target=self._run, name="slurm-resolver-connections", daemon=True)
                self._thread.start()

    def forget(self, server: tuple[str, int]) -> None:
        """The server at ``server`` stopped; the thread ends with the last one."""
        with self._lock:
            self._servers[server] -= 1
            if self._servers[server] <= 0:
                del self._servers[server]
                self._warned = {w for w in self._warned if w[0] != server[1]}
            if not self._servers:
                self._wake.set()

    def _run(self) -> None:
        pause = CHECK_EVERY
        while True:
            self._wake.wait(pause)
            with self._lock:
                if not self._servers:  # the last server stopped: a server started later starts a thread
                    self._thread, self._calm, self._cut_last = None, None, False
                    if self._reserve is not None:
                        os.close(self._reserve)
                        self._reserve = None
                    self._wake.clear()
                    return
                self._wake.clear()
            try:
                pause = CUT_AGAIN if self.check() else CHECK_EVERY
            except Exception as exc:  # never the server's end
                log.debug("slurm_resolver: the check of open connections failed: %r", exc)
                pause = CHECK_EVERY

    def _hold_reserve(self) -> None:
        """Hold a file to give up where none is left (the table and the links must be read then)."""
        if self._reserve is None:
            try:
                self._reserve = os.open(os.devnull, os.O_RDONLY)
            except OSError:
                pass

    def check(self) -> int:
        """One check: count the open files, and where they grew past the slack (or the last check cut
        some), cut every caller's connections beyond its share. The number cut."""
        with self._lock:
            servers = list(self._servers)
        self._hold_reserve()
        count = self._count()
        if count is not None and self._calm is None:
            self._calm = count
        files = self._files()
        if (not self._cut_last and count is not None and self._calm is not None
                and count <= self._calm + slack(len(servers), self._calm, files)):
            self._calm = min(self._calm, count)
            return 0
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
        cut_now = self._shed(servers)
        self._hold_reserve()
        after = self._count()  # the connections cut are still open: gRPC closes them soon
        self._calm = max(0, (after if after is not None else files // 2) - cut_now)
        self._cut_last = cut_now > 0  # the next check reads the table again, until nothing is cut
        return cut_now

    def _shed(self, servers: list[tuple[str, int]]) -> int:
        """Cut each caller's connections to ``servers`` beyond its share; warn once per caller and port."""
        sockets = self._sockets(sorted({port for _, port in servers}))
        over = excess(sockets, set(servers), os.geteuid(), self.share) if sockets else {}
        if not over:
            return 0
        found: dict[int, int] = {}  # this process's sockets: inode -> fd (listed only to cut some)
        for name in os.listdir(self._fds):
            try:
                inode = socket_inode(os.readlink(f"{self._fds}/{name}"))
            except OSError:
                continue
            if inode is not None:
                found[inode] = int(name)
        done = 0
        for (port, who), inodes in over.items():
            mine = sum(cut(found[i], i) for i in inodes if i in found)
            done += mine
            if not mine:
                continue
            with self._lock:
                said = (port, who) in self._warned
                self._warned.add((port, who))
            if not said:
                log.warning("slurm_resolver: %s held more than %d connections to this task's server (port %d): its "
                            "newest %d were cut, and so will be any beyond its share. Another user's flood, or a "
                            "program that opens a connection per call: find it with ss -tnp 'sport = :%d', and "
                            "have it reuse its channels", who, self.share, port, mine, port)
        return done


_SHEDDER = Shedder()
"""The one shedder of this process (every server of the process registers its port with it)."""


def watch(server: tuple[str, int]) -> None:
    """Hold the callers of this process's server at ``server`` (address, port) to their share of connections."""
    _SHEDDER.watch(server)


def forget(server: tuple[str, int]) -> None:
    """This process's server at ``server`` stopped."""
    _SHEDDER.forget(server)
