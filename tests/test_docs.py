"""The docs' shell transcripts are real runs (CONTRIBUTING.md, "Executable docs")."""

from __future__ import annotations

import configparser
import textwrap
from pathlib import Path

import pytest

import doctranscripts

ROOT = Path(__file__).resolve().parent.parent

#: The pages whose transcripts run here, and in which every transcript-looking block must
#: run or say why not. The how-tos join when they are converted.
EXECUTABLE_DOCS = (
    "README.md",
    "docs/quickstart.md",
    "docs/index.md",
    "docs/howto/leak-guard.md",
    "docs/howto/lint.md",
    "docs/howto/move-to-file-mode.md",
    "docs/howto/parallel.md",
    "docs/howto/select-tests.md",
    "docs/howto/run-what-a-change-affects.md",
    "docs/howto/twice.md",
    "docs/howto/fixtures-env.md",
    "docs/howto/fixtures-fs.md",
    "docs/howto/fixtures-mock-module.md",
    "docs/howto/fixtures-tmp.md",
    "docs/howto/find-polluter.md",
    "docs/howto/file-mode.md",
    "docs/howto/ci.md",
    "docs/howto/process-per-test.md",
)

DOCS = {name: doctranscripts.read(ROOT / name, ROOT) for name in EXECUTABLE_DOCS}


def _sections() -> list[object]:
    return [
        pytest.param(section, id=f"{name}#{section.slug}")
        for name, doc in DOCS.items()
        for section in doc.sections
        if section.runs
    ]


#: The pytest the pages show: its output (short summary lines, collection
#: errors' headers) differs in older ones, which CI's oldest run also tests.
DOCS_PYTEST = (9, 0)


@pytest.mark.skipif(
    pytest.version_tuple < DOCS_PYTEST,
    reason="the pages show pytest 9's output; CI's main run (pytest 9) checks them",
)
@pytest.mark.parametrize("section", _sections())
def test_transcripts_print_what_the_doc_shows(
    section: doctranscripts.Section, tmp_path: Path
) -> None:
    failures = doctranscripts.run_section(section, tmp_path)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


@pytest.mark.parametrize("name", EXECUTABLE_DOCS)
def test_every_transcript_runs_or_says_why_not(name: str) -> None:
    doc = DOCS[name]
    assert [*doc.problems, *doc.unaccounted()] == []
    assert any(section.runs for section in doc.sections), f"{name} runs no transcript"


def _doc(text: str) -> doctranscripts.Doc:
    return doctranscripts.parse(textwrap.dedent(text), "demo.md")


DRIFTED = """\
    # Demo

    <!-- file: test_one.py -->
    ```python
    def test_one():
        pass
    ```

    ```console
    $ pytest -q test_one.py
    .                                                                        [100%]
    2 passed in 0.01s
    ```
    """


def test_a_changed_output_fails_with_a_diff(tmp_path: Path) -> None:
    (section,) = [section for section in _doc(DRIFTED).sections if section.runs]
    (failure,) = doctranscripts.run_section(section, tmp_path)
    assert failure.startswith("demo.md:10: `pytest -q test_one.py` printed other output")
    assert "\n-2 passed in 0.01s\n+1 passed in " in failure


def test_a_wrong_exit_code_fails(tmp_path: Path) -> None:
    doc = _doc(
        """\
        ```console
        $ python -c "raise SystemExit(3)"  # exit 2
        ```
        """
    )
    (failure,) = doctranscripts.run_section(doc.sections[0], tmp_path)
    assert failure == (
        'demo.md:2: `python -c "raise SystemExit(3)"  # exit 2` exited 3, the doc says 2'
        " (a non-zero exit is written as a `# exit N` comment at the end of the command)"
    )


def test_files_are_written_and_paths_shown_under_fixed_names(tmp_path: Path) -> None:
    doc = _doc(
        """\
        <!-- file: src/where.py -->
        ```python
        import os, sys, tempfile
        print(os.getcwd(), os.environ["HOME"], tempfile.gettempdir())
        print(sys.executable)
        ```

        ```console
        $ python src/where.py
        /path/to/project /home/user /tmp
        /path/to/venv/bin/python
        ```
        """
    )
    assert doctranscripts.run_section(doc.sections[0], tmp_path) == []


def test_each_section_runs_in_a_directory_of_its_own(tmp_path: Path) -> None:
    doc = _doc(
        """\
        # One

        <!-- file: a.txt -->
        ```text
        a
        ```

        ```console
        $ ls
        a.txt
        ```

        ## Two

        ```console
        $ ls
        ```
        """
    )
    assert [section.slug for section in doc.sections] == ["top", "one", "two"]
    assert doctranscripts.run_section(doc.sections[1], tmp_path / "one") == []
    assert doctranscripts.run_section(doc.sections[2], tmp_path / "two") == []


