"""The seed systems' retry spellings, each mapped to one Retry; bad ones named at once."""

from __future__ import annotations

from typing import Any

import pytest

import cairn
from cairn.authoring import options, registry
from cairn.authoring import step as step_module
from cairn.authoring.retry import next_delay


def policy(**kwargs: Any) -> tuple[Any, Any]:
    kwargs.setdefault("retries", None)
    kwargs.setdefault("timeout", None)
    return options.resolve("step 'x'", **kwargs)


def delays(retry: cairn.Retry) -> list[float | None]:
    flat = cairn.Retry(
        max_attempts=retry.max_attempts,
        delay=retry.delay,
        backoff=retry.backoff,
        max_delay=retry.max_delay,
        jitter=0,
    )
    return [next_delay(flat, n) for n in range(1, retry.max_attempts + 1)]


def test_options__dbos_words() -> None:
    retry, timeout = policy(
        options={"max_attempts": 4, "interval_seconds": 1.5, "backoff_rate": 3.0}
    )
    assert (retry.max_attempts, retry.delay_seconds, retry.backoff) == (4, 1.5, 3.0)
    assert delays(retry) == [1.5, 4.5, 13.5, None]
    assert timeout is None


def test_options__retries_allowed() -> None:
    retry, _ = policy(options={"retries_allowed": True})
    assert retry.max_attempts == 3  # DBOS's default
    retry, _ = policy(options={"retries_allowed": False})
    assert retry.max_attempts == 1


def test_options__num_retries_counts_after_the_first_attempt() -> None:
    retry, _ = policy(options={"num_retries": 3})
    assert retry.max_attempts == 4


def test_options__timeout_alone_keeps_the_default_policy() -> None:
    assert policy(options={"timeout": "30s"}) == (None, "30s")
    assert policy(options={"timeout": 5}, retries=2) == (2, 5)


def test_options__long_interval_is_not_capped_by_cairns_default() -> None:
    retry, _ = policy(options={"max_attempts": 3, "interval_seconds": 120, "backoff_rate": 2})
    assert delays(retry) == [120, 240, None]


def test_pyworkflow__max_retries_and_retry_delay() -> None:
    retry, _ = policy(max_retries=5, retry_delay="exponential")
    assert retry.max_attempts == 6
    assert delays(retry)[:4] == [1, 2, 4, 8]
    retry, _ = policy(max_retries=3, retry_delay="30s")
    assert delays(retry) == [30, 30, 30, None]
    retry, _ = policy(max_retries=2, retry_delay="fixed")
    assert delays(retry) == [1, 1, None]
    retry, _ = policy(retry_delay="2 minutes")
    assert retry.max_attempts == 4 and delays(retry)[0] == 120


