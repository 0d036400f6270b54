"""The docs read on GitHub (issue 49 item 7): each page, rendered by GitHub's
own Markdown renderer (cmark-gfm, with GitHub's extensions), shows no MyST
syntax as text, names every option and ini key of the reference in a
heading, and links only to files that exist and to anchors GitHub makes.

Sphinx builds the same pages (``docs/conf.py``, ``tox -e docs``): its
``myst_heading_anchors`` makes GitHub's anchors too, so a link that works
here works there, and the build (warnings are errors) fails on one that
does not.
"""

from __future__ import annotations

import dataclasses
import html.parser
import os
import re
import textwrap
from pathlib import Path
from urllib.parse import unquote
from urllib.parse import urlsplit

import cmarkgfm
import pytest

from conftest import plugin_help

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "docs/reference.md"
PAGES = sorted(
    [
        *(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")),
        "README.md",
        "CONTRIBUTING.md",
        "CHANGELOG.md",
    ]
)
PAGES = [page for page in PAGES if not page.startswith("docs/_build/")]

#: GitHub's extensions of CommonMark (its tasklist changes nothing checked here).
EXTENSIONS = ["table", "autolink", "strikethrough", "tagfilter"]

#: A MyST role left as text: ``{confval}`` right before a code span.
ROLE = re.compile(r"\{[a-z][a-z:]*\}<code>")
#: A MyST target, ``(label)=``, on a line of its own.
LABEL = re.compile(r"(?:^|\n|<p>)\([\w.-]+\)=(?:$|\n|</p>)")
#: A MyST directive, a fence whose info string starts with ``{``.
DIRECTIVE = re.compile(r'<pre lang="\{([^"}]*)\}')
#: A MyST definition (``: text`` under a term), run into the term's paragraph.
DEFINITION = re.compile(r"\n: ")
#: An option or ini key as the plugin registers it, in ``pytest --help``.
HELP_NAME = re.compile(r"^  (--isolation-[a-z-]+|isolation_[a-z_]+)\b", re.M)


def render(text: str) -> str:
    options = cmarkgfm.Options.CMARK_OPT_GITHUB_PRE_LANG | cmarkgfm.Options.CMARK_OPT_UNSAFE
    return str(cmarkgfm.markdown_to_html_with_extensions(text, options, EXTENSIONS))


def slug(text: str) -> str:
    """GitHub's anchor of a heading: its text lower-cased, without what is not
    a letter, digit, space, ``-`` or ``_``, spaces made ``-``."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


class _Reader(html.parser.HTMLParser):
    """Collects the text of each heading and the target of each link."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.links: list[str] = []
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = []
        elif tag == "a" and href:
            self.links.append(href)

    def handle_endtag(self, tag: str) -> None:
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading.append(data)


@dataclasses.dataclass(frozen=True)
class Page:
    """What GitHub shows of a page: the HTML, its headings' text, its links."""

    html: str
    headings: tuple[str, ...]
    links: tuple[str, ...]

    @classmethod
    def of(cls, markdown: str) -> Page:
        rendered = render(markdown)
        reader = _Reader()
        reader.feed(rendered)
        reader.close()
        return cls(rendered, tuple(reader.headings), tuple(reader.links))

    @property
    def prose(self) -> str:
        """The HTML without its code blocks."""
        return re.sub(r"<pre\b.*?</pre>", "", self.html, flags=re.S)

    @property
    def anchors(self) -> set[str]:
        """The ids GitHub gives the headings; a repeated one gets ``-1``, ``-2``, ..."""
        seen: set[str] = set()
        for heading in self.headings:
            found, count = slug(heading), 0
            while found in seen:
                count += 1
                found = f"{slug(heading)}-{count}"
            seen.add(found)
        return seen


def syntax_problems(name: str, markdown: str) -> list[str]:
    """MyST syntax that GitHub shows as text."""
    page = Page.of(markdown)
    found = [f"{name}: the role {m[0][:-6]!r} shows as text" for m in ROLE.finditer(page.prose)]
    found += [
        f"{name}: the target {m[0].strip('<>p/')!r} shows as text"
        for m in LABEL.finditer(page.prose)
    ]
    found += [
        f"{name}: the directive {{{m[1]}}} shows as a code block"
        for m in DIRECTIVE.finditer(page.html)
    ]
    if DEFINITION.search(page.prose):
        found.append(f"{name}: a definition list runs into one paragraph")
    return found


def link_problems(name: str, markdown: str, read: dict[str, str]) -> list[str]:
    """Relative links whose file does not exist, or whose anchor GitHub does not make."""
    found = []
    for link in Page.of(markdown).links:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc:
            continue
        path = unquote(parts.path)
        target = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
        target = Path(target).as_posix()
        if not (ROOT / target).exists():
            found.append(f"{name}: {link!r}: no file {target}")
        elif parts.fragment and not target.endswith(".md"):
            found.append(f"{name}: {link!r}: an anchor into a file that is not a page")
        elif parts.fragment:
            text = read[target] if target in read else (ROOT / target).read_text(encoding="utf-8")
            if unquote(parts.fragment) not in Page.of(text).anchors:
                found.append(f"{name}: {link!r}: no heading of {target} has the anchor")
    return found


def unnamed(markdown: str, names: set[str]) -> list[str]:
    """The names no heading of the page names (GitHub showed the reference's
    entries as code blocks, without their names)."""
    headings = set(Page.of(markdown).headings)
    return sorted(names - headings)


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {name: (ROOT / name).read_text(encoding="utf-8") for name in PAGES}


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every option and ini key of the plugin, from ``pytest --help``."""
    text = plugin_help(tmp_path_factory.mktemp("help"))
    return set(HELP_NAME.findall(text))


@pytest.mark.parametrize("name", PAGES)
def test_no_myst_syntax_shows_as_text(name: str, pages: dict[str, str]) -> None:
    assert syntax_problems(name, pages[name]) == []


@pytest.mark.parametrize("name", PAGES)
def test_relative_links_reach_a_file_and_a_heading(name: str, pages: dict[str, str]) -> None:
    assert link_problems(name, pages[name], pages) == []


def test_every_option_and_ini_key_is_a_heading_of_the_reference(
    registered: set[str], pages: dict[str, str]
) -> None:
    assert len(registered) > 60  # the reader found the plugin's options and keys
    assert unnamed(pages[REFERENCE], registered) == []


# -- the checks find what GitHub showed wrongly ---------------------------------------

#: The reference's form before issue 49: MyST that only Sphinx reads.
MYST = textwrap.dedent(
    """\
    # Reference

    ## Command-line options

    ```{option} --isolation-mode=off|file|test
    `file` runs every test file in a child process of its own (or where
    {confval}`isolation_paths` places it).

    Default: `off` (ini key {confval}`isolation_mode`).
    ```

    (where-each-file-runs)=
    ## Where each file runs

    Windows is not supported yet
    : {option}`--isolation-mode`, `file`, is a usage error there.

    See [where each file runs](#where-each-file-runs), the
    [marker](#the-isolation-marker) and [the how-to](howto/nothing.md).
    """
)


def test_myst_syntax_is_found() -> None:
    assert syntax_problems("demo.md", MYST) == [
        "demo.md: the role '{option}' shows as text",
        "demo.md: the target '(where-each-file-runs)=' shows as text",
        "demo.md: the directive {option} shows as a code block",
        "demo.md: a definition list runs into one paragraph",
    ]


def test_an_entry_without_a_heading_is_found() -> None:
    assert unnamed(MYST, {"--isolation-mode", "isolation_mode"}) == [
        "--isolation-mode",
        "isolation_mode",
    ]
    assert unnamed("### `--isolation-mode`\n\n### isolation_mode\n", {"--isolation-mode"}) == []


def test_a_missing_file_or_anchor_is_found() -> None:
    name = "docs/reference.md"
    assert link_problems(name, MYST, {name: MYST}) == [
        f"{name}: '#the-isolation-marker': no heading of {name} has the anchor",
        f"{name}: 'howto/nothing.md': no file docs/howto/nothing.md",
    ]


@pytest.mark.parametrize(
    ("headings", "anchors"),
    [
        (["`--isolation-mode`"], {"--isolation-mode"}),
        (["Outside fixtures: `pytest_isolation.tmp()`"], {"outside-fixtures-pytest_isolationtmp"}),
        (
            ["The leak guard's rules", "Usage", "Usage", "Usage"],
            {"the-leak-guards-rules", "usage", "usage-1", "usage-2"},
        ),
        (["4. Share the expensive fixtures"], {"4-share-the-expensive-fixtures"}),
    ],
)
def test_anchors_are_githubs(headings: list[str], anchors: set[str]) -> None:
    markdown = "".join(f"## {heading}\n\n" for heading in headings)
    assert Page.of(markdown).anchors == anchors
