"""The OpenAPI document is the truth: a real server on SQLite answers only what it says.

Schemathesis generates requests from `/openapi.json` (valid ones and invalid ones) and
checks every answer: no 5xx, only documented statuses, JSON where JSON is documented,
bodies that fit their schemas. It is bounded (a few examples per operation, a fixed
seed) to stay well under a minute. The tests after it pin what it found, one by one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import cairn
from cairn.authoring.step import make_step
from cairn.authoring.workflow import make_workflow

from .server import Server, start_server

EXAMPLES = 6  # per operation and generation mode
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


STREAMED = "r-streamed"
"""A completed run whose stream "tokens" is closed: the fuzzed stream requests read it."""


async def _stream_a_run(url: str) -> None:
    """Complete run STREAMED, which streams three chunks to "tokens" and closes it."""
    registry = cairn.Registry()

    async def speak() -> None:
        stream = cairn.stream("tokens")
        for word in ("a", "b", "c"):
            await stream.write(word)
        await stream.close()

    step = make_step(speak, "speak", None, None, registry)

    async def spoken() -> None:
        await step()

    flow = make_workflow(spoken, name="api.streamed", reg=registry)
    async with cairn.Engine(url, registry=registry, poll_interval=0.05) as engine:
        run = await engine.start(flow, run_id=STREAMED)
        await run.result(timeout=30)


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A `cairn dashboard` process on a fresh SQLite database, with two runs in it: r1
    (pending: nobody executes it) and STREAMED (completed, with a closed stream)."""
    where: Path = tmp_path_factory.mktemp("openapi")
    url = f"sqlite:///{where / 'api.db'}"
    asyncio.run(_stream_a_run(url))
    server = start_server(url, where)
    try:
        started = httpx.post(
            f"{server.api}/runs",
            json={"workflow": "api.known", "run_id": "r1", "allow_unknown": True},
        )
        assert started.status_code == 201, started.text
        yield server
    finally:
        server.stop()


def _failures(api: str, operation: Any, mode: GenerationMode) -> list[str]:
    """What the checks found for one operation in one mode (nothing: an empty list)."""
    found: dict[tuple[str, ...], str] = {}  # the first case of each kind of failure

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,  # the same requests every run
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Any) -> None:
        if operation.path.endswith("/streams/{name}") and mode is GenerationMode.POSITIVE:
            # A stream answers until it ends: fuzz the closed one (any name of that run
            # ends at once too, the run having finished), not r1's, open for LIFETIME.
            case.path_parameters = {**case.path_parameters, "run_id": STREAMED}
        try:
            case.call_and_validate(base_url=api, checks=CHECKS, timeout=10)
        except BaseExceptionGroup as group:  # schemathesis's FailureGroup: report, go on
            kinds = tuple(sorted(type(failure).__name__ for failure in group.exceptions))
            found.setdefault(kinds, f"{operation.label} ({mode.value}): {group}")

    try:
        check()
    except Unsatisfiable:  # nothing it takes can be made invalid (`GET /queues`)
        assert mode is GenerationMode.NEGATIVE, operation.label
    return list(found.values())


