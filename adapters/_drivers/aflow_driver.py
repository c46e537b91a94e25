"""AFlow operator-graph workflows (reimplemented; AFlow is not on PyPI), run inside the sandbox image.

Standard library + `openai` only. An operator is one LLM call with a fixed prompt (from `episode.json`,
rendered host-side from `prompts/aflow_*.j2`; the driver fills the `${name}` placeholders) whose answer
is parsed into fields (`<thought>`, `<answer>`, `<solution_letter>`) or a code block. Each operator is an
agent: its calls go to `<gateway>/run/<id>/agent/<operator>/v1`, one call = one `agent` step; code the
Programmer and Test operators run (in a subprocess of this container) is a `tool` step of that operator.

Workflows (fixed graph, fixed candidate count, one call at a time, temperature 0):
- coding: custom x N -> sc_ensemble -> test: run visible tests -> on failure, reflect + fix -> run ... ;
- math:   answer_generate x N -> programmer (code -> run, retried with the error) -> sc_ensemble;
- qa:     answer_generate x N -> sc_ensemble.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import _episode

EXEC_MARKER = "<<<AFLOW_EXEC_RESULT>>>"

# Runs a program (and the visible tests) in a fresh interpreter: a JSON spec in, one marked JSON line out.
# Tracebacks show only the frames of the program and the tests, under fixed names, so they are the same
# in every run (their text goes into the next prompt).
_HARNESS = r'''
import json, linecache, math, signal, sys, traceback

MARKER = sys.argv[2]
spec = json.load(open(sys.argv[1], encoding="utf-8"))


def _source(name, text):
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    return compile(text, name, "exec")


def _trace(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.endswith("harness.py")]
    lines = traceback.format_list(frames)
    return ("Traceback (most recent call last):\n" if lines else "") + "".join(lines) + "".join(
        traceback.format_exception_only(type(exc), exc))


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout("timed out after %s s" % spec["per_test_timeout"])


def _emit(result):
    sys.stdout.flush()
    sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()


signal.signal(signal.SIGALRM, _alarm)
namespace = {"__name__": "solution"}
try:
    signal.alarm(int(spec["per_test_timeout"]))
    exec(_source("solution.py", spec["program"]), namespace)
    signal.alarm(0)
except BaseException as exc:
    signal.alarm(0)
    _emit({"exec_error": _trace(exc)})
    sys.exit(0)

if spec["mode"] == "solve":
    solve = namespace.get("solve")
    if not callable(solve):
        _emit({"status": "Error", "output": "Function 'solve' not found"})
        sys.exit(0)
    try:
        signal.alarm(int(spec["per_test_timeout"]))
        value = solve()
        signal.alarm(0)
        _emit({"status": "Success", "output": str(value)})
    except BaseException as exc:
        signal.alarm(0)
        _emit({"status": "Error", "output": _trace(exc)})
    sys.exit(0)

entry = spec.get("entry_point")
if entry and entry not in namespace:
    _emit({"exec_error": "the solution does not define `%s`" % entry})
    sys.exit(0)
results = []
for index, test in enumerate(spec["tests"], start=1):
    name = "<visible test %d>" % index
    scope = dict(namespace)
    scope.setdefault("math", math)  # MBPP+ prompts show `assert math.isclose(...)` without importing math
    try:
        code = _source(name, spec.get("setup", "") + "\n" + test if spec.get("setup") else test)
        signal.alarm(int(spec["per_test_timeout"]))
        exec(code, scope)
        signal.alarm(0)
        results.append({"test": test, "passed": True})
    except BaseException as exc:
        signal.alarm(0)
        failure = {"test": test, "passed": False, "error_type": type(exc).__name__, "error": str(exc)}
        if not isinstance(exc, AssertionError):
            failure["traceback"] = _trace(exc)
        else:  # `assert <call> == <expected>`: say what the call returned
            import ast
            try:
                node = ast.parse(test.splitlines()[-1]).body[0]
                if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
                    signal.alarm(int(spec["per_test_timeout"]))
                    failure["got"] = repr(eval(compile(ast.Expression(node.test.left), name, "eval"), scope))
                    signal.alarm(0)
            except BaseException:
                signal.alarm(0)
        results.append(failure)
_emit({"tests": results})
'''


fill = _episode.fill


def xml_field(text: str, name: str) -> str | None:
    """The last complete `<name>...</name>` in `text` (models sometimes echo the format first); else
    the text after an unclosed last `<name>`; else None."""
    closed = re.findall(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    if closed:
        return closed[-1].strip()
    start = text.rfind(f"<{name}>")
    return text[start + len(name) + 2:].strip() if start >= 0 else None


def extract_code(text: str, entry_point: str | None) -> str:
    """The program in an operator's answer: the last Python block defining `entry_point`, else the
    longest Python block, else the whole text."""
    return _episode.extract_code(text, entry_point) or text.strip("\n").rstrip() + "\n"


def fenced(code: str) -> str:
    return "```python\n" + code.rstrip() + "\n```"


class Workflow(_episode.StepRecorder):
    """The operators, sharing one step list (one call = one `agent` step of the operator's agent)."""

    def __init__(self, episode: dict[str, Any]):
        super().__init__(episode)
        self.prompts = self.cfg["prompts"]
        self.problem = self.cfg["problem"]
        self._runs = 0
        self.work = os.path.join(os.getcwd(), "aflow")
        os.makedirs(self.work, exist_ok=True)
        with open(os.path.join(self.work, "harness.py"), "w", encoding="utf-8") as f:
            f.write(_HARNESS)

    def call(self, agent: str, operator: str, prompt: str, **metadata: Any) -> tuple[str, dict[str, Any]]:
        """One operator LLM call -> one `agent` step (its content is the model's answer)."""
        return self.chat(agent, [{"role": "user", "content": prompt}], operator, metadata)

    def execute(self, mode: str, program: str, tests: list[str] | None = None) -> dict[str, Any]:
        """Run `program` (and `tests`) in a fresh interpreter in this container; the parsed result."""
        self._runs += 1
        spec_path = os.path.join(self.work, f"run{self._runs}.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump({"mode": mode, "program": program, "tests": tests or [], "entry_point": self.cfg.get("entry_point"),
                       "setup": self.cfg.get("test_setup") or "",
                       "per_test_timeout": self.cfg.get("per_test_timeout_s", 10)}, f)
        timeout = float(self.cfg.get("code_timeout_s", 30))
        try:
            proc = subprocess.run([sys.executable, os.path.join(self.work, "harness.py"), spec_path, EXEC_MARKER],
                                  capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                                  cwd=self.work, errors="replace")
        except subprocess.TimeoutExpired:
            return {"exec_error": f"the program ran longer than {timeout:g} s and was stopped"}
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(EXEC_MARKER):
                return json.loads(line[len(EXEC_MARKER):])
        tail = (proc.stderr or proc.stdout or "").strip()[-1500:]
        return {"exec_error": f"the program exited with code {proc.returncode} before finishing" + (f":\n{tail}" if tail else "")}

    # ------------------------------------------------------------------ operators

    def sc_ensemble(self, solutions: list[str], **metadata: Any) -> int:
        """ScEnsemble: one call choosing the most consistent solution by letter; its index.
        An answer without a valid letter falls back to A (said in the step's metadata)."""
        letters = [chr(65 + i) for i in range(len(solutions))]
        listing = "\n\n".join(f"{letter}:\n{solution}" for letter, solution in zip(letters, solutions))
        text, step = self.call("sc_ensemble", "ScEnsemble",
                               fill(self.prompts["sc_ensemble"], "sc_ensemble", problem=self.problem, solutions=listing),
                               letters=letters, **metadata)
        raw = xml_field(text, "solution_letter")
        match = re.search(r"\b([A-Z])\b", raw or "")
        letter = match.group(1) if match else None
        if letter not in letters:
            step["metadata"]["fallback"] = f"no valid solution letter in {raw!r}: chose A"
            letter = "A"
        step["metadata"]["chosen"] = letter
        return letters.index(letter)

    def programmer(self, analysis: str) -> tuple[str, str] | None:
        """Programmer: writes `solve()`, runs it here (a `tool` step), retries with the error shown.
        (code, output) of the first program that ran, or None when none did."""
        feedback = ""
        for attempt in range(1, int(self.cfg.get("programmer_attempts", 3)) + 1):
            text, step = self.call("programmer", "Programmer",
                                   fill(self.prompts["programmer"], "programmer", problem=self.problem,
                                        analysis=analysis, feedback=feedback), attempt=attempt)
            code = extract_code(text, "solve")
            if not code.strip():
                step["metadata"]["error"] = "no code in the answer"
                return None
            started = time.time()
            result = self.execute("solve", code)
            status = result.get("status", "Error")
            output = result.get("output") if "exec_error" not in result else result["exec_error"]
            self.add("programmer", "tool", "Programmer (execution)", f"Status: {status}\nOutput: {output}", started,
                     tool_calls=[{"name": "run_python", "arguments": {"code": code, "call": "solve()"}}],
                     metadata={"attempt": attempt, "status": status})
            if status == "Success":
                return code, str(output)
            feedback = fill(self.prompts["programmer_feedback"], "programmer_feedback", code=code.rstrip(),
                            status=status, output=output)
        return None

    def run_tests(self, solution: str, round_: int) -> tuple[bool, dict[str, Any], str]:
        """Test, execution half: the visible tests on `solution` here (a `tool` step); (whether all
        passed, the harness's result, the report)."""
        tests = list(self.cfg.get("visible_tests") or [])
        started = time.time()
        result = self.execute("tests", self.program(solution), tests)
        failed = [t for t in result.get("tests", []) if not t["passed"]]
        if "exec_error" in result:
            report = f"The solution could not be executed:\n{result['exec_error']}"
        elif not tests:
            report = ("The task shows no tests: the solution was executed"
                      + (f" and defines `{self.cfg['entry_point']}`." if self.cfg.get("entry_point") else "."))
        else:
            report = f"Visible tests: {len(tests)} run, {len(tests) - len(failed)} passed, {len(failed)} failed."
            for failure in failed:
                report += f"\nFAILED: {failure['test']}\n  {failure['error_type']}" + (f": {failure['error']}" if failure["error"] else "")
                if "got" in failure:
                    report += f"\n  the call returned {failure['got']}"
                if failure.get("traceback"):
                    report += "\n  " + failure["traceback"].rstrip().replace("\n", "\n  ")
        passed = "exec_error" not in result and not failed
        self.add("test", "tool", "Test (execution)", report, started,
                 tool_calls=[{"name": "run_visible_tests", "arguments": {"tests": tests}}],
                 metadata={"round": round_, "passed": passed, "failed": len(failed),
                           "exec_error": "exec_error" in result})
        return passed, result, report

    def program(self, solution: str) -> str:
        """What runs: the solution, after the task's prefix (HumanEval's signature) when it has one,
        as the code verifier assembles it."""
        prefix = self.cfg.get("prefix")
        if not prefix:
            return solution
        if _episode.defines(solution, self.cfg.get("entry_point")):
            return prefix.rstrip() + "\n\n" + solution
        return prefix + solution

    def test(self, solution: str) -> str:
        """Test: run the visible tests; on failure reflect and fix, at most `test_loops` times, then run
        them once more. The last solution (passing or not)."""
        loops = int(self.cfg.get("test_loops", 3))
        for round_ in range(loops + 1):
            passed, result, report = self.run_tests(solution, round_)
            if passed or round_ == loops:
                break
            if "exec_error" in result:
                execution, failures = f"executed unsuccessfully, error:\n{result['exec_error']}", "executed unsuccessfully"
            else:
                execution, failures = "executed successfully", report
            text, _ = self.call("test", "Test", fill(self.prompts["test"], "test", problem=self.problem,
                                                     solution=solution.rstrip(), execution=execution,
                                                     failures=failures), round=round_ + 1)
            solution = extract_code(text, self.cfg.get("entry_point"))
        return solution

    # ------------------------------------------------------------------ workflows

    def coding(self) -> str:
        entry = f"the function `{self.cfg['entry_point']}`" if self.cfg.get("entry_point") else "the function the task asks for"
        candidates = []
        for index, template in enumerate(self.prompts["custom"]):
            text, _ = self.call("custom", "CustomCodeGenerate",
                                fill(template, "custom", problem=self.problem, entry_point=entry), candidate=index)
            candidates.append(extract_code(text, self.cfg.get("entry_point")))
        chosen = self.sc_ensemble([fenced(c) for c in candidates]) if len(candidates) > 1 else 0
        return fenced(self.test(candidates[chosen]))

    def answers(self) -> list[dict[str, str]]:
        found = []
        for index, template in enumerate(self.prompts["answer_generate"]):
            text, step = self.call("answer_generate", "AnswerGenerate",
                                   fill(template, "answer_generate", problem=self.problem), candidate=index)
            answer = xml_field(text, "answer")
            thought = xml_field(text, "thought") or ""
            if answer is None:
                step["metadata"]["fallback"] = "no <answer> field: the whole answer is taken"
                answer = text.strip()
            step["metadata"]["answer"] = answer
            found.append({"thought": thought, "answer": answer})
        return found

    def choose(self, candidates: list[dict[str, str]]) -> str:
        if len(candidates) == 1:
            return candidates[0]["answer"]
        solutions = [(c["thought"] + "\n" if c["thought"] else "") + f"Answer: {c['answer']}" for c in candidates]
        return candidates[self.sc_ensemble(solutions)]["answer"]

    def math(self) -> str:
        candidates = self.answers()
        analysis = candidates[0]["thought"] or candidates[0]["answer"]
        computed = self.programmer(analysis)
        if computed is not None:
            code, output = computed
            candidates.append({"thought": f"Computed by this program:\n{fenced(code)}", "answer": output})
        return self.choose(candidates)

    def qa(self) -> str:
        return self.choose(self.answers())


