"""Which failed episodes the flows retry (`infrastructure_error`, Prefect's `retry_condition_fn`), read from
Prefect's own `Failed` states: a container that died or printed no trajectory is retried as often as the task
allows; an episode that timed out is retried once (smolagents on MATH-500 1408 looped to its 600 s limit three
times on the seed-5 slice of 2026-11-28); a wrong answer or a stop is never an infrastructure error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from prefect.states import Failed

from rootstep.adapters.base import AdapterError, EpisodeTimedOut
from rootstep.flows._unit import infrastructure_error


def retried(exc: BaseException, run_count: int) -> bool:
    return infrastructure_error(None, SimpleNamespace(run_count=run_count), Failed(data=exc))


@pytest.mark.parametrize("run_count", [1, 2, 3])
def test_an_infrastructure_error_is_retried_whatever_the_attempt(run_count):
    assert retried(AdapterError("ag2 episode run_x exit 137 without a trajectory"), run_count)


def test_an_episode_that_timed_out_is_retried_once():
    exc = EpisodeTimedOut("smolagents episode run_x timed out without a trajectory")
    assert isinstance(exc, AdapterError)
    assert retried(exc, 1) and not retried(exc, 2) and not retried(exc, 3)


def test_other_errors_are_not_retried():
    assert not retried(ValueError("bad task"), 1)
    assert not retried(RuntimeError("stopped"), 1)
