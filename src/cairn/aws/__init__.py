"""cairn on AWS Lambda durable functions: a workflow served as a durable handler.

```python
handler = cairn.aws.handler(process_order)
```

The Lambda service checkpoints the run (no database, no worker): while the handler runs,
cairn's primitives are the SDK's operations (aws-durable-execution-sdk-python):

- a step (`@cairn.step`, `cairn.run_step`): a checkpointed step, retried by its Retry;
- `cairn.sleep` / `sleep_until`: the service's wait (no compute while waiting);
- `wait_for_event` / `create_hook` / `human_task`: a callback whose id is the token an
  outside system sends the payload with;
- calling a child workflow: a child context;
- `asyncio.gather`: its branches take their turns, in the order given;
- `cairn.progress` / `set_columns`: logged.

What has no meaning there (queues, schedules, step queues, transaction steps, emit,
start_child, continue_as_new, receive, schedule_workflow, stream) raises `Unsupported`
naming it, when the handler is made or at the call. Needs `pip install 'cairn-workflows[aws]'`.
"""

from __future__ import annotations

try:
    import aws_durable_execution_sdk_python  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "cairn.aws needs the AWS durable execution SDK: pip install 'cairn-workflows[aws]'"
    ) from exc

from cairn.aws.handler import handler
from cairn.errors import Unsupported

__all__ = ["Unsupported", "handler"]