def test_other_plugins_stay_out_unless_a_transcript_names_them(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    doc = _doc(
        """\
        <!-- file: test_one.py -->
        ```python
        def test_one():
            pass
        ```

        <!-- plugins: xdist -->
        ```console
        $ pytest -p no:isolation -n 1 -q
        ...
        1 passed in 0.50s
        ```

        ```console
        $ pytest -p no:isolation -n 1 -q  # exit 4
        ERROR: usage: pytest [options] [file_or_dir] [file_or_dir] [...]
        pytest: error: unrecognized arguments: -n...
        ...
        ```
        """
    )
    assert doctranscripts.run_section(doc.sections[0], tmp_path) == []


@pytest.mark.parametrize(
    ("expected", "actual", "fits"),
    [
        (["a", "...", "d"], ["a", "b", "c", "d"], True),
        (["a", "...", "b"], ["a", "b"], True),
        (["a", "...", "d"], ["a", "b", "c"], False),
        (["FAILED t.py::x..."], ["FAILED t.py::x - boom"], True),
        (["FAILED t.py::x..."], ["FAILED t.py::x"], True),
        (["FAILED t.py::x...", "2 failed"], ["FAILED t.py::x", "1 failed"], False),
        (["a", "b"], ["a", "b", "c"], False),
    ],
)
def test_ellipsis_stands_for_any_lines_or_any_text(
    expected: list[str], actual: list[str], fits: bool
) -> None:
    assert doctranscripts.matches(expected, actual) is fits


def test_the_diff_folds_what_an_ellipsis_stands_for_and_shows_the_run_as_printed() -> None:
    expected = doctranscripts.Output.of(
        "start\n...\nisolation: the child was killed\n=== 1 failed in 0.01s ===\nend"
    )
    actual = doctranscripts.Output.of(
        "start\nx\ny\nisolation: the child was stopped\n"
        "=============== 1 failed in 0.35s ===============\nend\n"
    )
    assert doctranscripts.diff(expected, actual).splitlines() == [
        "--- doc",
        "+++ run",
        "@@ -1,5 +1,5 @@",
        " start",
        " ...",
        "-isolation: the child was killed",
        "+isolation: the child was stopped",
        " === 1 failed in 0.01s ===",
        " end",
    ]


def test_what_varies_between_runs_is_normalised() -> None:
    run = doctranscripts.normalise(
        "platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0\n"
        "plugins: isolation-0.1.0.dev0, xdist-3.8.0\n"
        "========================= 1 failed, 1 passed in 10.07s =========================\n"
        "<MagicMock id='140230824768464'> at 0x7f3a2c1b0e80, child 4242  \n\n"
    )
    doc = doctranscripts.normalise(
        "platform linux -- Python 3.12.3, pytest-8.0.2, pluggy-1.5.0\n"
        "plugins: isolation-0.1.0, xdist-3.6.1\n"
        "========================== 1 failed, 1 passed in 0.12s ==========================\n"
        "<MagicMock id='1402308'> at 0x..., child 17"
    )
    assert run == doc


def test_blocks_that_neither_run_nor_say_why_not_are_found() -> None:
    doc = _doc(
        """\
        ```text
        some output
        ```

        <!-- not run: needs a GitHub Actions runner -->
        ```console
        $ gh run watch
        ```

        <!-- not run: -->
        ```bash
        pip install x
        ```

        <!-- flie: tests/test_a.py -->
        ```python
        ```
        """
    )
    assert doc.problems == (
        "demo.md:11: the directive 'not run' needs a value",
        "demo.md:16: unknown directive 'flie' (known: ['file', 'not run', 'plugins'])",
    )
    assert [problem.split(":")[1] for problem in doc.unaccounted()] == ["1", "11"]


def test_contributing_says_how_to_build_the_docs() -> None:
    """Issue 49 item 8: the command tox runs, where the HTML lands, and a
    way in from README; ``tox`` builds them too."""
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    command = tox["testenv:docs"]["commands"].strip()
    assert command == "sphinx-build -W --keep-going -b html docs docs/_build/html"
    assert "docs" in tox["tox"]["env_list"].split()
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = contributing[contributing.index("## Build the docs\n") :]
    assert "tox -e docs\n" in section
    assert f".venv-docs/bin/{command}\n" in section
    assert "`docs/_build/html/index.html`" in section
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`tox -e docs` builds them into `docs/_build/html`" in readme
    assert "(CONTRIBUTING.md#build-the-docs)" in readme