class ToolWorkflow(Workflow):
    """A BFCL multi-turn episode as an AFlow workflow, per user turn: custom x N (candidate plans of calls) ->
    sc_ensemble (the most consistent plan) -> caller, the function-calling operator, with the offered functions as
    tools on the sandbox's tool server (`_bfcl_tools.calling_loop`: each call a `tool` step of the caller)."""

    def __init__(self, episode: dict[str, Any]):
        import _bfcl_tools

        super().__init__(episode)
        self.server = _bfcl_tools.ToolServer(episode["task"])

    def turn_problem(self, request: str) -> str:
        return fill(self.prompts["problem"], "problem", request=request, results=self.server.made()).rstrip()

    def turn(self, turn: int, request: str) -> None:
        import _bfcl_tools

        self.problem = self.turn_problem(request)
        plans = [self.call("custom", "CustomPlan", fill(template, "custom", problem=self.problem), candidate=index,
                           turn=turn)[0] for index, template in enumerate(self.prompts["custom"])]
        chosen = self.sc_ensemble(plans, turn=turn) if len(plans) > 1 else 0
        messages = [{"role": "user", "content": fill(self.prompts["caller"], "caller", problem=self.problem,
                                                     plan=plans[chosen].strip())}]
        _bfcl_tools.calling_loop(self, self.server, "caller", "CallFunctions", messages, turn,
                                 int(self.cfg.get("max_calls_per_turn", 6)))

    def tool_use(self) -> None:
        import _bfcl_tools

        for turn, request in _bfcl_tools.turns_to_run(self.episode):
            self.server.start_turn(turn)  # miss_func: a held-back function is offered from its turn on
            self.add("user", "human", "user", request, time.time(),
                     metadata={"turn": turn, **({"workflow": "tool_use"} if turn == 0 else {})})
            self.turn(turn, request)


