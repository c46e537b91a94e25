"""A warehouse for the web UI tests, filled through the real code paths.

* Who&When logs imported by `rootstep.traces.whowhen.import_paths` (human labels).
* A simulated three-agent team (Planner, Coder, a python executor, Reviewer) on a GSM8K-style word
  problem whose replay re-runs the team from an intervention: the later steps are recomputed from what
  the forced step says (a plan's formula, the code's arithmetic, a reviewer's correction), so a fix can
  succeed or not, as a real re-simulation would.
  - the failure is searched by `rootstep.annotation.find_decisive_step` with a scripted analyzer (through
    litellm's `scripted/` provider): its first proposal (the Reviewer) does not help, its second (the
    Coder's code) does, and the earlier-step scan then finds the Planner's plan, the earliest fix that
    works: a verified label at step 1 with three attempts;
  - the label is re-checked from scratch (as `rootstep annotate --recheck` does: another analyzer sample,
    the agent steps asked in another order): the re-checking analyzer judges the plan correct and fixes
    the Coder's code, so the re-check lands elsewhere (Coder, step 2), stored beside the label;
  - the success is corrupted by `rootstep.annotation.inject_fault` with a scripted perturber: the Coder's
    code is changed, the replay fails, and the corrupted run is labelled by construction.
  Everything is stored in the order the annotation flows store it: replayed runs, replays, annotation.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import shutil
from pathlib import Path
from typing import Any

from rootstep.annotation import ReplayOutcome, find_decisive_step, inject_fault
from rootstep.flows._searches import as_recheck
from rootstep.model import Intervention, Step, Trajectory, Usage, Verdict
from rootstep.warehouse import Warehouse
from rootstep.traces.whowhen import import_paths

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "whowhen"
WHOWHEN_FILES = ["Algorithm-Generated/93.json", "Hand-Crafted/6.json"]
UPLOAD_FILE = "Algorithm-Generated/47.json"

QUESTION = ("A bakery sells 12 boxes of muffins in the morning and 8 boxes in the afternoon. Each box holds 6 "
            "muffins. How many muffins does the bakery sell in a day?")
TRUTH = 120
RIGHT_PLAN = ("Plan: add the morning and afternoon boxes, then multiply the total number of boxes by the 6 muffins "
              "in each box: (morning + afternoon) * 6.")
WRONG_PLAN = ("Plan: multiply the morning boxes by the 6 muffins in each box, then add the afternoon boxes: "
              "morning * 6 + afternoon.")
REVIEW_FIX = ("The code adds the 8 afternoon boxes as if they were 8 muffins. Afternoon boxes hold 6 muffins too: "
              "the count is (12 + 8) * 6. Coder, please correct it.")
REVIEW_NUDGE = "Please double-check the arithmetic before you give the final answer."

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def arithmetic(expression: str) -> int:
    """The value of an integer expression of + - * and parentheses (what the executor runs)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not simple arithmetic: {expression!r}")

    return value(ast.parse(expression, mode="eval").body)


def code_for(plan: str) -> str:
    expression = "(12 + 8) * 6" if "(morning + afternoon)" in plan else "12 * 6 + 8"
    return f"```python\nmorning, afternoon, per_box = 12, 8, 6\nprint({expression})\n```"


def code_value(code: str) -> int | None:
    found = re.search(r"print\((.+)\)", code)
    try:
        return arithmetic(found.group(1)) if found else None
    except (ValueError, SyntaxError):
        return None


