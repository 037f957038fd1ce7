"""The delimiter of one read: fresh for each command, and the output split exactly whatever anyone's text holds."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from betty_jupyter.cluster.delimited import (SHOWN_SEPARATOR, Layout, around_free_text, as_written, delimiter_in,
                                             fresh_delimiter, plain, plain_around, run_read, with_delimiter)
from betty_jupyter.cluster.parsing import SEPARATOR, SQUEUE_FIELDS, format_string, queue_rows
from betty_jupyter.cluster.scripted import Reply, ScriptedTransport


def test_each_command_gets_a_delimiter_of_its_own() -> None:
    delimiters = {fresh_delimiter() for _ in range(1000)}
    assert len(delimiters) == 1000
    assert all(d.startswith(SEPARATOR) and d.endswith(SEPARATOR) and d.count(SEPARATOR) == 2 for d in delimiters)


def test_the_command_carries_the_delimiter_and_reads_back_as_written() -> None:
    argv = ["sacct", f"--delimiter={SEPARATOR}", "--format", "JobID,JobName", "--jobs", "1"]
    delimiter = fresh_delimiter()
    sent = with_delimiter(argv, delimiter)
    assert sent[1] == f"--delimiter={delimiter}" and delimiter_in(sent) == delimiter
    assert as_written(sent) == tuple(argv) and delimiter_in(argv) is None


text_with_separators = st.text(alphabet=st.sampled_from(["a", "|", "\n", SEPARATOR, " ", "é"]), max_size=30)


@given(st.lists(st.lists(text_with_separators, min_size=3, max_size=3), min_size=1, max_size=5))
def test_any_text_in_any_field_splits_exactly(rows: list[list[str]]) -> None:
    delimiter = fresh_delimiter()
    printed = "".join(delimiter.join(row) + "\n" for row in rows)
    joined = plain(printed, delimiter)
    assert joined.count(SEPARATOR) == 2 * len(rows)  # exactly the delimiters, whatever the fields held
    assert joined == "".join(SEPARATOR.join(f.replace(SEPARATOR, SHOWN_SEPARATOR) for f in row) + "\n"
                             for row in rows)


def test_a_read_without_the_separator_runs_as_given() -> None:
    cluster = ScriptedTransport().on("id", stdout="me\n")
    result = asyncio.run(run_read(cluster, ["id", "-un"], 5))
    assert result.stdout == "me\n" and cluster.calls == [("id", "-un")]


def test_a_queue_read_through_the_transport_has_its_rows_whole() -> None:
    row = ["42", "42", "N/A", "train", "me", "lab", "cpu", "PENDING", "None", "0:00", "1:00", "1", "1", "1G",
           "N/A", "", "2026-11-25T01:00:00", "N/A", ""]
    seen: list[tuple[str, ...]] = []

    def answer(argv: tuple[str, ...]) -> Reply:
        seen.append(argv)
        return Reply(SEPARATOR.join(row) + "\n")

    cluster = ScriptedTransport(answer)
    argv = ["squeue", "--noheader", "--format", format_string(SQUEUE_FIELDS)]
    result = asyncio.run(run_read(cluster, argv, 5))
    assert result.argv == tuple(argv) and seen == [tuple(argv)]  # kept as written, delimiter and all
    assert queue_rows(result.stdout)[0]["name"] == "train"


def test_a_queue_format_has_the_delimiter_only_around_what_anyone_writes() -> None:
    delimiter = fresh_delimiter()
    around = around_free_text(format_string(SQUEUE_FIELDS), delimiter)
    assert around is not None
    fields, layout = around
    assert fields.startswith(f"%i{SEPARATOR}%F{SEPARATOR}%K{delimiter}%j{delimiter}%u{SEPARATOR}%a")
    assert fields.endswith(f"%S{delimiter}%k{delimiter}") and fields.count(delimiter) == 4
    assert (layout.free, layout.last_free) == (2, True)
    assert as_written(["squeue", "--format", fields]) == ("squeue", "--format", format_string(SQUEUE_FIELDS))
    assert around_free_text(f"%j{SEPARATOR}%i", delimiter) is None  # anyone's text first: not read back exactly
    assert around_free_text(f"%i{SEPARATOR}%j{SEPARATOR}%k", delimiter) is None  # two side by side
    # nothing anyone writes: no delimiter at all, and the output is read as it comes
    assert around_free_text(f"%i{SEPARATOR}%T", delimiter) == (f"%i{SEPARATOR}%T", Layout(0, False))


@given(st.lists(st.tuples(text_with_separators, text_with_separators), min_size=0, max_size=5),
       st.sampled_from([f"%i{SEPARATOR}%j{SEPARATOR}%u{SEPARATOR}%k", f"%i{SEPARATOR}%j{SEPARATOR}%u"]))
def test_anyones_text_between_slurms_fields_splits_exactly(rows: list[tuple[str, str]], fields: str) -> None:
    delimiter = fresh_delimiter()
    around = around_free_text(fields, delimiter)
    assert around is not None
    layout = around[1]
    with_comment = layout.last_free
    printed = "".join(f"7{SEPARATOR}1{delimiter}{name}{delimiter}me" + (f"{delimiter}{comment}{delimiter}" if
                      with_comment else "") + "\n" for name, comment in rows)
    expected = "".join(SEPARATOR.join(["7", "1", name.replace(SEPARATOR, SHOWN_SEPARATOR), "me"] + (
        [comment.replace(SEPARATOR, SHOWN_SEPARATOR)] if with_comment else [])) + "\n" for name, comment in rows)
    assert plain_around(printed, delimiter, layout) == expected