def test_api__every_answer_is_what_the_openapi_document_says(sqlite_server: Server) -> None:
    schema = schemathesis.openapi.from_url(f"{sqlite_server.api}/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failures += _failures(sqlite_server.api, operation, mode)
    assert not failures, "\n\n".join(failures)


@pytest.fixture(scope="module")
def spec(sqlite_server: Server) -> dict[str, Any]:
    found: dict[str, Any] = httpx.get(f"{sqlite_server.api}/openapi.json").json()
    return found


def test_stream__its_answers_are_the_documented_ones(
    sqlite_server: Server, spec: dict[str, Any]
) -> None:
    documented = spec["paths"]["/runs/{run_id}/streams/{name}"]["get"]["responses"]
    assert list(documented["200"]["content"]) == ["text/event-stream"]
    missing = httpx.get(f"{sqlite_server.api}/runs/nope/streams/tokens")
    assert missing.status_code == 404 and "404" in documented
    assert missing.headers["content-type"] == "application/json"
    bad = httpx.get(f"{sqlite_server.api}/runs/r1/streams/tokens?after=-1")
    assert bad.status_code == 400 and "400" in documented
    # A closed stream's answer ends (the fuzzing above reads it too): its events, then end.
    closed = httpx.get(f"{sqlite_server.api}/runs/{STREAMED}/streams/tokens", timeout=10)
    assert closed.status_code == 200
    assert re.findall(r"event: (\w+)\ndata: (.*)\n", closed.text) == [
        ("chunk", '"a"'),
        ("chunk", '"b"'),
        ("chunk", '"c"'),
        ("end", "{}"),
    ]
    event = documented["200"]["content"]["text/event-stream"]["schema"]
    assert event["properties"]["event"]["enum"] == ["chunk", "reset", "end"]


def test_post_runs__an_existing_run_id_is_a_documented_200(
    sqlite_server: Server, spec: dict[str, Any]
) -> None:
    again = {"workflow": "api.known", "run_id": "r1", "allow_unknown": True}
    response = httpx.post(f"{sqlite_server.api}/runs", json=again)
    assert response.status_code == 200, response.text
    assert response.json()["run_id"] == "r1"
    assert "200" in spec["paths"]["/runs"]["post"]["responses"]


def _documented(spec: dict[str, Any], path: str) -> set[str]:
    """The methods the document gives `path`: its own, else those of every template it
    fits (each parameter one segment), as OpenAPI matches paths."""
    if path in spec["paths"]:
        return {method.upper() for method in spec["paths"][path]}
    methods: set[str] = set()
    for template, operations in spec["paths"].items():
        pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            methods |= {method.upper() for method in operations}
    return methods


def test_405__allow_lists_what_the_document_gives_that_path(
    sqlite_server: Server, spec: dict[str, Any]
) -> None:
    for template in spec["paths"]:
        path = re.sub(r"\{\w+\}", "x", template)
        response = httpx.request("DELETE", f"{sqlite_server.api}{path}")
        assert response.status_code == 405, (path, response.text)
        assert response.json()["error"] == "MethodNotAllowed"
        allowed = {method.strip() for method in response.headers.get("allow", "").split(",")}
        documented = _documented(spec, path)
        assert allowed - {"HEAD"} == documented, (path, response.headers.get("allow"))


@pytest.mark.parametrize("path", ["/nowhere", "/runs/a%0Ab", "/schedules/a%0Ab/pause"])
def test_404__every_answer_under_the_api_is_json(sqlite_server: Server, path: str) -> None:
    response = httpx.request(
        "POST" if path.endswith("pause") else "GET", f"{sqlite_server.api}{path}"
    )
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] in ("NotFound", "RunNotFound", "ScheduleNotFound")


def test_paths__a_name_with_a_line_break_reaches_its_operation(sqlite_server: Server) -> None:
    # A name may hold one (cairn.names); the mount's pattern once stopped there: 404.
    response = httpx.post(f"{sqlite_server.api}/queues/a%0Ab", json={"concurrency": 2})
    assert response.status_code == 200, response.text
    assert response.json()["name"] == "a\nb"
    missing = httpx.get(f"{sqlite_server.api}/runs/a%0Ab/history")
    assert (missing.status_code, missing.json()["error"]) == (404, "RunNotFound")


def _parameter(spec: dict[str, Any], method: str, template: str, name: str) -> Any:
    operation = spec["paths"][template][method]
    return next(p["schema"] for p in operation["parameters"] if p["name"] == name)


def _property(spec: dict[str, Any], method: str, template: str, name: str) -> Any:
    body = spec["paths"][template][method]["requestBody"]["content"]["application/json"]
    return body["schema"]["properties"][name]


LARGEST = 2**31 - 1  # a queue limit or a run's priority: a 32-bit column of the store


@pytest.mark.parametrize(
    ("method", "template", "name", "low", "high"),
    [
        ("get", "/runs", "limit", 1, 1000),
        ("get", "/runs/{run_id}/history", "limit", 1, 1000),
        ("get", "/runs/{run_id}/history", "after", 0, 2**62),
    ],
)
def test_limits__of_query_parameters_are_in_the_document_and_enforced(
    sqlite_server: Server,
    spec: dict[str, Any],
    method: str,
    template: str,
    name: str,
    low: int,
    high: int,
) -> None:
    schema = _parameter(spec, method, template, name)
    assert (schema["minimum"], schema["maximum"]) == (low, high)
    url = sqlite_server.api + template.replace("{run_id}", "r1")
    for inside in (low, high):
        assert httpx.get(url, params={name: inside}).status_code == 200
    for outside in (low - 1, high + 1):
        assert httpx.get(url, params={name: outside}).status_code == 400


