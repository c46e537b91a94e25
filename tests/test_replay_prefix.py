"""A replay reproduced the steps before its intervention when they match the recording's up to what differs between
two runs of the same program: an object's memory address in a repr (`Step.replay_key`).

The steps are real (tests/fixtures/real_runs/smolagents_humanevalplus_144_prefix.json: smolagents on HumanEval/144,
seed-43 slice of 2026-12-03, and its replay with the task's reference at step 5). Step 1 defines `simplify`; smolagents
observes `<function create_function.<locals>.new_func at 0x...>`, a new address in every run, and the replay was
reported as a divergence, so the search learnt nothing from it.
"""

from __future__ import annotations

import json
from pathlib import Path

from rootstep.model import Step

DATA = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "smolagents_humanevalplus_144_prefix.json").read_text())
RECORDED = [Step.model_validate(s) for s in DATA["recorded"]]
REPLAYED = [Step.model_validate(s) for s in DATA["replayed"]]


def test_the_replayed_prefix_differs_only_by_an_address():
    assert [a.content_key() == b.content_key() for a, b in zip(RECORDED, REPLAYED)] == [True, False, True, True, True]
    assert "new_func at 0x" in (RECORDED[1].observation or "")
    assert [a.replay_key() for a in RECORDED] == [b.replay_key() for b in REPLAYED]


def test_a_real_difference_still_differs():
    changed = REPLAYED[1].model_copy(update={"observation": (REPLAYED[1].observation or "").replace("new_func", "other")})
    assert RECORDED[1].replay_key() != changed.replay_key()
    edited = REPLAYED[1].model_copy(update={"content": REPLAYED[1].content.replace("def simplify", "def simplified")})
    assert RECORDED[1].replay_key() != edited.replay_key()


def test_the_run_id_still_reads_the_content_as_written():
    assert RECORDED[1].content_key() != REPLAYED[1].content_key()  # ids are content-addressed: nothing masked there
