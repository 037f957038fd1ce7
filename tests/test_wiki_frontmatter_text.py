"""Frontmatter Betty writes without PyYAML reads back as the same values, through PyYAML too.

The emitter (:mod:`betty_jupyter.wiki.simple_yaml`) writes text, whole numbers, true/false, null and
lists of them; its reader reads only those lines. Both are checked against PyYAML: what is written
must be what ``yaml.safe_load`` reads (dates aside: Betty keeps them as text), and what is read
must be what PyYAML reads, however the block was edited by hand.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from betty_jupyter.wiki import page as page_module, simple_yaml
from betty_jupyter.wiki.page import parse_frontmatter, render_frontmatter

HOSTILE = [
    "", " ", "  lead", "trail ", "a\nb", "a\r\nb", "line\n", "\n", "a: b", "a:", ":", "a:b", "a #b", "#x", "a#b",
    "'", "''", '"', "it's", 'say "hi"', "\\", "\\n", "\\u00e9", "café", "日本 😀", "😀", "\u00a0", "a\tb", "\t",
    "\x00", "\x07", "\x1b[31m", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "a\ufeffb", "\ufffe", "\u200b",
    "-", "- x", "-x", "--- x", "---", "...", "?", "? x", "!", "!x", "!!python/object:os.system", "&a", "*a", "|",
    ">", "%YAML", "@x", "`x", "[a]", "{a: 1}", "a, b", "~", "null", "Null", "NULL", "true", "True", "yes", "no",
    "on", "OFF", "y", "n", "=", "<<", "0", "-0", "012", "0x1F", "0o12", "1_000", "1e3", "1.5", ".5", "-.inf",
    ".NaN", "190:20:30", "2026-11-22", "2026-11-22T10:31", "123", "123_4", "x" * 300, "word " * 80,
    "/path/to/run.sbatch", "notebooks/experiments/a b.ipynb", "COMPLETED", "OUT_OF_MEMORY",
]
"""Texts that break naive YAML: indicators, keywords YAML reads as other types, breaks and escapes."""

DATE_LIKE = {"2026-11-22", "2026-11-22T10:31"}
"""Plain dates ``yaml.safe_load`` makes into dates; Betty writes them plainly and reads them as text."""


def _round_trips(fields: dict[str, Any]) -> None:
    block = render_frontmatter(fields)
    assert block.startswith("---\n") and block.endswith("\n---\n")
    inner = block[4:-4]
    assert parse_frontmatter("p.md", inner) == fields, block
    assert yaml.load(inner, Loader=page_module._Loader) == fields, block  # noqa: S506 - a SafeLoader subclass
    if not any(date in str(fields) for date in DATE_LIKE):
        assert yaml.safe_load(inner) == fields, block


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_text_reads_back_as_written(text: str) -> None:
    _round_trips({"name": "run", "value": text, "tags": [text, "x"]})


def test_numbers_true_false_null_and_lists_read_back_as_written() -> None:
    _round_trips({"n": 0, "m": -12, "big": 10**17, "t": True, "f": False, "none": None, "empty": [],
                  "mixed": [1, "1", None, "null", True, "true"]})


def test_random_texts_read_back_as_written() -> None:
    chance = random.Random(7)
    pieces = [text for text in HOSTILE if len(text) < 20] + list("abc :-#'\"\\\n")
    for _ in range(2000):
        text = "".join(chance.choice(pieces) for _ in range(chance.randint(1, 5)))
        _round_trips({"value": text, "list": [text]})


def test_what_pyyaml_wrote_before_is_written_the_same() -> None:
    fields = {"name": "2026-11-25-lora", "description": "rank sweep: r=8", "type": "experiment", "job_id": "123",
              "cluster": "dev", "partition": None, "submitted": "2026-11-25T01:00:00", "tags": ["lora", "yes"],
              "script": "/s/2026-11-25-lora.sbatch", "status": "COMPLETED", "gpus": 2, "shared": False, "it": "it's"}
    assert simple_yaml.emit(fields, page_module._dump_text) is not None
    assert render_frontmatter(fields) == "---\n" + yaml.dump(
        fields, Dumper=page_module._Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
        width=1000) + "---\n"


@pytest.mark.parametrize("fields", [{"x": 1.5}, {"x": {"a": 1}}, {"x": [[1]]}, {"not a word": 1}, {"on": 1}, {}])
def test_other_values_are_left_to_pyyaml(fields: dict[str, Any]) -> None:
    assert simple_yaml.emit(fields, page_module._dump_text) is None
    _round_trips(fields)


@pytest.mark.parametrize("seed", range(3))
def test_written_blocks_edited_at_random_read_as_pyyaml_reads_them(seed: int) -> None:
    chance = random.Random(seed)
    pieces = list(" \n\t:-'\"\\#[]{}&*!?|>%@~.,0123456789abcnulltrue") + [
        "- ", ": ", "''", "\\u", "\\ud83d\\ude00", "\u00e9", "\x85", "\u2028", "\r\n", "[]", "null", "yes", "'it''s'"]
    for _ in range(1500):
        fields = {"name": chance.choice(HOSTILE), "tags": [chance.choice(HOSTILE)], "n": chance.randint(-5, 5)}
        block = list(render_frontmatter(fields)[4:-4])
        for _ in range(chance.randint(1, 3)):
            at = chance.randint(0, len(block))
            if chance.random() < 0.6 or not block:
                block[at:at] = [chance.choice(pieces)]
            else:
                del block[min(at, len(block) - 1)]
        text = "".join(block)
        try:
            expected: Any = ("value", yaml.load(text, Loader=page_module._Loader))  # noqa: S506
        except Exception as error:  # noqa: BLE001 - any failure of PyYAML's is one for Betty's reader too
            expected = ("error", type(error))
        simple = simple_yaml.read(text) if not page_module._PYYAML_ONLY.search(text) \
            and not page_module._NON_PRINTABLE.search(text) else None
        if simple is not None:
            assert expected == ("value", simple), text
