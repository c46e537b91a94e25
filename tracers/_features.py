"""Step features for the learned tracer: what a step looks like, where it sits, what follows it.

One row per AGENT step (only agent steps can be decisive errors). Every feature is computed from the
run alone, never from its label; the ground truth answer is used only when `with_ground_truth` is set
(the "with ground truth" setting of Who&When, where a developer debugs against a dev set), and then
only as "does the step state / overlap the correct answer".

Families (names in `feature_names`):
* position: index, fraction of the run, rank among agent steps, one-hot of the first indices and ranks,
  run length;
* neighbours: kind of the previous / next step, whether the step ends the run;
* agent: its share of the run's steps, its turn count so far, whether it opened the run, whether it
  spoke just before;
* errors: errors and tracebacks in the following observations (the step's own observation, the tool or
  environment steps up to the next agent step, and the next three steps), errors before the step;
* content: length, code blocks, numbers, overlap with the question (and with the ground truth), words
  that signal made-up data ("assume", "hypothetical", "placeholder", ...), claims of verification,
  `TERMINATE`;
* what the next agent says about it: error or disagreement words, agreement words, in its first 600
  characters.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from rootstep.model import Step, Trajectory

FEATURE_VERSION = 1
"""Bumped whenever a feature changes meaning: a model trained on other features must not be used."""

_ERROR_NAMES = re.compile(r"Traceback \(most recent call last\)|(?:Error|Exception)\b")
_ERROR_WORDS = re.compile(r"exitcode: *[1-9]|execution failed|\berror:|\bfailed to\b|\bnot found\b", re.IGNORECASE)
SCAN_CHARS = 3000
"""Regexes read the first 2/3 and the last 1/3 of this many characters of a long text (tracebacks end it)."""
_FABRICATION = re.compile(
    r"\bassum|hypothetical|placeholder|\bsimulat|\bmock|\bsuppose\b|let's say|sample data|dummy|"
    r"for (?:the sake of )?illustration|\bexample (?:data|values?)\b|\bestimat",
    re.IGNORECASE,
)
_VERIFIED = re.compile(r"\bverif|\bconfirm|\bdouble[- ]check|\bvalidat", re.IGNORECASE)
_OBJECTION = re.compile(
    r"\berror|\bincorrect|\bmistake|\bwrong\b|\bissue\b|\bunable\b|\bcannot\b|can't|\bfail|\bnot (?:correct|accurate|"
    r"valid|found)|\bhowever\b|\binstead\b",
    re.IGNORECASE,
)
_AGREEMENT = re.compile(r"\bagree|\bconfirm|\bcorrect\b|\bverified\b|looks good|\bconcur|\bwell done", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_STOPWORDS = frozenset(
    "a an the of to in on at for by with and or is are was were be been it its this that these those what which who "
    "how many much as from into than then there their they them we you your i me my our please solve task".split()
)
POSITIONS = 6
RANKS = 4
NEXT_WINDOW = 3
REPLY_CHARS = 600


def _tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS}


def _overlap(tokens: set[str], reference: set[str]) -> float:
    return len(tokens & reference) / len(reference) if reference else 0.0


def _scan(text: str) -> str:
    if len(text) <= SCAN_CHARS:
        return text
    head = SCAN_CHARS * 2 // 3
    return text[:head] + "\n" + text[-(SCAN_CHARS - head):]


def _has_error(step: Step) -> bool:
    """An error or traceback in what the environment said: a tool/environment step, or an observation."""
    text = _scan((step.observation or "") + ("\n" + step.content if step.kind != "agent" else ""))
    return bool(_ERROR_NAMES.search(text) or _ERROR_WORDS.search(text))


def feature_names(with_ground_truth: bool) -> list[str]:
    names = ["index", "index_frac", "rank", "rank_frac", "log_steps", "agent_steps"]
    names += [f"pos_{k}" for k in range(POSITIONS)] + [f"pos_{POSITIONS}plus"]
    names += [f"rank_{k}" for k in range(RANKS)]
    names += ["prev_tool", "prev_human", "next_tool", "is_last"]
    names += ["agent_share", "agent_turn", "agent_first_turn", "agent_opened_run", "same_agent_as_prev"]
    names += ["error_following", "errors_next3", "errors_before", "after_error"]
    names += ["question_overlap", "log_chars", "code_block", "log_numbers", "fabrication", "claims_verified",
              "terminate"]
    names += ["reply_objects", "reply_agrees", "objects_itself"]
    if with_ground_truth:
        names += ["states_ground_truth", "ground_truth_overlap"]
    return names


def step_features(trajectory: Trajectory, with_ground_truth: bool) -> list[tuple[int, dict[str, float]]]:
    """`(step index, features)` for every agent step of `trajectory`, in order.

    A run without agent steps has no rows. `with_ground_truth` adds the two ground-truth features (zero
    when the run has no ground truth).
    """
    steps = trajectory.steps
    n = len(steps)
    agent_indices = [s.index for s in steps if s.kind == "agent"]
    if not agent_indices:
        return []
    counts = Counter(s.agent for s in steps)
    opener = steps[agent_indices[0]].agent
    errors = [_has_error(s) for s in steps]
    question = _tokens(trajectory.question)
    truth = (trajectory.ground_truth or "").strip().lower() if with_ground_truth else ""
    truth_tokens = _tokens(truth)
    turns: Counter[str] = Counter()
    rows: list[tuple[int, dict[str, float]]] = []
    for rank, i in enumerate(agent_indices):
        step = steps[i]
        turns[step.agent] += 1
        content = _scan(step.content)
        tokens = _tokens(content)
        nxt = steps[i + 1] if i + 1 < n else None
        reply = next((steps[j] for j in range(i + 1, n) if steps[j].kind == "agent"), None)
        following = [i] + [j for j in range(i + 1, reply.index if reply else n)]  # own observation, then tool turns
        f: dict[str, float] = {
            "index": float(i),
            "index_frac": i / max(n - 1, 1),
            "rank": float(rank),
            "rank_frac": rank / max(len(agent_indices) - 1, 1),
            "log_steps": math.log(n),
            "agent_steps": float(len(agent_indices)),
            **{f"pos_{k}": float(i == k) for k in range(POSITIONS)},
            f"pos_{POSITIONS}plus": float(i >= POSITIONS),
            **{f"rank_{k}": float(rank == k) for k in range(RANKS)},
            "prev_tool": float(i > 0 and steps[i - 1].kind in ("tool", "environment")),
            "prev_human": float(i > 0 and steps[i - 1].kind == "human"),
            "next_tool": float(nxt is not None and nxt.kind in ("tool", "environment")),
            "is_last": float(nxt is None),
            "agent_share": counts[step.agent] / n,
            "agent_turn": float(turns[step.agent]),
            "agent_first_turn": float(turns[step.agent] == 1),
            "agent_opened_run": float(step.agent == opener),
            "same_agent_as_prev": float(i > 0 and steps[i - 1].agent == step.agent),
            "error_following": float(any(errors[j] for j in following)),
            "errors_next3": float(sum(errors[i + 1 : i + 1 + NEXT_WINDOW])),
            "errors_before": float(sum(errors[:i])),
            "after_error": float(i > 0 and errors[i - 1]),
            "question_overlap": _overlap(tokens, question),
            "log_chars": math.log1p(len(step.content)),
            "code_block": float("```" in content),
            "log_numbers": math.log1p(len(_NUMBER.findall(content))),
            "fabrication": float(bool(_FABRICATION.search(content))),
            "claims_verified": float(bool(_VERIFIED.search(content))),
            "terminate": float("TERMINATE" in content),
            "reply_objects": float(reply is not None and bool(_OBJECTION.search(reply.content[:REPLY_CHARS]))),
            "reply_agrees": float(reply is not None and bool(_AGREEMENT.search(reply.content[:REPLY_CHARS]))),
            "objects_itself": float(bool(_OBJECTION.search(content[:REPLY_CHARS]))),
        }
        if with_ground_truth:
            f["states_ground_truth"] = float(bool(truth) and truth in step.content.lower())
            f["ground_truth_overlap"] = _overlap(tokens, truth_tokens)
        rows.append((i, f))
    return rows


def step_text(step: Step, limit: int = 2000) -> str:
    """What the text model reads of a step: its content (and observation), capped."""
    text = step.content if not step.observation else f"{step.content}\n{step.observation}"
    return text[:limit]
