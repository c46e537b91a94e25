"""Attribution methods ("who and when") and their scoring against warehouse labels.

Public face: the methods (registered in `TRACERS`, run by name with `run_tracer`): the Who&When LLM
methods `all_at_once`, `step_by_step`, `binary_search`, and the ones that need no provider:
`divergence` (align with a successful run), `confidence` (the model's own token log-probabilities) and
`learned` (a step scorer trained on verified labels: `train_model`, `load_model`); `Attribution` (also
`agent_name`, `step_number`, `reason`); `rank_steps`, the prior of the counterfactual search; scoring
`Scored`, `score`, `score_by`, `random_baseline`, `attach_baselines`, `PUBLISHED`; `evaluate`; the
reward `multi_granular_reward` with its `trl_reward` / `verl_compute_score` adapters; `export_training`.
"""

from ._baselines import PUBLISHED, attach_baselines
from ._confidence import confidence, confidence_scores
from ._divergence import align, divergence, find_counterparts
from ._evaluate import Evaluation, evaluate, predict, scored_items
from ._learned import DEFAULT_FOLDS, Example, LearnedModel, StepScorer, cross_validate, learned, list_models, load_model, train_model
from ._methods import (
    TRACERS,
    Attribution,
    TracerError,
    all_at_once,
    as_trajectory,
    binary_search,
    default_model,
    run_tracer,
    step_by_step,
    tracer,
    tracer_fn,
)
from ._parse import ParsedAnswer, match_agent, parse_attribution, parse_half, parse_yes_no
from ._rank import rank_steps
from ._reward import multi_granular_reward, parse_answer, trl_reward, verl_compute_score
from ._scoring import Scored, random_baseline, score, score_by
from ._training import export_training, task_folds, task_split

__all__ = [
    "DEFAULT_FOLDS",
    "PUBLISHED",
    "TRACERS",
    "default_model",
    "Attribution",
    "Evaluation",
    "Example",
    "LearnedModel",
    "ParsedAnswer",
    "Scored",
    "StepScorer",
    "TracerError",
    "align",
    "all_at_once",
    "as_trajectory",
    "attach_baselines",
    "binary_search",
    "confidence",
    "confidence_scores",
    "cross_validate",
    "divergence",
    "evaluate",
    "export_training",
    "find_counterparts",
    "learned",
    "list_models",
    "load_model",
    "match_agent",
    "multi_granular_reward",
    "parse_answer",
    "parse_attribution",
    "parse_half",
    "parse_yes_no",
    "predict",
    "random_baseline",
    "rank_steps",
    "run_tracer",
    "score",
    "score_by",
    "scored_items",
    "step_by_step",
    "task_folds",
    "task_split",
    "tracer",
    "tracer_fn",
    "train_model",
    "trl_reward",
    "verl_compute_score",
]