class Bakery:
    """The simulated team. `run(plan)` is an original run; `replay(intervention)` re-simulates it."""

    def __init__(self, plan: str, task_id: str):
        self.task_id = task_id
        self.original = self.run(plan)

    def run(self, plan: str, forced: Intervention | None = None, base: Trajectory | None = None) -> Trajectory:
        contents: list[str] = []

        def take(i: int, live: str) -> str:
            if forced is not None and base is not None and i < forced.step:
                return base.steps[i].content  # the recorded prefix
            if forced is not None and i == forced.step:
                return forced.new_content
            return live

        contents.append(take(0, QUESTION))
        contents.append(take(1, plan))
        contents.append(take(2, code_for(contents[1])))
        value = code_value(contents[2])
        contents.append(take(3, f"exitcode: 0 (execution succeeded)\nCode output: {value}"))
        contents.append(take(4, f"The code follows the plan and printed {value}. Looks right to me."))
        if "(12 + 8) * 6" in contents[4]:
            value = arithmetic("(12 + 8) * 6")  # the coder applies the reviewer's correction
        contents.append(take(5, f"FINAL ANSWER: {value}"))
        agents = [("user", "human"), ("Planner", "agent"), ("Coder", "agent"), ("executor", "tool"),
                  ("Reviewer", "agent"), ("Coder", "agent")]
        steps = [Step(index=i, agent=a, kind=k, content=c, call_ids=[f"call-{self.task_id}-{i}"] if k == "agent" else [])
                 for i, ((a, k), c) in enumerate(zip(agents, contents))]
        final = re.search(r"FINAL ANSWER: (\S+)", contents[5])
        answer = final.group(1) if final else None
        ok = answer == str(TRUTH)
        return Trajectory(
            framework="simteam", benchmark="gsm8k-sim", task_id=self.task_id, question=QUESTION, ground_truth=str(TRUTH),
            steps=steps, final_answer=answer, model="scripted/ui-team", source="rootstep",
            verdict=Verdict(success=ok, score=float(ok), details={"expected": str(TRUTH), "got": answer}),
            parent_run_id=None if base is None else base.id, prompt_tokens=300 * 4, completion_tokens=60 * 4,
        )

    def replay(self, intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        result = self.run(self.original.steps[1].content, forced=intervention, base=self.original)
        live = sum(1 for s in result.steps[intervention.step + 1:] if s.kind == "agent")
        replayed = sum(1 for s in result.steps[:intervention.step] if s.kind == "agent")
        return result, result.verdict, ReplayOutcome(cost=Usage(
            llm_calls=live, replayed_calls=replayed, prompt_tokens=200 * live, completion_tokens=40 * live,
            usd=0.0004 * live, seconds=0.8 + 0.5 * live))


def _diagnosis(step: int, agent: str, reason: str, fix: str, **extra: Any) -> str:
    return json.dumps({**extra, "mistake_step": step, "mistake_agent": agent, "reason": reason, "suggested_fix": fix})


def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """Ranked: first the Reviewer (a nudge that changes nothing), then the Coder's code; asked about the
    Planner's step in the earlier-step scan, it corrects the plan."""
    prompt = messages[-1]["content"]
    examined = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompt)
    if examined:
        step = int(examined.group(1))
        if step == 1:
            return _diagnosis(1, "Planner", "The plan multiplies only the morning boxes by 6 and adds the afternoon "
                              "boxes as muffins; every later step follows it.", RIGHT_PLAN, fix_needed=True)
        return json.dumps({"fix_needed": False, "reason": "this step follows the plan it was given"})
    if "step 4 (Reviewer)" not in prompt:
        return ("```json\n" + _diagnosis(4, "Reviewer", "The reviewer approved a result without checking it.",
                                         REVIEW_NUDGE) + "\n```")
    return _diagnosis(2, "Coder", "The code adds the afternoon boxes (8) instead of their muffins (8 * 6).",
                      "```python\nmorning, afternoon, per_box = 12, 8, 6\nprint((12 + 8) * 6)\n```")


