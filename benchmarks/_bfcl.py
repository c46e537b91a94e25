"""BFCL multi-turn: the Berkeley Function Calling Leaderboard's stateful tool-use tasks, and its own checker as Omega.

The tasks, the function documents and the checker come from the PyPI wheel `bfcl-eval` (Apache-2.0), installed
without its dependencies (only `mpmath` is needed; `scripts/bootstrap.sh`). Four benchmarks, one per variant:
`bfcl` (base), `bfcl-miss-func` (a function held back until the turn that needs it), `bfcl-miss-param` (a turn
that lacks a parameter: the team should ask, not guess), `bfcl-long` (long-context scenario states). Each task
is 1-8 user turns over BFCL's stateful Python API simulators (file system, messaging, posting, tickets, trading,
travel, vehicle control, math).

Omega (`bfcl_multi_turn`) is BFCL's `multi_turn_checker` on the calls the team executed: after every user turn it
runs the team's calls and the ground truth's on fresh simulator instances and compares their states and the
responses; `verdict_details` says which turn and which check failed. The answer a run hands to it is
`executed_calls_answer(steps)`: per user turn, per agent step, the calls the sandbox's tool server ran, as BFCL
call strings built from the function name and JSON arguments (`adapters/_drivers/_bfcl_tools.py`, never from
model text: the checker runs them with `eval`), each checked here to be a call of literals (`parse_call`).

Only these modules of the wheel are imported: `constants.executable_backend_config` and
`constants.default_prompts` (constants), and `eval_checker.multi_turn_eval` (the checker and the simulators).
`constants.eval_config` creates result folders when imported and is never touched.
"""

from __future__ import annotations

import ast
import json
import threading
import uuid
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from rootstep.model import InputError, Step, Task, Verdict

from ._catalog import catalog
from ._registry import BenchmarkInfo, benchmark, verifier

BFCL_PACKAGE = "bfcl_eval"
VARIANTS = {"bfcl": "base", "bfcl-miss-func": "miss_func", "bfcl-miss-param": "miss_param",
            "bfcl-long": "long_context"}
"""Benchmark name -> BFCL's multi-turn category."""
API_CLASSES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
               "VehicleControlAPI")
"""BFCL's multi-turn API simulators (the sandbox's tool server runs these; its `MODULES` names their files)."""



