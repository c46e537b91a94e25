"""Attribution methods ("who and when") and their scoring against warehouse labels.

Public face: the methods `all_at_once`, `step_by_step`, `binary_search` (registered in `TRACERS`),
`Attribution`; scoring `Scored`, `score`, `score_by`, `random_baseline`; `evaluate`; the reward
`multi_granular_reward` with its `trl_reward` / `verl_compute_score` adapters; `export_training`.
"""

from ._evaluate import Evaluation, evaluate
from ._methods import TRACERS, Attribution, all_at_once, as_trajectory, binary_search, step_by_step, tracer
from ._parse import ParsedAnswer, parse_attribution, parse_half, parse_yes_no
from ._reward import multi_granular_reward, parse_answer, trl_reward, verl_compute_score
from ._scoring import Scored, random_baseline, score, score_by
from ._training import export_training, task_split

__all__ = [
    "TRACERS",
    "Attribution",
    "Evaluation",
    "ParsedAnswer",
    "Scored",
    "all_at_once",
    "as_trajectory",
    "binary_search",
    "evaluate",
    "export_training",
    "multi_granular_reward",
    "parse_answer",
    "parse_attribution",
    "parse_half",
    "parse_yes_no",
    "random_baseline",
    "score",
    "score_by",
    "step_by_step",
    "task_split",
    "tracer",
    "trl_reward",
    "verl_compute_score",
]