def rechecker(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """The re-check's analyzer sample: the plan is one reading of the problem (correct); the Coder's code is
    the error."""
    examined = re.search(r"STEP UNDER EXAMINATION: step (\d+)", messages[-1]["content"])
    if examined and int(examined.group(1)) != 2:
        return json.dumps({"fix_needed": False, "reason": "this step is a reasonable reading of the problem"})
    return _diagnosis(2, "Coder", "The code adds 8 for the afternoon: the afternoon boxes hold 8 * 6 muffins.",
                      "```python\nmorning, afternoon, per_box = 12, 8, 6\nprint(12 * 6 + 8 * 6)\n```", fix_needed=True)


RECHECK_ORDER = [2, 4, 1, 5]
"""The agent steps in the order the re-check asks about them (the flows shuffle them, seeded by the label)."""


def perturber(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    return json.dumps({
        "step": 2,
        "corrupted_content": "```python\nmorning, afternoon, per_box = 12, 8, 6\nprint(12 * 6 + 8 * 5)\n```",
        "description": "assumed the afternoon boxes hold 5 muffins instead of 6",
    })


def build_warehouse(root: Path) -> dict[str, Any]:
    """Fill a warehouse under `root` and say where things are (run ids, the upload file)."""
    from rootstep.gateway import register_script
    from rootstep.gateway import Chat

    data = root / "whowhen"
    for name in WHOWHEN_FILES + [UPLOAD_FILE]:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED / name, data / name)
    upload = root / "upload" / Path(UPLOAD_FILE).name
    upload.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(data / UPLOAD_FILE, upload)
    wh = Warehouse(root / "warehouse")
    import_paths([data], wh)

    register_script("ui-analyzer", analyzer)
    register_script("ui-perturber", perturber)
    register_script("ui-rechecker", rechecker)
    failing, succeeding = Bakery(WRONG_PLAN, "bakery-1"), Bakery(RIGHT_PLAN, "bakery-2")
    wh.write_trajectories([failing.original, succeeding.original])

    captured: list[Trajectory] = []

    def capturing(team: Bakery):
        def replay(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
            result = team.replay(intervention)
            captured.append(result[0])
            return result
        return replay

    # the pages are checked against a known set of replays: no control replayed beside a ranked fix that fails
    found = find_decisive_step(failing.original, analyzer=Chat("scripted/ui-analyzer"), replay=capturing(failing),
                               early_controls=False)
    wh.write_trajectories(captured)
    wh.write_replays(found.replays)
    wh.write_annotations([found.annotation])

    captured.clear()
    again = find_decisive_step(failing.original, analyzer=Chat("scripted/ui-rechecker"), replay=capturing(failing),
                               prior=RECHECK_ORDER, early_controls=False)
    recheck = as_recheck(again.annotation, found.annotation)
    wh.write_trajectories(captured)
    wh.write_replays(again.replays)
    wh.write_annotations([recheck])

    captured.clear()
    injected = inject_fault(succeeding.original, Chat("scripted/ui-perturber"), capturing(succeeding), programmatic=False,
                            mode="one_shot")
    wh.write_trajectories(captured)
    wh.write_replays(injected.replays)
    wh.write_annotations([injected.annotation])
    return {
        "warehouse": wh,
        "location": str(root / "warehouse"),
        "counterfactual_run": failing.original.id,
        "counterfactual": found,
        "recheck": recheck,
        "success_run": succeeding.original.id,
        "corrupted_run": injected.failed_run.id,
        "injection": injected,
        "upload": upload,
    }


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ui"
RECORDED_ANSWER = (FIXTURES / "all_at_once-whowhen-algorithm-generated-47.txt").read_text(encoding="utf-8")
"""A real all-at-once answer on Who&When Algorithm-Generated/47.json, written through the hand-model
endpoint by a person answering as a capable model would (the prompt is tracers' all_at_once prompt)."""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """The app served by uvicorn in a thread of the test process, on a free loopback port (so scripted
    models registered by the test answer the app's attribution jobs)."""

    def __init__(self, app: Any):
        import threading

        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                        log_config=None))  # no dictConfig in the test process
        self.thread = threading.Thread(target=self.server.run, name="ui-test-server", daemon=True)

    def __enter__(self) -> "ThreadServer":
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the UI test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
