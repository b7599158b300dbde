"""The human-task inbox and hook calls over HTTP."""

from __future__ import annotations

import pytest

from .flows import start, status, until

JSON = {"Content-Type": "application/json"}

pytestmark = pytest.mark.process


async def open_task(api, run_id: str) -> dict:
    async def found():
        tasks = (await api.get("/tasks", params={"run_id": run_id})).json()["tasks"]
        return tasks[0] if tasks else None

    task: dict = await until(f"a task of run {run_id}", found)
    return task


async def test_tasks__list_show_submit_and_the_run_goes_on(api, workers):
    await start(api, "t.inbox", run_id="i1")
    task = await open_task(api, "i1")
    assert task["title"] == "Review order"
    assert task["data"] == {"order": 7}
    assert task["assignee"] == "ann"
    assert task["status"] == "open"
    assert task["form"]["required"] == ["approved"]

    assert [t["task_id"] for t in (await api.get("/tasks")).json()["tasks"]] == [task["task_id"]]
    assert (await api.get("/tasks", params={"assignee": "bob"})).json()["tasks"] == []
    shown = await api.get(f"/tasks/{task['task_id']}")
    assert shown.status_code == 200
    assert shown.json() == task

    submitted = await api.post(
        f"/tasks/{task['task_id']}/submit",
        json={"values": {"approved": True, "note": "fine"}, "by": "ann"},
    )
    assert submitted.status_code == 200, submitted.text
    assert submitted.json()["status"] == "submitted"
    assert submitted.json()["submitted_by"] == "ann"
    done = await status(api, "i1", "COMPLETED")
    assert done["result"] == {"approved": True, "note": "fine"}

    assert (await api.get("/tasks")).json()["tasks"] == []
    listed = (await api.get("/tasks", params={"status": "submitted"})).json()["tasks"]
    assert [t["task_id"] for t in listed] == [task["task_id"]]
    assert len((await api.get("/tasks", params={"status": "all"})).json()["tasks"]) == 1

    again = await api.post(f"/tasks/{task['task_id']}/submit", json={"values": {"approved": 1}})
    assert again.status_code == 404
    assert again.json()["error"] == "TaskNotFound"
    assert "is not open (it is submitted)" in again.json()["message"]


async def test_tasks__values_that_do_not_fit_the_form_are_422_with_fields(api, workers):
    await start(api, "t.inbox", run_id="i2")
    task = await open_task(api, "i2")
    url = f"/tasks/{task['task_id']}/submit"

    wrong = await api.post(url, json={"values": {"approved": "yes", "note": 3}})
    assert wrong.status_code == 422, wrong.text
    assert wrong.json()["error"] == "InvalidSubmission"
    assert set(wrong.json()["fields"]) == {"approved", "note"}
    assert "'yes' is not of type 'boolean'" in wrong.json()["fields"]["approved"]

    missing = await api.post(url, json={"values": {}})
    assert missing.status_code == 422
    assert missing.json()["fields"] == {"approved": "required"}

    not_object = await api.post(url, json={"values": [1]})
    assert not_object.status_code == 422
    assert not_object.json()["fields"] == {"(form)": "values must be a JSON object"}

    assert (await api.get(f"/tasks/{task['task_id']}")).json()["status"] == "open"
    assert (await api.get("/runs/i2")).json()["status"] == "WAITING"


async def test_tasks__errors(api):
    assert (await api.get("/tasks/nope")).status_code == 404
    assert (await api.get("/tasks/nope")).json()["error"] == "TaskNotFound"
    unknown = await api.post("/tasks/nope/submit", json={"values": {}})
    assert unknown.status_code == 404
    bad_status = await api.get("/tasks", params={"status": "done"})
    assert bad_status.status_code == 400
    assert "unknown task status 'done'" in bad_status.json()["message"]
    no_values = await api.post("/tasks/nope/submit", json={"approved": True})
    assert no_values.status_code == 400
    assert "unknown field 'approved'" in no_values.json()["message"]
    empty_by = await api.post("/tasks/nope/submit", json={"values": {}, "by": " "})
    assert empty_by.status_code == 400


async def test_hooks__called_once_then_404(api, workers, flows):
    await start(api, "t.hooked", run_id="h1")
    await until("a hook token", lambda: _value(flows.tokens))
    token = flows.tokens[0]
    await status(api, "h1", "WAITING")

    response = await api.post(f"/hooks/{token}", json={"paid": 42})
    assert response.status_code == 202, response.text
    assert response.json() == {"accepted": True}
    done = await status(api, "h1", "COMPLETED")
    assert done["result"] == {"paid": 42}

    used = await api.post(f"/hooks/{token}", json={"paid": 43})
    assert used.status_code == 404
    assert used.json() == {
        "error": "HookNotFound",
        "message": "hook token is unknown, already used or expired",
    }
    history = (await api.get("/runs/h1/history")).json()["history"]
    assert token not in str(history)