def run_tools(episode: dict[str, Any]) -> dict[str, Any]:
    import openai

    flow = ToolWorkflow(episode)

    def collected() -> dict[str, Any]:
        final = next((s["content"] for s in reversed(flow.steps) if s["agent"] == "caller" and s["kind"] == "agent"
                      and s["content"]), None)
        return {"steps": list(flow.steps), "final_answer": final, "framework_version": openai.__version__}

    return _episode.kept_steps(flow.tool_use, collected)


def run(episode: dict[str, Any]) -> dict[str, Any]:
    import openai

    flow = Workflow(episode)
    cfg = episode["config"]
    flow.add("user", "human", "task", cfg["problem"], time.time(),
             metadata={"workflow": cfg["workflow"], "visible_tests": len(cfg.get("visible_tests") or [])})
    result: dict[str, Any] = {"final_answer": None, "framework_version": openai.__version__}
    workflows = {"coding": flow.coding, "math": flow.math, "qa": flow.qa}
    if cfg["workflow"] not in workflows:
        raise ValueError(f"episode.json config.workflow {cfg['workflow']!r} is not one of {sorted(workflows)}")

    def work() -> None:
        result["final_answer"] = workflows[cfg["workflow"]]()

    return _episode.kept_steps(work, lambda: {**result, "steps": list(flow.steps)})


if __name__ == "__main__":
    _episode.main(lambda episode: run_tools(episode) if episode["config"].get("tools") else run(episode))
