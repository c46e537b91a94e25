"""Code answers (MBPP, MBPP+, HumanEval, HumanEval+, KodCode, custom): run the benchmark's tests in a sandbox.

The verifier never runs candidate code in this process: it sends `_harness.py` (standard library only)
with `spec.json` and `candidate.py` to `sandbox.run(code=...)` and reads back one result line.

Which tests run is decided by `task.metadata["harness"]`:
- `asserts`: `tests` (assert statements, each run on its own), optional `test_setup` (imports).
- `humaneval`: `test` (defines `check(candidate)`) and `entry_point`.
- `evalplus`: `entry_point`, `canonical_solution`, `base_input`, `plus_input`, `atol`, optional
  `decode` / `oracle`: expected outputs come from the canonical solution, run in the same sandbox.
- `pytest`: `test` (a pytest module that imports from `solution`).
`metadata["prefix"]` (HumanEval's prompt) is put before the candidate code; a candidate that does not
define `entry_point` at top level is treated as a completion of the prefix (a function body).

Infrastructure failures are NOT verdicts: an exception from the sandbox, or a canonical solution that
fails, raises; only the candidate's own behaviour (wrong output, exception, timeout, memory, exit
without a result) makes a failed verdict.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import secrets
from pathlib import Path
from typing import Any, Literal, NamedTuple

from rootstep.model import Task, Verdict

from ._errors import BenchmarkError
from ._registry import verifier

HARNESS_SOURCE = (Path(__file__).with_name("_harness.py")).read_text(encoding="utf-8")

_FENCE = re.compile(r"```[ \t]*(?P<language>[\w+#.-]*)[^\n]*\n(?P<fenced>.*?)(?:```|\Z)"
                    r"|<code>(?P<tagged>.*?)(?:</code>|\Z)", re.DOTALL)
"""A markdown fence (its language tag, its code) or a `<code>` block, smolagents' (1.26) code block tags: its
CodeAgent asks for `<code>...</code>`, stops at `</code>` and adds the tag back to the step."""
_INNER_FENCE = re.compile(r"\A\s*```[ \t]*(?P<language>[\w+#.-]*)[^\n]*\n(?P<fenced>.*?)(?:```|\Z)", re.DOTALL)
_PY_LANGS = {"", "python", "py", "python3", "py3", "ipython", "pycon"}


class CodeBlock(NamedTuple):
    """A code block of a text: where it sits (`start`, `end`), its language tag (lower case), its code, whether it is
    a `<code>` block (`tagged`) rather than a markdown fence, and where its code sits in the text (`code_at`, the
    code as written: `code` of a `<code>` block is normalised to one trailing newline)."""
    start: int
    end: int
    language: str
    code: str
    tagged: bool = False
    code_at: tuple[int, int] = (0, 0)

    @property
    def python(self) -> bool:
        return self.language in _PY_LANGS

    def written(self, code: str) -> str:
        """`code` as a Python block of this block's form: a `<code>` block stays one (smolagents reads markdown only
        when a step has no `<code>` block at all), anything else is a ```python fence."""
        code = code.strip("\n")
        return f"<code>\n{code}\n</code>" if self.tagged else f"```python\n{code}\n```"


def code_blocks(text: str) -> list[CodeBlock]:
    """The code blocks of `text` in order: markdown fences and `<code>` blocks (an unterminated last block runs to
    the end). A `<code>` block is Python (smolagents runs it as such); a fence written inside one is its code."""
    blocks = []
    for m in _FENCE.finditer(text):
        if m.group("tagged") is None:
            blocks.append(CodeBlock(m.start(), m.end(), m.group("language").lower(), m.group("fenced"),
                                    code_at=m.span("fenced")))
            continue
        code = m.group("tagged")
        inner = _INNER_FENCE.match(code)
        if inner is not None and not code[inner.end():].strip():
            at = m.start("tagged")
            blocks.append(CodeBlock(m.start(), m.end(), inner.group("language").lower(), inner.group("fenced"), True,
                                    (at + inner.start("fenced"), at + inner.end("fenced"))))
        else:
            blocks.append(CodeBlock(m.start(), m.end(), "", code.strip("\n") + "\n" if code.strip() else code, True,
                                    m.span("tagged")))
    return blocks


def defines(code: str, name: str | None) -> bool:
    """Whether `code` defines the function or class `name` at the start of a line."""
    if not name:
        return False
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(|^class\s+{re.escape(name)}\b", code, re.M) is not None


def writes(code: str, name: str | None) -> bool:
    """Whether `code` defines `name` (`defines`) or writes it out in another language's or pseudo-code's keyword
    (`function name(`, `func name(`, `fn name(`): the 0.5B's AgentPrune analyst designed HumanEval/38's
    `decode_cyclic` as `function decode_cyclic(s: str):` with the encoder's body (seed 23), a wrong version of the
    task's function although no Python parser reads it."""
    if defines(code, name):
        return True
    return bool(name) and re.search(rf"^\s*(?:function|func|fn)\s+{re.escape(str(name))}\s*\(", code, re.M) is not None


def asserts_on(code: str, name: str | None) -> bool:
    """Whether `code` is a test of `name`: it parses, does not write `name` itself (`writes`), and has an `assert`
    whose condition calls `name` (MetaGPT's tester: `assert intersection((1, 2), (2, 3)) == "NO"`)."""
    if not name or writes(code, name):
        return False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Assert) and any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name
        for call in ast.walk(node.test)) for node in ast.walk(tree))


def _compiles(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError):
        return False


def extract_code(text: str, entry_point: str | None = None) -> tuple[str, str]:
    """(code, how) from an agent's answer.

    - No markdown fence: the text itself (leading blank lines and trailing whitespace removed; leading
      indentation kept, since a HumanEval completion starts indented).
    - Fenced blocks (```python, ```py, or no language; an unterminated last fence runs to the end):
      the last block that defines `entry_point`; else all Python blocks joined, when that compiles;
      else the longest block. Blocks in other languages (```bash, ```text) are ignored.
    """
    blocks = [(b.language, b.code) for b in code_blocks(text)]
    if not blocks:
        return text.strip("\n").rstrip() + "\n", "raw text"
    python = [code for lang, code in blocks if lang in _PY_LANGS]
    if not python:
        return text.strip("\n").rstrip() + "\n", "raw text (no python fence)"
    defining = [code for code in python if defines(code, entry_point)]
    if defining:
        return defining[-1].rstrip() + "\n", "last fenced block defining the entry point"
    joined = "\n\n".join(code.rstrip() for code in python) + "\n"
    if len(python) > 1 and _compiles(joined):
        return joined, f"{len(python)} fenced blocks joined"
    return max(python, key=len).rstrip() + "\n", "longest fenced block"


_FINAL_ANSWER = "def final_answer(answer):\n    print(answer)\n\n\n"
"""smolagents' `final_answer` tool, as a program run outside the agent states it: a CodeAgent's step ends with
`final_answer(result)`, which gives `result` as the agent's answer; run bare, the call is a NameError and the
step would state nothing."""


def _calls_undefined(tree: ast.Module, name: str) -> bool:
    """Whether `tree` calls `name` and neither defines nor imports it."""
    called = defined = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            called = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            defined = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            defined = True
        elif isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            defined = True
    return called and not defined


def with_final_answer(code: str) -> str:
    """`code` with smolagents' `final_answer` defined before it (printing its answer) when it calls `final_answer`
    and neither defines nor imports it; else `code` as it is (also when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    return _FINAL_ANSWER + code if _calls_undefined(tree, "final_answer") else code


def build_program(answer: str, task: Task) -> tuple[str, str]:
    """(program, how): the candidate code, with `metadata["prefix"]` before it when the task has one."""
    entry_point = task.metadata.get("entry_point")
    code, how = extract_code(answer, entry_point)
    code = with_final_answer(code)  # a smolagents step's block ends `final_answer(f(...))`: not a NameError here
    prefix = task.metadata.get("prefix")
    if not prefix:
        return code, how
    if defines(code, entry_point):
        return prefix.rstrip() + "\n\n" + code, how + "; after the prompt"
    return prefix + code, how + "; as a completion of the prompt"


def _spec(task: Task, marker: str, per_test_timeout: float, inputs: str) -> dict[str, Any]:
    meta = task.metadata
    harness = meta.get("harness")
    spec: dict[str, Any] = {"mode": harness, "marker": marker, "per_test_timeout": per_test_timeout}
    if harness == "asserts":
        tests = meta.get("tests")
        if not isinstance(tests, list) or not tests:
            raise BenchmarkError(f"task {task.task_id}: metadata.tests must be a non-empty list of asserts")
        spec |= {"tests": tests, "setup": meta.get("test_setup", "")}
    elif harness in ("humaneval", "pytest"):
        if not meta.get("test"):
            raise BenchmarkError(f"task {task.task_id}: metadata.test is missing")
        spec |= {"test": meta["test"], "entry_point": meta.get("entry_point")}
    elif harness == "evalplus":
        chosen = {"base": meta["base_input"], "plus": meta["plus_input"], "all": meta["base_input"] + meta["plus_input"]}
        spec |= {
            "entry_point": meta["entry_point"],
            "canonical": meta["canonical_solution"],
            "inputs": chosen[inputs],
            "atol": float(meta.get("atol") or 0),
            "decode": meta.get("decode"),
            "oracle": meta.get("oracle"),
        }
    else:
        raise BenchmarkError(f"task {task.task_id}: metadata.harness {harness!r} is not asserts|humaneval|evalplus|pytest")
    return spec


def _result_line(stdout: str, marker: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker + " "):
            try:
                return json.loads(line[len(marker) + 1 :])
            except json.JSONDecodeError:
                return None
    return None


_EXPECTED_CACHE: dict[str, str | None] = {}
"""sha256 of (canonical, inputs, decoding, oracle) -> the canonical outputs, pickled and base64-encoded
(None: not picklable, so each candidate run recomputes them). Bytes are only passed back into a sandbox;
this process never unpickles them."""


def _expected_outputs(task: Task, spec: dict[str, Any], sandbox: Any, timeout: float) -> str | None:
    """The canonical solution's outputs for an EvalPlus task, computed once per process in the sandbox."""
    key_fields = {k: spec.get(k) for k in ("entry_point", "canonical", "inputs", "decode", "oracle", "per_test_timeout")}
    key = hashlib.sha256(json.dumps(key_fields, sort_keys=True, default=repr).encode()).hexdigest()
    if key in _EXPECTED_CACHE:
        return _EXPECTED_CACHE[key]
    marker = "__ROOTSTEP_RESULT_" + secrets.token_hex(8) + "__"
    ref_spec = spec | {"mode": "evalplus_expected", "marker": marker}
    result = sandbox.run(code=HARNESS_SOURCE, files={"spec.json": json.dumps(ref_spec), "candidate.py": ""}, timeout=timeout)
    parsed = _result_line(result.stdout, marker)
    if result.timed_out or result.oom_killed or parsed is None or "harness_error" in parsed:
        why = (
            f"timed out after {result.duration_s:.0f}s (raise SandboxLimits.timeout_s)" if result.timed_out
            else "out of memory (raise SandboxLimits.memory_mb)" if result.oom_killed
            else (parsed or {}).get("harness_error") or f"exit {result.exit_code}: {result.stderr[-500:]}"
        )
        raise BenchmarkError(f"task {task.task_id}: the canonical solution could not be run in the sandbox: {why}")
    _EXPECTED_CACHE[key] = parsed.get("expected_b64")
    return _EXPECTED_CACHE[key]


_REFERENCE_FITS: dict[str, bool] = {}


def _check_reference_fits(task: Task, spec: dict[str, Any], sandbox: Any, timeout: float) -> None:
    """Raise `BenchmarkError` when the canonical solution, run as the candidate, also exceeds the
    sandbox's memory or time: then the task cannot be verified there, whatever the answer."""
    key = hashlib.sha256(json.dumps([task.benchmark, task.task_id, spec["canonical"], timeout]).encode()).hexdigest()
    if key not in _REFERENCE_FITS:
        ref = sandbox.run(
            code=HARNESS_SOURCE,
            files={"spec.json": json.dumps(spec), "candidate.py": spec["canonical"]},
            timeout=timeout,
        )
        _REFERENCE_FITS[key] = not (ref.timed_out or ref.oom_killed)
    if not _REFERENCE_FITS[key]:
        raise BenchmarkError(
            f"task {task.task_id}: even the canonical solution runs out of time or memory in this sandbox; "
            "raise SandboxLimits.memory_mb / timeout_s to verify it"
        )


@verifier("code_tests")
def code_tests(
    answer: str | None,
    task: Task,
    *,
    sandbox: Any,
    timeout: float = 60.0,
    per_test_timeout: float = 10.0,
    inputs: Literal["base", "plus", "all"] = "all",
) -> Verdict:
    """The benchmark's tests pass on the agent's code, run inside `sandbox` (a `rootstep.sandboxes.Sandbox`).

    Args:
        answer: the agent's answer; code is taken from markdown fences (see `extract_code`).
        task: a code task (see the module docstring for the metadata each harness reads).
        sandbox: where the code runs; exceptions it raises propagate (infrastructure is not a verdict).
        timeout: seconds for the whole sandbox run; running out is a failure (`reason: timeout`).
        per_test_timeout: seconds for each test (MBPP+/HumanEval+: this, or 4x the canonical
            solution's time on that input if longer); a test that runs out fails with `timeout`.
        inputs: MBPP+/HumanEval+ only: the `base` inputs, the `plus` inputs, or `all` (default, the
            EvalPlus "plus" score).

    Success means every test passed; score is the fraction of tests that passed. Output printed by the
    candidate (stdout or stderr) never affects the verdict. An answer with no code fails.
    """
    if not answer or not answer.strip():
        return Verdict(success=False, score=0.0, details={"reason": "empty answer"})
    program, how = build_program(answer, task)
    marker = "__ROOTSTEP_RESULT_" + secrets.token_hex(8) + "__"
    spec = _spec(task, marker, per_test_timeout, inputs)
    files: dict[str, str | bytes] = {"spec.json": json.dumps(spec), "candidate.py": program}
    if spec["mode"] == "evalplus":
        expected = _expected_outputs(task, spec, sandbox, max(timeout, 120.0))
        if expected is not None:
            files["expected.b64"] = expected
    result = sandbox.run(code=HARNESS_SOURCE, files=files, timeout=timeout)
    details: dict[str, Any] = {
        "harness": spec["mode"],
        "code_from": how,
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 3),
        "isolated": result.isolated,
    }
    if spec["mode"] == "evalplus":
        details["inputs"] = inputs
    if (result.timed_out or result.oom_killed) and spec["mode"] == "evalplus" and "expected.b64" not in files:
        # the canonical solution ran in the same process: make sure it fits before blaming the candidate
        _check_reference_fits(task, spec, sandbox, timeout)
    if result.timed_out:
        return Verdict(success=False, score=0.0, details=details | {"reason": "timeout", "timeout_s": round(result.duration_s, 1)})
    if result.oom_killed:
        return Verdict(success=False, score=0.0, details=details | {"reason": "out of memory"})
    parsed = _result_line(result.stdout, marker)
    if parsed is None:
        return Verdict(
            success=False,
            score=0.0,
            details=details | {"reason": "the program exited without a test result", "stderr": result.stderr[-1000:]},
        )
    if "harness_error" in parsed:
        if str(parsed["harness_error"]).startswith(("canonical solution", "unsupported")):
            raise BenchmarkError(f"task {task.task_id}: {parsed['harness_error']} (the benchmark data is at fault)")
        return Verdict(success=False, score=0.0, details=details | {"reason": "harness error: " + parsed["harness_error"]})
    total, passed = int(parsed.get("total", 0)), int(parsed.get("passed", 0))
    details |= {"passed": passed, "total": total, "failures": parsed.get("failures", [])}
    for key in ("load_error", "skipped_inputs"):
        if key in parsed:
            details[key] = parsed[key]
    if total == 0:
        return Verdict(success=False, score=0.0, details=details | {"reason": "no test was run"})
    return Verdict(success=passed == total, score=passed / total, details=details)
