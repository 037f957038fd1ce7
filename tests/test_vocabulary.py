"""Betty's shared words: one spelling each, read and written as their text everywhere."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from betty_jupyter.agent import events as ev
from betty_jupyter.agent.vocabulary import (APPROVING, MODES, PERSON_ANSWERS, RESOLUTIONS, Decision, DoneReason,
                                            EventType, Mode)


@pytest.mark.parametrize("word", [*Decision, *Mode, *DoneReason, *EventType])
def test_a_word_equals_prints_and_serialises_as_its_text(word) -> None:
    text = word.value
    assert word == text and str(word) == text and f"{word}" == text and f"{word:>20}" == f"{text:>20}"
    assert repr(word) == repr(text) and repr([word]) == repr([text])
    assert json.dumps(word) == json.dumps(text)
    assert {text: 1}[word] == 1 and word in {text} and type(word)(text) is word


def test_only_approving_answers_and_auto_let_a_call_run() -> None:
    assert {d for d in Decision if d.ran} == {Decision.AUTO, *APPROVING}
    assert {d for d in Decision if d.answered_by_person} == {"approved", "approved_for_session", "edited", "denied"}
    assert set(PERSON_ANSWERS) < set(RESOLUTIONS) < set(Decision)
    assert MODES == ("off", "propose", "confirm", "auto")


def test_the_event_types_are_the_protocol_in_order() -> None:
    assert ev.EVENT_TYPES == tuple(EventType) and list(ev.PAYLOADS) == list(EventType)


def test_the_wire_reads_the_words_and_refuses_others() -> None:
    done = ev.parse_event({"type": "done", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"reason": "breaker"}})
    assert done.payload.reason is DoneReason.BREAKER  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="reason"):
        ev.parse_event({"type": "done", "session_id": "s", "seq": 1, "ts": 1.0, "payload": {"reason": "tired"}})
    with pytest.raises(ValueError, match="decision"):  # a card never ends as "auto"
        ev.ApprovalResolved(approval_id="a", call_id="c", decision="auto")  # type: ignore[arg-type]
    result = ev.ToolResultInfo(call_id="c", tool="t", ok=True, decision="auto", summary="", duration_ms=1)
    assert result.model_dump(mode="json")["decision"] == "auto" and result.decision is Decision.AUTO


def test_the_vocabulary_imports_only_the_standard_library() -> None:
    code = ("import sys; before = set(sys.modules); import betty_jupyter.agent.vocabulary; "
            "print(sorted(m for m in set(sys.modules) - before "
            "if m.split('.')[0] not in sys.stdlib_module_names and not m.startswith('betty_jupyter')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
