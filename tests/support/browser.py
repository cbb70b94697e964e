"""A real headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for page tests.

No driver to install: Chromium speaks the Chrome DevTools Protocol over two pipes
(``--remote-debugging-pipe``: it reads commands on its fd 3 and writes answers and events on its fd 4,
each message one JSON object ended by a NUL byte), so the standard library is all the test needs. The
browser runs with a throw-away profile and every background network feature off (the machine has no
network; without these flags Chromium keeps trying).

    with Browser.launch(tmp_path) as browser:
        browser.open("http://127.0.0.1:9400/")
        text = browser.text()
        browser.screenshot(tmp_path / "page.png")
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

#: Debian's package name and binary; ``KCL_TEST_CHROMIUM`` may name another Chromium-based binary.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")

FLAGS = (
    "--headless",
    "--no-sandbox",  # root in a container: the sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    """The Chromium binary, or None when none is installed."""
    named = os.environ.get("KCL_TEST_CHROMIUM")
    if named:
        return shutil.which(named) or (named if Path(named).exists() else None)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(AssertionError):
    pass


class Browser:
    """One Chromium process with one page; every method blocks until the browser answers."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self._process = process
        self._out = os.fdopen(to_browser, "wb", buffering=0)
        self._in = os.fdopen(from_browser, "rb", buffering=0)
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()
        self._session: str | None = None

    @classmethod
    def launch(cls, tmp_path: Path, *, width: int = 1100, height: int = 900) -> Browser:
        binary = find_chromium()
        if binary is None:
            raise BrowserError("no Chromium installed (scripts/bootstrap.sh installs Debian's chromium)")
        profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
        # fd 3: the browser reads our commands; fd 4: it writes its answers
        cmd_read, cmd_write = os.pipe()
        ans_read, ans_write = os.pipe()

        def pipes_at_3_and_4() -> None:
            # out of the way first: either pipe end may itself be fd 3 or 4
            high_read = fcntl.fcntl(cmd_read, fcntl.F_DUPFD, 10)
            high_write = fcntl.fcntl(ans_write, fcntl.F_DUPFD, 10)
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)

        log = (tmp_path / "chromium.log").open("wb")
        process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=pipes_at_3_and_4,  # only dup2 before exec
            close_fds=False,
        )
        log.close()
        os.close(cmd_read)
        os.close(ans_write)
        browser = cls(process, cmd_write, ans_read)
        try:
            browser._attach(width, height)
        except BaseException:
            browser.close()
            raise
        return browser

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the protocol ------------------------------------------------------------------------------

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._cond.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._cond:
                    if "id" in message:
                        self._answers[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._cond.notify_all()

    def call(self, method: str, timeout_s: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one command (to the page's session once attached) and return its result."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if self._session is not None and not method.startswith("Target."):
            message["sessionId"] = self._session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self._process.poll() is not None:
                    raise BrowserError(f"{method}: no answer from Chromium (exit {self._process.poll()})")
                self._cond.wait(left)
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def _attach(self, width: int, height: int) -> None:
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        target = page["targetId"] if page else self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    # -- what a test does -------------------------------------------------------------------------

    def open(self, url: str, timeout_s: float = 30.0) -> None:
        """Navigate and wait until the document has loaded."""
        answer = self.call("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"cannot open {url}: {answer['errorText']}")
        self.wait_for(lambda: self.evaluate("document.readyState") == "complete", timeout_s, "page loaded")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        """The page's rendered text (what a reader sees)."""
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def url(self) -> str:
        return str(self.evaluate("location.href"))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def wait_for(self, check: Callable[[], bool], timeout_s: float, what: str) -> float:
        """Seconds until ``check()`` holds (a page being replaced mid-check counts as not yet)."""
        start = time.monotonic()
        while True:
            try:
                if check():
                    return time.monotonic() - start
            except BrowserError:
                pass
            if time.monotonic() - start > timeout_s:
                raise BrowserError(f"{what}: not within {timeout_s}s")
            time.sleep(0.1)

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._out.write(json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                self._process.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait(5)
        for stream in (self._out, self._in):
            with contextlib.suppress(OSError):
                stream.close()