def _data_dir() -> Path:
    """The wheel's data folder (a path that does not exist when `bfcl-eval` is not installed)."""
    from importlib.util import find_spec

    spec = find_spec(BFCL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return Path("/nonexistent/bfcl-eval-package-not-installed")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _files(variant: str) -> tuple[str, str]:
    data = _data_dir()
    name = f"BFCL_v4_multi_turn_{variant}.json"
    return str(data / name), str(data / "possible_answer" / name)


def parse_call(call: str) -> tuple[str, list[Any], dict[str, Any]]:
    """(name, positional, keyword arguments) of a BFCL call string whose arguments are all literals (BFCL's ground
    truth passes some positionally); ValueError otherwise: anything else would be run by the checker's `eval`."""
    try:
        tree = ast.parse(call, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {call!r} ({exc.msg})") from None
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise ValueError(f"not a call of a function by name: {call!r}")
    if any(isinstance(a, ast.Starred) for a in tree.args) or any(k.arg is None for k in tree.keywords):
        raise ValueError(f"*arguments and **arguments are not allowed: {call!r}")
    try:
        return (tree.func.id, [ast.literal_eval(a) for a in tree.args],
                {k.arg: ast.literal_eval(k.value) for k in tree.keywords if k.arg is not None})
    except ValueError:
        raise ValueError(f"an argument is not a literal: {call!r}") from None


def task_functions(task: Task) -> dict[str, dict[str, Any]]:
    """Every function document `task` offers, from the start or at a later turn (`held_back`), by name."""
    docs = list(task.metadata.get("functions") or [])
    for later in (task.metadata.get("held_back") or {}).values():
        docs += list(later)
    return {str(d["name"]): d for d in docs if isinstance(d, dict) and d.get("name")}


def _is_default(value: Any, default: Any) -> bool:
    if value == default:
        return True
    if isinstance(default, str):
        try:
            return bool(value == ast.literal_eval(default))
        except (ValueError, SyntaxError):
            return False
    return False


def call_key(call: str, functions: dict[str, dict[str, Any]]) -> str | None:
    """A BFCL call string as one canonical text, for comparing two calls: its arguments by parameter name (a
    positional one named by the function's documented order, as BFCL's ground truth passes some), an argument
    equal to its documented default left out, the names sorted. None when `call` is not a call of literals."""
    try:
        name, positional, keywords = parse_call(call)
    except ValueError:
        return None
    properties = ((functions.get(name) or {}).get("parameters") or {}).get("properties") or {}
    names = list(properties)
    if len(positional) > len(names):
        return call.strip()
    arguments = {**dict(zip(names, positional)), **keywords}
    kept = {k: v for k, v in arguments.items()
            if not ("default" in (properties.get(k) or {}) and _is_default(v, properties[k]["default"]))}
    return f"{name}({json.dumps(kept, sort_keys=True, default=repr)})"


class CallStep(NamedTuple):
    """One agent step of a user turn that had the functions as tools: the BFCL calls its tools ran, in order, and
    whether every call it asked for ran (a call of an unknown function or with unfit arguments did not)."""

    step: int
    executed: list[str]
    all_ran: bool


def matching(calls: Sequence[str], truth: Sequence[str], start: int, functions: dict[str, dict[str, Any]]) -> int:
    """How many of `calls`, from the first, are the calls of `truth` from position `start` on, in order (`call_key`)."""
    n = 0
    while (n < len(calls) and start + n < len(truth)
           and call_key(calls[n], functions) is not None
           and call_key(calls[n], functions) == call_key(truth[start + n], functions)):
        n += 1
    return n


def calls_answer(turns: list[list[list[str]]]) -> str:
    """The answer a BFCL run hands to Omega: per user turn, per agent step, the calls it executed."""
    return json.dumps({"turns": turns})


def reads_calls(task: Task) -> bool:
    """Whether `task`'s Omega reads the calls a run executed (BFCL), not the team's answer text."""
    return task.verifier == "bfcl_multi_turn"


def executed_calls_answer(steps: Sequence[Step]) -> str:
    """`calls_answer` of a run's steps: the user turns it reached (its `human` steps with `metadata.turn`), and in
    each, per agent step that asked for calls, the BFCL call strings of those its tools ran (`tool` steps with
    `metadata.executed`, `call` and `asked_by`), in order."""
    turns: list[list[list[str]]] = []
    by_asker: dict[Any, list[str]] = {}
    for step in steps:
        meta = step.metadata
        if step.kind == "human" and isinstance(meta.get("turn"), int):
            turns.append([])
            by_asker = {}
        elif step.kind == "tool" and meta.get("executed") and turns and isinstance(meta.get("call"), str):
            asker = meta.get("asked_by")
            if asker not in by_asker:
                by_asker[asker] = []
                turns[-1].append(by_asker[asker])
            by_asker[asker].append(meta["call"])
    return calls_answer(turns)


def read_calls_answer(answer: str | None, turns: int) -> list[list[list[str]]]:
    """The per-turn, per-step calls of `answer` (`calls_answer`), each checked to be a literal call; ValueError
    naming what is wrong. Fewer turns than the task has is allowed (the run stopped early)."""
    if not answer:
        raise ValueError("no answer: the run recorded no calls")
    try:
        data = json.loads(answer)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not JSON: {exc.msg}") from None
    recorded = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(recorded, list):
        raise ValueError('the answer is not {"turns": [[[call, ...] per step] per turn]}')
    if len(recorded) > turns:
        raise ValueError(f"the answer has {len(recorded)} turns, the task {turns}")
    for t, steps in enumerate(recorded):
        if not isinstance(steps, list) or not all(isinstance(s, list) for s in steps):
            raise ValueError(f"turn {t}: expected a list of steps, each a list of calls")
        for step in steps:
            for call in step:
                if not isinstance(call, str):
                    raise ValueError(f"turn {t}: a call is not a string: {call!r}")
                parse_call(call)
    return recorded


# ------------------------------------------------------------------------------------ the tasks


def function_docs(classes: list[str]) -> list[dict[str, Any]]:
    """BFCL's function documents of the API classes, in its order (`populate_test_cases_with_predefined_functions`)."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    docs: list[dict[str, Any]] = []
    for name in classes:
        path = _data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[name]
        docs += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return docs


def function_summaries(task: Task) -> list[dict[str, str]]:
    """The functions `task` offers from its first turn, for a prompt that names them without giving them as tools
    (a planner): name, parameters (required ones first, optional ones with `=...`) and the description's first
    sentence."""
    out = []
    for doc in task.metadata.get("functions") or []:
        params = doc.get("parameters") or {}
        required = list(params.get("required") or [])
        names = required + [p for p in (params.get("properties") or {}) if p not in required]
        description = str(doc.get("description") or "").split(" Tool description: ")[-1].strip()
        out.append({"name": doc["name"], "parameters": ", ".join(p if p in required else f"{p}=..." for p in names),
                    "summary": description.split(". ")[0].rstrip(".")})
    return out


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"line {number}", f"not valid JSON: {exc.msg}") from None
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise InputError(str(path), f"line {number}: id", "missing or not a string")
        rows.append(row)
    return rows


def _turn_texts(row: dict[str, Any], path: Path) -> list[str]:
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    question = row.get("question")
    if not isinstance(question, list) or not question:
        raise InputError(str(path), f"{row['id']}: question", "missing or empty")
    held = row.get("missed_function") or {}
    texts = []
    for t, messages in enumerate(question):
        if str(t) in held:  # the turn that gives the held-back functions: BFCL's own user message for it
            texts.append(DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)
            continue
        said = [m.get("content", "") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not said:
            raise InputError(str(path), f"{row['id']}: question[{t}]", "no user message")
        texts.append("\n".join(said))
    return texts


def _load(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """BFCL's question file and its possible-answer file, joined by id. Per task (`metadata`): the user message
    of each turn, the simulators' initial state, the involved classes, the function documents offered from the
    start and those held back until a turn (`held_back`, miss_func), and the ground-truth calls per turn."""
    questions, answers = paths
    truth = {row["id"]: row.get("ground_truth") for row in _rows(answers)}
    tasks = []
    for row in _rows(questions):
        gt = truth.get(row["id"])
        if not isinstance(gt, list):
            raise InputError(str(answers), row["id"], "no ground truth for this task")
        texts = _turn_texts(row, questions)
        if len(gt) != len(texts):
            raise InputError(str(answers), row["id"], f"{len(gt)} ground-truth turns for {len(texts)} user turns")
        classes = row.get("involved_classes")
        if not isinstance(classes, list) or not classes:
            raise InputError(str(questions), f"{row['id']}: involved_classes", "missing or empty")
        unknown = [c for c in classes if c not in API_CLASSES]
        if unknown:
            raise InputError(str(questions), f"{row['id']}: involved_classes",
                             f"unknown API class {unknown[0]!r}; the multi-turn simulators are {', '.join(API_CLASSES)}")
        offered = function_docs(classes)
        held_back: dict[str, list[dict[str, Any]]] = {}
        for turn, names in (row.get("missed_function") or {}).items():
            held_back[turn] = [doc for doc in offered if doc["name"] in names]
            offered = [doc for doc in offered if doc["name"] not in names]
        tasks.append(info.task(row["id"], texts[0], json.dumps(gt), {
            "variant": VARIANTS[info.name] if info.name in VARIANTS else info.name,
            "turns": texts, "initial_config": row.get("initial_config") or {}, "involved_classes": classes,
            "functions": offered, "held_back": held_back, "ground_truth_calls": gt}))
    return tasks


def register_benchmarks() -> None:
    """Register the four variants (called by the registry when it loads the built-ins, after the others)."""
    for name, variant in VARIANTS.items():
        benchmark(catalog(name, files=_files(variant)))(_load)


# ------------------------------------------------------------------------------------ Omega

_CHECKS = threading.Lock()
_CHECK_NAMES = {"multi_turn:instance_state_mismatch": "state", "multi_turn:execution_response_mismatch": "response",
                "multi_turn:empty_turn_model_response": "no calls"}


def _instances_dropped(prefix: str) -> None:
    """Remove the simulator instances the checker cached under `prefix` (it keeps them in its module globals by
    name: a name used again would start from the state the last check left)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    for name in [n for n in vars(multi_turn_utils) if n.startswith(prefix)]:
        del vars(multi_turn_utils)[name]


def _checked(turns: list[list[list[str]]], gt: list[list[str]], entry: dict[str, Any], category: str) -> dict[str, Any]:
    """BFCL's `multi_turn_checker` on these turns, under a fresh instance name (the checker caches simulator
    instances by name in its module's globals: a name used again would start from the state the last check left,
    and a name that is not an identifier would turn every call, the ground truth's too, into a SyntaxError that
    passes), its instances dropped afterwards."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    name = f"rootstep_{uuid.uuid4().hex}"
    try:
        with _CHECKS:
            return multi_turn_checker(turns, gt, entry, category, name)
    finally:
        _instances_dropped(name)


@verifier("bfcl_multi_turn")
def bfcl_multi_turn(answer: str | None, task: Task, **_: Any) -> Verdict:
    """BFCL's multi-turn checker on the calls the run executed: state and responses after every user turn.

    `details`: `check` (answer, turns, state, response, no calls; checker: it raised, and the verdict is suspect),
    `turn` (0-based, BFCL's index), BFCL's `error_type` and message, and the state `differences` or the `missing`
    responses."""
    gt: list[list[str]] = task.metadata.get("ground_truth_calls") or json.loads(task.ground_truth or "[]")
    try:
        turns = read_calls_answer(answer, len(gt))
    except ValueError as exc:
        return Verdict(success=False, details={"check": "answer", "error": str(exc)})
    entry = {"id": task.task_id, "initial_config": task.metadata.get("initial_config") or {},
             "involved_classes": task.metadata.get("involved_classes") or []}
    category = task.task_id.rsplit("_", 1)[0]
    result: dict[str, Any] = {"valid": True}
    for turn in range(len(turns)):  # turn by turn: the checker's state errors do not say at which turn they arose
        try:
            result = _checked(turns[:turn + 1], gt[:turn + 1], entry, category)
        except Exception as exc:  # the checker itself failed: no verdict on the team
            return Verdict(success=False, details={"check": "checker", "turn": turn,
                                                   "suspect": f"BFCL's checker raised {type(exc).__name__}: {exc}"})
        if not result.get("valid"):
            break
    if result.get("valid") and len(turns) < len(gt):  # the turns it reached passed: it failed where it stopped
        return Verdict(success=False, details={
            "check": "turns", "turn": len(turns), "error_type": "multi_turn:force_terminated",
            "error": f"the run ended after {len(turns)} of {len(gt)} user turns"})
    if result.get("valid"):
        return Verdict(success=True, score=1.0, details={"check": "all turns"})
    message = str(result.get("error_message", ""))
    error_type = str(result.get("error_type"))
    details: dict[str, Any] = {"check": _CHECK_NAMES.get(error_type, error_type), "turn": turn,
                               "error_type": error_type, "error": message}
    differences = (result.get("details") or {}).get("differences")
    if differences:
        details["differences"] = json.loads(json.dumps(differences, default=str))
    missing = (result.get("details") or {}).get("missing_items")
    if missing:
        details["missing"] = missing
    return Verdict(success=False, details=details)
