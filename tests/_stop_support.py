"""A scripted AG2 team for stopping a real `rootstep pipeline` (tests/test_flows_stop.py).

`register` is the pipeline's `--worker-setup` hook (the scripted provider lives in the pipeline's
process). With `ROOTSTEP_STOP_TEST_LOOP=1` the team keeps its episode going: every reply comes after
a pause and the critic never says TERMINATE, and the first call touches the file named by
`ROOTSTEP_STOP_TEST_MARK` (the test's sign that an episode is running). Without it the coder answers
and the critic ends the chat at once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

MODEL = "scripted/stop-test-team"
PAUSE_S = 2.0


def team(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    critic = str(messages[0].get("content")).startswith("You are the critic")
    if os.environ.get("ROOTSTEP_STOP_TEST_LOOP") == "1":
        mark = os.environ.get("ROOTSTEP_STOP_TEST_MARK")
        if mark:
            Path(mark).touch()
        time.sleep(PAUSE_S)
        if critic:
            return "Please check the computation once more before we finish."
    elif critic:
        return "The computation is right. TERMINATE"
    return "```python\nprint(42)\n```\nAnswer: 42"


def register() -> None:
    from rootstep.gateway import register_script

    register_script(MODEL.split("/", 1)[1], team)