@pytest.mark.parametrize(
    ("template", "name", "low", "high", "body"),
    [
        ("/queues/{name}", "concurrency", 1, LARGEST, {}),
        ("/queues/{name}", "per_worker", 1, LARGEST, {}),
        ("/queues/{name}", "partition_concurrency", 1, LARGEST, {}),
        ("/runs", "priority", -LARGEST - 1, LARGEST, {"workflow": "w", "allow_unknown": True}),
    ],
)
def test_limits__of_body_fields_are_in_the_document_and_enforced(
    sqlite_server: Server,
    spec: dict[str, Any],
    template: str,
    name: str,
    low: int,
    high: int,
    body: dict[str, Any],
) -> None:
    schema = _property(spec, "post", template, name)
    assert (schema["minimum"], schema["maximum"]) == (low, high)
    url = sqlite_server.api + template.replace("{name}", "q")
    for inside in (low, high):
        assert httpx.post(url, json={**body, name: inside}).status_code < 300
    for outside in (low - 1, high + 1, 2**80):
        response = httpx.post(url, json={**body, name: outside})
        assert response.status_code in (400, 422), (outside, response.text)


@pytest.mark.parametrize(
    ("method", "template", "name"),
    [
        ("get", "/runs/{run_id}", "run_id"),
        ("post", "/runs/{run_id}/events/{name}", "name"),
        ("post", "/queues/{name}", "name"),
        ("get", "/runs", "run_id_prefix"),
    ],
)
def test_limits__names_are_255_characters_at_most_in_the_document_and_enforced(
    sqlite_server: Server, spec: dict[str, Any], method: str, template: str, name: str
) -> None:
    schema = _parameter(spec, method, template, name)
    assert (schema["minLength"], schema["maxLength"]) == (1, 255)
    long = "n" * 256
    if template == "/runs":
        response = httpx.get(f"{sqlite_server.api}/runs", params={name: long})
        assert response.status_code == 422, response.text
        return
    path = template.replace("{run_id}", long if name == "run_id" else "r1")
    path = path.replace("{name}", long)
    response = httpx.request(method, sqlite_server.api + path, json={})
    # No run has such an id (404); an event cannot have such a name (422).
    assert response.status_code == (404 if name == "run_id" else 422), response.text
    assert str(response.status_code) in spec["paths"][template][method]["responses"]


def _body_schema(spec: dict[str, Any], template: str) -> Any:
    return spec["paths"][template]["post"]["requestBody"]["content"]["application/json"]["schema"]


@pytest.mark.parametrize(
    ("template", "body"),
    [
        ("/runs/cancel", {"ids": ["a"], "filter": {"status": "FAILED"}}),
        ("/runs/cancel", {"ids": ["a"], "limit": 5}),
        ("/runs/retry", {"ids": ["a"], "filter": {"status": "FAILED"}}),
        ("/runs", {"workflow": "w", "delay": 5, "run_at": "2030-01-01T00:00:00Z"}),
    ],
)
def test_bodies__the_document_refuses_what_the_server_refuses(
    sqlite_server: Server, spec: dict[str, Any], template: str, body: dict[str, Any]
) -> None:
    response = httpx.post(f"{sqlite_server.api}{template}", json={**body, "allow_unknown": True})
    assert response.status_code in (400, 422), response.text
    schema = _body_schema(spec, template)
    assert not jsonschema.Draft202012Validator(schema).is_valid(body)


def test_bodies__an_integral_number_is_an_integer_as_json_schema_says(
    sqlite_server: Server,
) -> None:
    response = httpx.post(f"{sqlite_server.api}/queues/q", json={"concurrency": 3.0})
    assert response.status_code == 200, response.text
    assert response.json()["concurrency"] == 3