async def test_hooks__payload_that_does_not_fit_the_schema_is_422_with_fields(api, workers, flows):
    await start(api, "t.checked_hook", run_id="h2")
    await until("a hook token", lambda: _value(flows.tokens))
    token = flows.tokens[0]
    await status(api, "h2", "WAITING")

    wrong = await api.post(f"/hooks/{token}", json={"paid": -1, "ref": 7})
    assert wrong.status_code == 422, wrong.text
    assert wrong.json()["error"] == "InvalidSubmission"
    assert set(wrong.json()["fields"]) == {"paid", "ref"}
    missing = await api.post(f"/hooks/{token}", json={"ref": "r"})
    assert missing.status_code == 422
    assert missing.json()["fields"] == {"paid": "required"}
    whole = await api.post(f"/hooks/{token}", json="paid")
    assert whole.status_code == 422
    assert list(whole.json()["fields"]) == ["(payload)"]
    assert (await api.get("/runs/h2")).json()["status"] == "WAITING"
    history = (await api.get("/runs/h2/history")).json()["history"]
    assert [h["status"] for h in history if h["kind"] == "hook"] == ["waiting"]

    accepted = await api.post(f"/hooks/{token}", json={"paid": 42})  # the hook still works
    assert accepted.status_code == 202, accepted.text
    done = await status(api, "h2", "COMPLETED")
    assert done["result"] == {"paid": 42}
    assert (await api.post(f"/hooks/{token}", json={"paid": -1})).status_code == 404


async def test_hooks__pydantic_schema_checked_by_the_dashboard_and_returned_as_a_model(
    api, workers, flows
):
    await start(api, "t.model_hook", run_id="h3")
    await until("a hook token", lambda: _value(flows.tokens))
    token = flows.tokens[0]
    await status(api, "h3", "WAITING")

    wrong = await api.post(f"/hooks/{token}", json={"paid": "lots"})
    assert wrong.status_code == 422, wrong.text
    assert list(wrong.json()["fields"]) == ["paid"]
    accepted = await api.post(f"/hooks/{token}", json={"paid": 9, "ref": "r-9"})
    assert accepted.status_code == 202, accepted.text
    done = await status(api, "h3", "COMPLETED")
    assert done["result"] == {"model": "Payment", "paid": 9}


async def test_hooks__unknown_token_404_and_bad_json_400(api):
    assert (await api.post("/hooks/not-a-token", json=1)).status_code == 404
    bad = await api.post("/hooks/not-a-token", content=b"{oops", headers=JSON)
    assert bad.status_code == 400
    assert bad.json()["error"] == "BadRequest"


async def test_hooks_and_events__deeply_nested_payloads_are_400(api, workers):
    await start(api, "t.waiter", run_id="deep")
    await status(api, "deep", "WAITING")
    for depth in (1000, 100_000):
        body = b"[" * depth + b"]" * depth
        for path in ("/hooks/not-a-token", "/runs/deep/events/go"):
            response = await api.post(path, content=body, headers=JSON)
            assert response.status_code == 400, (path, response.text)
            assert response.json()["error"] == "BadRequest"
            assert "nested more than 100 deep" in response.json()["message"]
    assert (await api.get("/runs/deep")).json()["status"] == "WAITING"


async def _value(items):
    return bool(items)


async def test_tasks__of_a_run_include_its_childrens_and_the_run_names_its_child(api, workers):
    # Issue 31: a parent waiting on a child hid the child and the task it waits on.
    await start(api, "t.escalate", run_id="esc")
    child = "esc/t.inbox#1"
    task = await open_task(api, child)
    await status(api, "esc", "WAITING")

    tree = (await api.get("/tasks", params={"run_id": "esc"})).json()["tasks"]
    assert [t["task_id"] for t in tree] == [task["task_id"]]
    own = await api.get("/tasks", params={"run_id": "esc", "descendants": "false"})
    assert own.json()["tasks"] == []
    bad = await api.get("/tasks", params={"run_id": "esc", "descendants": "maybe"})
    assert bad.status_code == 400
    assert "descendants must be true or false" in bad.json()["message"]

    runs = (await api.get("/runs", params={"tree": "esc"})).json()["runs"]
    assert sorted(r["run_id"] for r in runs) == ["esc", child]
    assert {r["run_id"]: r["waiting_for"] for r in runs}["esc"] == (
        f"child run of 't.inbox' ({child})"
    )
    waiting = (await api.get("/runs/esc")).json()["waiting"]
    assert waiting["child_id"] == child
    assert waiting["child"]["run_id"] == child
    assert waiting["child"]["waiting"]["task_id"] == task["task_id"]
