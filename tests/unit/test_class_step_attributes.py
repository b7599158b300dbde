"""Which class attributes of a class-based step are taken for misspelled options.

A typo of an option (`max_retry`, `time_out`, `retry_dealy`) is refused at definition,
as the decorator refuses an unknown keyword; a word of the class's own that merely
looks like one (`entries`, `names`, `queue_url`) is the class's business.
"""

from __future__ import annotations

import pytest

import cairn


def define(attribute: str) -> type:
    return type("Fetch", (cairn.Step,), {attribute: 5, "execute": lambda self: None})


@pytest.mark.parametrize(
    ("attribute", "meant"),
    [
        ("max_retry", "max_retries"),
        ("time_out", "timeout"),
        ("retry_dealy", "retry_delay"),
        ("retry_delya", "retry_delay"),
        ("MAX_RETRIES", "max_retries"),
        ("retires", "retries"),
        ("retry", "retries"),
        ("timout", "timeout"),
        ("option", "options"),
        ("isolaton", "isolation"),
        ("keepinput", "keep_input"),
        ("queu", "queue"),
        ("nmae", "name"),
    ],
)
def test_class_step__a_typo_of_an_option_is_refused(attribute: str, meant: str) -> None:
    with pytest.raises(
        TypeError,
        match=f"class attribute {attribute!r} is not a step option \\(did you mean {meant!r}\\?\\)",
    ):
        define(attribute)


@pytest.mark.parametrize(
    "attribute",
    [
        "entries",
        "names",
        "queues",
        "queue_url",
        "queue_name",
        "timeouts",
        "retry_delays",
        "game",
        "query",
        "isolated",
        "endpoint",
        "records",
        "delays",
    ],
)
def test_class_step__its_own_words_near_an_option_are_left_alone(attribute: str) -> None:
    kind = define(attribute)
    assert getattr(kind, attribute) == 5
    assert kind().name == "Fetch"
