"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ended by NUL on file descriptors 3 and 4), so the
browser tests need nothing beyond the browser. Host names resolve to nothing
(``--host-resolver-rules``): a page that reaches for the network gets no answer, and each request
it makes is recorded (``Network.enable``) for the test to check.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
NO_BROWSER = "no chromium (Debian: apt-get install chromium)"


class DevTools:
    """A headless Chromium and its DevTools pipe: send commands, collect events."""

    def __init__(self, profile: Path) -> None:
        assert BROWSER is not None
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def pipes() -> None:  # the browser reads commands on fd 3 and writes replies on fd 4
            commands = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4
            replies = fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [
                BROWSER,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--window-size=1400,1000",
                "--host-resolver-rules=MAP * ~NOTFOUND",
            ],
            preexec_fn=pipes,
            close_fds=False,  # subprocess would close fds 3 and 4 after preexec_fn
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):  # already gone
            self.send("Browser.close")
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)
        os.close(self._read)
        os.close(self._write)


@dataclass
class Visit:
    """What a page showed: the value of the state script, a full-page PNG screenshot, every URL
    the page requested, and its DOM with shadow roots, closed ones included (``DOM.getDocument``,
    pierced)."""

    state: Any
    png: bytes
    requested: list[str]
    dom: dict[str, Any]


def visit(
    url: str, profile: Path, state: str, ready: str | None = None, width: int = 1400
) -> Visit:
    """Open ``url``, wait for the load event (and for the script ``ready`` to be true, up to a
    minute), show the whole page in the viewport, then read the ``state`` script's JSON and a
    screenshot: the rectangles the script reports are the screenshot's."""
    browser = DevTools(profile)
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        browser.send("Network.enable", session)
        browser.send("Page.enable", session)
        browser.send("Page.navigate", session, url=url)
        browser.wait_for("Page.loadEventFired")

        def evaluate(expression: str) -> Any:
            reply = browser.send(
                "Runtime.evaluate", session, expression=expression, returnByValue=True
            )
            return reply["result"].get("value")

        deadline = time.monotonic() + 60
        while ready is not None and not evaluate(ready) and time.monotonic() < deadline:
            time.sleep(0.25)
        height = browser.send("Page.getLayoutMetrics", session)["cssContentSize"]["height"]
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width,
            height=int(height) + 1,
            deviceScaleFactor=1,
            mobile=False,
        )
        value = json.loads(evaluate(state))
        shot = browser.send("Page.captureScreenshot", session, format="png")
        dom = browser.send("DOM.getDocument", session, depth=-1, pierce=True)["root"]
    finally:
        browser.close()
    requested = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    return Visit(value, base64.b64decode(shot["data"]), requested, dom)