def test_cloudflare_config() -> None:
    retry, timeout = options.from_cloudflare(
        "step 'x'",
        {
            "retries": {"limit": 5, "delay": "1 second", "backoff": "exponential"},
            "timeout": "15 minutes",
        },
    )
    assert retry is not None
    assert retry.max_attempts == 6 and delays(retry)[:3] == [1, 2, 4]
    assert timeout == 900
    retry, _ = options.from_cloudflare("step 'x'", {"retries": {"limit": 2, "delay": 10}})
    assert retry is not None and retry.max_attempts == 3 and retry.delay_seconds == 10
    retry, _ = options.from_cloudflare(
        "step 'x'", {"retries": {"limit": 3, "delay": "5 seconds", "backoff": "constant"}}
    )
    assert retry is not None and delays(retry) == [5, 5, 5, None]
    assert options.from_cloudflare("step 'x'", None) == (None, None)
    assert options.from_cloudflare("step 'x'", {"timeout": 30}) == (None, 30)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"options": {"max_attempt": 3}},
            "step 'x': unknown key 'max_attempt' in options (known: backoff_rate, "
            "interval_seconds, max_attempts, num_retries, retries_allowed, timeout)",
        ),
        (
            {"options": {"max_attempts": 3}, "retries": 2},
            "step 'x': retries= and options=",
        ),
        (
            {"options": {"max_attempts": 3}, "max_retries": 2},
            "both set its retries; use one",
        ),
        ({"retries": 3, "max_retries": 2}, "step 'x': retries= and max_retries=/retry_delay="),
        (
            {"options": {"timeout": 3}, "timeout": "1s"},
            "timeout= and options['timeout'] both set its timeout",
        ),
        (
            {"options": {"max_attempts": 3, "num_retries": 2}},
            "'max_attempts' and 'num_retries' both count its attempts",
        ),
        (
            {"options": {"retries_allowed": False, "max_attempts": 5}},
            "retries_allowed'] is False but the options ask for 5 attempts",
        ),
        ({"options": {"retries_allowed": "yes"}}, "must be True or False"),
        ({"options": {"max_attempts": 0}}, "options['max_attempts'] must be a whole number >= 1"),
        ({"options": {"num_retries": -1}}, "options['num_retries'] must be a whole number >= 0"),
        ({"options": {"backoff_rate": 0.5}}, "options['backoff_rate'] must be a number >= 1"),
        ({"options": {"interval_seconds": "soon"}}, "options['interval_seconds'] of step 'x'"),
        ({"retry_delay": "linear"}, "retry_delay 'linear' is not supported; use \"fixed\""),
        ({"retry_delay": [5, 30, 300]}, "retry_delay as a list of waits is not supported"),
        ({"max_retries": -1}, "max_retries must be a whole number >= 0"),
    ],
)
def test_bad_spellings__value_error_naming_them(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        policy(**kwargs)
    assert message in str(info.value)


def test_bad_options_type() -> None:
    with pytest.raises(TypeError, match="step 'x': options must be a dict, got 3"):
        policy(options=3)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"retry": {"limit": 3}},
            "step 'x': unknown key 'retry' in config (known: retries, timeout)",
        ),
        (
            {"retries": {"limit": 3, "factor": 2}},
            "unknown key 'factor' in config['retries'] (known: backoff, delay, limit)",
        ),
        (
            {"retries": {"limit": 3, "delay": "1s", "backoff": "linear"}},
            "config['retries']['backoff'] 'linear' is not supported (use \"constant\" or "
            '"exponential"',
        ),
        ({"retries": {"limit": float("inf")}}, "['limit'] must be a whole number >= 0"),
        ({"retries": {"limit": 3, "delay": "1 month"}}, "vary in length"),
    ],
)
def test_cloudflare_config__bad(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        options.from_cloudflare("step 'x'", config)
    assert message in str(info.value)


def test_step_decorator__takes_each_spelling() -> None:
    @cairn.step(
        name="unit.seed.dbos",
        options={"max_attempts": 3, "interval_seconds": 1.0, "backoff_rate": 2.0},
    )
    def dbos_step() -> None: ...

    @cairn.step(name="unit.seed.pyworkflow", max_retries=5, retry_delay="exponential")
    def pyworkflow_step() -> None: ...

    @cairn.step(name="unit.seed.timeout", options={"timeout": "15 minutes"})
    def timed_step() -> None: ...

    assert dbos_step.retry.max_attempts == 3
    assert pyworkflow_step.retry.max_attempts == 6
    assert timed_step.timeout == 900 and timed_step.retry == cairn.Retry()


def test_step_decorator__bad_spelling_fails_at_decoration() -> None:
    with pytest.raises(ValueError, match=r"step 'unit.seed.bad': retry_delay 'linear'"):

        @cairn.step(name="unit.seed.bad", retry_delay="linear")
        def bad() -> None: ...

    with pytest.raises(ValueError, match="unknown key 'retries' in options"):

        @cairn.step(options={"retries": 3})
        def bad_too() -> None: ...


def test_step_decorator__dbos_keywords_name_the_options_spelling() -> None:
    with pytest.raises(TypeError) as info:
        cairn.step(retries_allowed=True, max_attempts=3)  # type: ignore[call-overload]
    assert str(info.value) == (
        "@cairn.step() got unexpected keyword argument(s): max_attempts, retries_allowed; "
        "DBOS's step options go in options=: "
        "@cairn.step(options={'max_attempts': 3, 'retries_allowed': True})"
    )
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\): colour \(it takes"):
        cairn.step(colour="red")  # type: ignore[call-overload]


KNOWN = "name, retries, timeout, keep_input, options, max_retries, retry_delay, queue, isolation"


def test_step_options__one_table_for_the_decorator_and_the_class() -> None:
    assert ", ".join(step_module.OPTIONS) == KNOWN
    with pytest.raises(TypeError, match=f"it takes {KNOWN.rsplit(', ', 1)[0]} and isolation"):
        cairn.step(colour="red")  # type: ignore[call-overload]


def test_class_step__every_option_is_a_class_attribute() -> None:
    class Charge(cairn.Step):
        name = "unit.class.charge"
        max_retries = 2
        retry_delay = "30s"
        timeout = "1 minute"
        keep_input = False
        queue = "pay"

        async def execute(self, order: str) -> str:
            return order

    class Dbos(cairn.Step):
        options = {"max_attempts": 4, "timeout": 5}

        def execute(self) -> None: ...

    class Plain(cairn.Step):
        retries = cairn.Retry(max_attempts=7)

        def execute(self) -> None: ...

    charge = Charge()
    assert (charge.name, charge.retry.max_attempts, charge.retry.delay_seconds) == (
        "unit.class.charge",
        3,
        30.0,
    )
    assert (charge.timeout, charge.keep_input, charge.queue) == (60.0, False, "pay")
    # On a step queue: registered once the class is defined, for the queue's workers.
    assert registry.default_registry.steps["unit.class.charge"].fn.__qualname__ == (
        Charge.execute.__qualname__
    )
    assert (Dbos().retry.max_attempts, Dbos().timeout) == (4, 5.0)
    assert Plain().retry.max_attempts == 7
    # Arguments win over the class's attributes.
    assert Charge(max_retries=0, queue="cards").retry.max_attempts == 1
    assert Charge(retries=4).retry.max_attempts == 4


@pytest.mark.parametrize(
    ("attribute", "hint"),
    [
        ("max_retry", "did you mean 'max_retries'?"),
        ("time_out", "did you mean 'timeout'?"),
        ("MAX_RETRIES", "did you mean 'max_retries'?"),
        ("max_attempts", "DBOS's words go in options = {'max_attempts': ...}"),
        ("backoff", "a retry policy's backoff goes in retries = cairn.Retry(backoff=...)"),
    ],
)
def test_class_step__an_attribute_like_an_option_is_refused_at_definition(
    attribute: str, hint: str
) -> None:
    with pytest.raises(TypeError) as info:
        type("Fetch", (cairn.Step,), {attribute: 5, "execute": lambda self: None})
    assert str(info.value) == (
        f"class-based step Fetch: class attribute {attribute!r} is not a step option "
        f"({hint}); the options a class sets are: {KNOWN}"
    )


def test_class_step__bad_option_values_fail_at_definition() -> None:
    with pytest.raises(ValueError, match="step 'Fetch': max_retries must be a whole number"):

        class Fetch(cairn.Step):
            max_retries = "five"

            def execute(self) -> None: ...

    with pytest.raises(ValueError, match="retries= and max_retries=/retry_delay= both"):

        class Base(cairn.Step):  # a base class without execute is checked too
            retries = 2
            max_retries = 3


def test_class_step__its_own_attributes_and_methods_are_left_alone() -> None:
    class Fetch(cairn.Step):
        BASE_URL = "https://example.com"
        _cache: dict[str, str] = {}

        def headers(self) -> dict[str, str]:
            return {}

        def execute(self) -> str:
            return self.BASE_URL

    assert Fetch().execute() == "https://example.com"
