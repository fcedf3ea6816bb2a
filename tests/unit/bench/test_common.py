"""bench.common's tables: Markdown for the docs and the results files, rich on a terminal."""

from __future__ import annotations

import io

import pytest

pytestmark = pytest.mark.unit

HEADERS, ROWS = ["kill", "restart -> first output s", "note"], [[1, 2.934, None], [2, 12_345.6, "[red]x[/red]"]]


def test_the_markdown_table_is_the_one_the_docs_hold():
    from bench.common import table

    assert table(HEADERS, ROWS) == (
        "| kill | restart -> first output s |         note |\n"
        "|-----:|--------------------------:|-------------:|\n"
        "|    1 |                      2.93 |            - |\n"
        "|    2 |                    12,346 | [red]x[/red] |")  # fmt: skip


def test_a_terminal_gets_a_rich_table_of_the_same_cells_and_a_pipe_the_markdown():
    from rich.console import Console

    from bench.common import print_table, rich_table, table

    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system=None, width=120).print(rich_table(HEADERS, ROWS, "recovery"))
    text = out.getvalue()
    assert "recovery" in text and "│" in text and "2.93" in text and "12,346" in text
    assert "[red]x[/red]" in text  # a cell is text, never markup
    piped = io.StringIO()
    print_table(HEADERS, ROWS, file=piped)
    assert piped.getvalue() == table(HEADERS, ROWS) + "\n"
