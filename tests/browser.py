"""Headless Chromium driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``):
no WebDriver, no extra package. The docs tests open the built site with it as a reader does."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["NETWORK_OFF", "Chromium"]

NETWORK_OFF = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
"""Every request but file:// goes to a closed port: the site must not need the internet."""


class Chromium:
    """One headless browser with one tab of ``width`` x ``height`` CSS pixels, without the network."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        commands, self._send = os.pipe()  # we write, Chromium reads on its fd 3
        self._receive, replies = os.pipe()  # Chromium writes on its fd 4, we read
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands, replies)]

        def onto_3_and_4() -> None:  # in the child (close_fds would close them after): dup2 makes them inheritable
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", *NETWORK_OFF, "about:blank"],
            preexec_fn=onto_3_and_4, close_fds=False, start_new_session=True,  # its own group: ended whole
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (commands, replies, *high):
            os.close(fd)
        self._buffer = b""
        self._last_id = 0
        self.events: list[dict[str, Any]] = []
        """What the browser reported on its own (console messages, once enabled)."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params: Any) -> Any:
        """Send one command (to the tab when ``session``) and return its result."""
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._receive], [], [], left)[0]:
                    raise TimeoutError(f"Chromium did not answer {method} within {timeout} s")
                chunk = os.read(self._receive, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium exited (code {self.process.poll()}) during {method}")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if "method" in reply:
                self.events.append(reply)
            elif reply.get("id") == self._last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JavaScript expression in the tab (awaited when it is a promise)."""
        result = self.call("Runtime.evaluate", session=True, timeout=timeout, expression=expression,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "true", timeout: float = 60) -> None:
        """Load ``url``, then wait until the new page has loaded and the expression ``ready`` holds."""
        self.evaluate("window.__left = true")
        self.call("Page.navigate", session=True, url=url)
        self.wait(f"!window.__left && document.readyState === 'complete' && ({ready})", timeout)

    def wait(self, condition: str, timeout: float = 60) -> None:
        """Poll the expression ``condition`` in the page until it holds."""
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"!!({condition})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{condition} did not hold within {timeout} s on {self.evaluate('location.href')}")
            time.sleep(0.1)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        try:
            self.call("Browser.close", timeout=10)
            self.process.wait(timeout=10)
        except (OSError, RuntimeError, TimeoutError, subprocess.TimeoutExpired):
            pass
        finally:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # its renderers too, whatever happened
            self.process.wait(timeout=30)
            os.close(self._send)
            os.close(self._receive)
