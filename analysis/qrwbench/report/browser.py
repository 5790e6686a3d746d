"""The report in a real browser: Debian's headless Chromium (``make deps``).

`make report` keeps a screenshot of the first screen, ``first-screen.png``
(1280 x 1000 CSS pixels), next to index.html; the browser test
(tests/report/test_browser.py) loads a report the same way and reads what
the page did (:func:`dump_dom`, :func:`console_lines`). Without Chromium
the report is written all the same, without the screenshot, and
:func:`screenshot` says why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

SIZE = (1280, 1000)
TIMEOUT_S = 120
SCREENSHOT = "first-screen.png"
# headless, as root (no sandbox), no GPU, no profile of the user's
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
          "--no-first-run", "--disable-extensions", "--enable-logging=stderr", "--v=0")
_CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?(?::\d+)?\] (.*)")


def chromium() -> str | None:
    """The Chromium binary, or None when it is not installed."""
    return shutil.which("chromium")


def _run(url: str, *extra: str) -> subprocess.CompletedProcess:
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (make deps installs it)")
    with tempfile.TemporaryDirectory(prefix="qrwbench-chromium-") as profile:
        return subprocess.run([exe, *_FLAGS, f"--user-data-dir={profile}",
                               f"--window-size={SIZE[0]},{SIZE[1]}", *extra, url],
                              capture_output=True, text=True, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)


def url_of(path, query: str = "") -> str:
    return Path(path).resolve().as_uri() + (f"?{query}" if query else "")


def console_lines(stderr: str) -> list[str]:
    """What the page wrote to the console (messages, uncaught errors)."""
    return [m.group(1) for line in stderr.splitlines() if (m := _CONSOLE.search(line))]


def dump_dom(path, query: str = "") -> tuple[str, list[str]]:
    """(the DOM after the page loaded and its scripts ran, its console lines)."""
    res = _run(url_of(path, query), "--dump-dom")
    if res.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom exit {res.returncode}: {res.stderr[-500:]}")
    return res.stdout, console_lines(res.stderr)


def screenshot(html_path, png_path) -> str | None:
    """Write the first screen of ``html_path`` as ``png_path``; None when
    done, else why not (one line: no Chromium, it failed or hung)."""
    if chromium() is None:
        return "chromium is not installed (make deps installs it)"
    try:
        res = _run(url_of(html_path), f"--screenshot={Path(png_path).resolve()}")
    except subprocess.TimeoutExpired:
        return f"chromium did not finish in {TIMEOUT_S} s"
    except OSError as exc:
        return f"chromium did not start: {exc}"
    if res.returncode != 0 or not Path(png_path).is_file():
        tail = " ".join(res.stderr.split()[-20:])
        return f"chromium exit status {res.returncode}: {tail}"
    return None
