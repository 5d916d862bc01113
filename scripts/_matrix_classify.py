"""Pure helpers of the compat matrix: read a command's outcome as works / fails, and name why.

An exit status alone is not enough: the stock CLI exits 0 after some errors (``det shell
open`` when ssh fails, a thread's traceback), so stderr is read too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORKS, FAILS, NA = "works", "fails", "n/a"

# Lines that say something went wrong (warnings and progress lines are not among them).
_ERROR_LINE = re.compile(
    r"no such route|Enterprise Edition|Connection closed|^(Error|ERROR|Failed|error|fatal)\b"
    r"|^[\w.]*(Error|Exception)(: |$)|^Traceback \(most recent call last\)|^usage: det ")
_NOTE_LINE = re.compile(
    r"no such route|Enterprise Edition|Connection closed|^(Error|ERROR|Failed|error|fatal)\b"
    r"|^[\w.]*(Error|Exception): ")


@dataclass(frozen=True)
class Verdict:
    status: str  # WORKS, FAILS or NA
    note: str = ""
    cause: str = ""  # for FAILS: one of CAUSES


CAUSES = {
    "missing route": "the master has no route for a call the client makes (404 no such route)",
    "rejected": "the master answered 4xx to a call it serves",
    "server error": "the master answered 5xx",
    "response shape": "the client could not read the master's answer (a traceback in the "
                      "client's response handling)",
    "client refused": "the stock client refused before calling the master (det-jupyter's ids "
                      "are not in the form it expects)",
    "wrong output": "exit 0 but the output lacks what the command should print, or stderr "
                    "reports an error",
    "timeout": "no exit within the case's time limit",
    "blocked": "an object the case needs could not be made (see Scenario)",
    "other": "anything else",
}


def note_line(stderr: str, stdout: str = "") -> str:
    """The line that best says what went wrong: the first error-looking line of stderr (the
    exception line, not ``Traceback``), else stderr's first line, else stdout's."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    lines = [ln for ln in lines if "Warning" not in ln and not ln.startswith("warnings.warn")]
    picked = next((ln for ln in lines if _NOTE_LINE.search(ln)), None)
    if picked is None and lines:
        picked = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    if picked is None:
        picked = next((ln.strip() for ln in stdout.splitlines() if ln.strip()), "")
    return shorten(picked)


def shorten(text: str, limit: int = 180) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cause_of(text: str, *, rc: int = 1, timed_out: bool = False) -> str:
    """Which of CAUSES a failure's output points at."""
    if timed_out:
        return "timeout"
    if text.startswith("blocked"):
        return "blocked"
    if "no such route" in text or "Enterprise Edition is required" in text:
        return "missing route"
    if "partial UUIDs not supported" in text:
        return "client refused"
    if re.search(r"\b5\d\d\b|Internal Server Error|server error", text, re.I):
        return "server error"
    if re.search(r"bindings\.py|from_json|KeyError|TypeError|AttributeError|JSONDecodeError",
                 text):
        return "response shape"
    if re.search(r"\b4\d\d\b|not found|Not Found|Bad Request|invalid|Forbidden|"
                 r"already exists|conflict|not allowed|cannot|can't|must", text, re.I):
        return "rejected"
    if rc == 0:
        return "wrong output"
    return "other"


_REQUEST = re.compile(r"\] (\d{3}) (GET|POST|PUT|PATCH|DELETE) (\S+)")


def master_errors(log_text: str) -> list[str]:
    """``"404 GET /path"`` for each request the master's log shows answered >= 400 (query
    strings dropped)."""
    out = []
    for m in _REQUEST.finditer(log_text):
        if int(m.group(1)) >= 400:
            out.append(f"{m.group(1)} {m.group(2)} {m.group(3).split('?')[0]}")
    return out


def classify_cli(rc: int, stdout: str, stderr: str, *, timed_out: bool = False,
                 expect: str | None = None, answered: list[str] | None = None) -> Verdict:
    """works: exit 0, no error line on stderr, and ``expect`` (a regex) found.

    ``answered``: the master's error answers during the command (``master_errors``); they
    name the call when the client prints an empty message, and a 5xx among them, or a 404 on
    a path outside ``/api/`` and ``/proxy/`` (which take no object ids), is the cause."""
    verdict = _classify(rc, stdout, stderr, timed_out=timed_out, expect=expect)
    if verdict.status != FAILS or not answered:
        return verdict
    note, cause = verdict.note, verdict.cause
    if note.endswith(":") or "no such route" not in note:
        note = shorten(f"{note} (master: {', '.join(dict.fromkeys(answered))})", 240)
    if any(a.startswith("5") for a in answered):
        cause = "server error"
    elif any(a.startswith("404") and not a.split()[-1].startswith(("/api/", "/proxy/"))
             for a in answered):
        cause = "missing route"
    return Verdict(FAILS, note, cause)


def _classify(rc: int, stdout: str, stderr: str, *, timed_out: bool,
              expect: str | None) -> Verdict:
    if timed_out:
        return Verdict(FAILS, f"no exit within the time limit; {note_line(stderr, stdout)}",
                       "timeout")
    # stdout is the command's content (logs may hold anyone's errors); the CLI's own errors
    # go to stderr.
    if rc != 0:
        return Verdict(FAILS, f"exit {rc}: {note_line(stderr, stdout)}",
                       cause_of(stderr or stdout, rc=rc))
    if any(_ERROR_LINE.search(ln.strip()) for ln in stderr.splitlines()):
        return Verdict(FAILS, f"exit 0 but: {note_line(stderr, stdout)}", cause_of(stderr, rc=0))
    if expect and not re.search(expect, stderr + "\n" + stdout):
        return Verdict(FAILS, f"exit 0 but no /{shorten(expect, 60)}/ in the output: "
                              f"{note_line(stderr, stdout)}", "wrong output")
    return Verdict(WORKS)
