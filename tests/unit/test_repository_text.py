"""The repository speaks of the product: no progress reports, issue numbers or work diaries.

Git keeps the history of the work; the files say what the product is and does. "Session" is a
product word (a chat session), so only the phrasings of a work diary are refused.
"""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

TEXT_SUFFIXES = (".md", ".py", ".sh", ".toml", ".yml", ".mjs", ".ts", ".tsx")
TEXT_NAMES = {"Makefile"}
SKIPPED_PREFIXES = ("gateway/static/",)
"""The chat page's committed bundle is built from `web/`, which is checked itself."""
LOCKFILES = {"package-lock.json", "uv.lock", "poetry.lock", "yarn.lock", "pnpm-lock.yaml"}

_ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|\d+(?:st|nd|rd|th))"
)
PROGRESS_REPORTS: dict[str, re.Pattern[str]] = {
    "an issue reference": re.compile(r"\bissues?\s+#?\d+(?:\s*(?:,|and|&|to|–)\s*#?\d+)*", re.I),
    "the issue worked on": re.compile(r"\bthe issue's\b", re.I),
    "a note named for where work stopped": re.compile(r"\bstop[- ]" r"notes?\b", re.I),
    "a note named for closing work": re.compile(r"\bclosing[- ]" r"notes?\b", re.I),
    "a note named for progress": re.compile(r"\bprogress[- ]" r"notes?\b", re.I),
    "the dated notes directory": re.compile(r"\bdocs/notes\b", re.I),
    "a numbered work session": re.compile(rf"\b{_ORDINAL}\s+session\b", re.I),
    "the next or previous work session": re.compile(
        r"\b(?:next|previous|prior|earlier|later)\s+session\b", re.I
    ),
    "work done in this session": re.compile(
        r"\b(?:new|done|measured|found|fixed|added|landed|started|changed|ran|run|seen)"
        r"\s+(?:in|during)\s+this\s+session\b",
        re.I,
    ),
    "this session's work": re.compile(
        r"\bthis\s+session's\s+(?:machine|work|commits?|changes|code|figures|runs?|notes?"
        r"|review|suite)\b",
        re.I,
    ),
}


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    files = []
    for path in filter(None, listed.split("\0")):
        name = path.rsplit("/", 1)[-1]
        if path == THIS_FILE or name in LOCKFILES or path.startswith(SKIPPED_PREFIXES):
            continue
        if (name in TEXT_NAMES or name.endswith(TEXT_SUFFIXES)) and (ROOT / path).is_file():
            files.append(path)
    return files


def _hits(path: str) -> list[str]:
    text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
    return [
        f"{path}:{number}: {what}: {match.group(0)!r}"
        for number, line in enumerate(text.splitlines(), start=1)
        for what, pattern in PROGRESS_REPORTS.items()
        for match in pattern.finditer(line)
    ]


def test_there_is_no_directory_of_dated_notes() -> None:
    assert not (ROOT / "docs" / "notes").exists()


def test_no_tracked_text_reports_progress_or_names_an_issue() -> None:
    files = _tracked_text_files()
    assert files, "git ls-files listed no text file"

    hits = [hit for path in files for hit in _hits(path)]

    assert not hits, "progress-report text (say what the product does instead):\n" + "\n".join(hits)


def test_the_patterns_leave_the_product_word_session_alone() -> None:
    product = [
        "the message id is already stored in this session under another idempotency key",
        "no file 'a.txt' in this session's workspace",
        "Deleting a session deletes its workspace",
        "a spec of this session uses it",
        "fork a session from a message",
    ]
    # Written in pieces, so that this file holds no diary line of its own.
    diary = [
        " ".join(parts)
        for parts in [
            ("Issue", "20,", "third changes"),
            ("issues", "6 and 7"),
            ("(issue", "#12)"),
            ("the seventh", "session's slow machine"),
            ("measured in", "this session"),
            ("the next", "session should"),
            ("Stop", "note 9"),
            ("The", "issue's target: within 2×"),
        ]
    ]

    def refused(line: str) -> bool:
        return any(pattern.search(line) for pattern in PROGRESS_REPORTS.values())

    assert [line for line in product if refused(line)] == []
    assert [line for line in diary if not refused(line)] == []


def test_the_benchmarks_page_is_a_reference_not_a_journal() -> None:
    lines = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()

    assert len(lines) <= 400


def test_the_changelog_and_the_contributing_guide_exist() -> None:
    assert (ROOT / "CHANGELOG.md").is_file()
    assert (ROOT / "CONTRIBUTING.md").is_file()
