"""`gather` stores each unit's outcome as soon as it finishes, not in submission order: a flow stopped
while an early unit is still running keeps what later units already finished."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from prefect import flow, task

from rootstep.flows._unit import gather


@dataclass
class _Outcome:
    row: str


@dataclass
class _Spec:
    name: str

    def failed(self, why: str) -> str:
        return f"{self.name} failed: {why}"


@dataclass
class _Session:
    stopping: bool = False
    stored: list[str] = field(default_factory=list)
    seen_by_slow: list[str] | None = None
    """What was stored when the first-submitted (slow) unit ended."""

    def store(self, outcome: _Outcome) -> None:
        self.stored.append(outcome.row)


@task
def _unit(name: str, session: Any) -> _Outcome:
    if name == "slow":  # runs until the fast unit's outcome is stored (at most 30 s)
        stored = threading.Event()
        for _ in range(600):
            if "fast" in session.stored:
                break
            stored.wait(0.05)
        session.seen_by_slow = list(session.stored)
    if name == "broken":
        raise ValueError("no sandbox")
    return _Outcome(row=name)


def test_outcomes_are_stored_as_units_finish_and_rows_keep_submission_order(prefect_harness):
    session = _Session()

    @flow
    def run() -> list[Any]:
        specs = [_Spec("slow"), _Spec("fast"), _Spec("broken")]
        pending = [(spec, _unit.with_options(retries=0).submit(spec.name, session)) for spec in specs]
        return gather(session, pending)  # type: ignore[arg-type]

    rows = run()
    assert session.seen_by_slow == ["fast"]  # stored while the first-submitted unit was still running
    assert session.stored == ["fast", "slow"]
    assert rows[:2] == ["slow", "fast"] and rows[2].startswith("broken failed: ValueError: no sandbox")
