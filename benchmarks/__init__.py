"""Task sets and their verifiers (the success function Omega).

    from rootstep.benchmarks import load_tasks, verify
    tasks = load_tasks("gsm8k", limit=10, seed=0)          # shuffle, slice, limit
    verdict = verify(tasks[0], "... so the answer is 18.")  # Verdict(success, score, details)
    verdict = verify(mbpp_task, answer, sandbox=get_sandbox())  # code runs in the sandbox

Verifiers: `numeric`, `math`, `code_tests`, `qa`, `exact`, `gaia`, `bfcl_multi_turn` (`get_verifier(name)`; BFCL's
reads the calls a run executed, `executed_calls_answer`, not its answer text: `reads_calls`).
Benchmarks: `list_benchmarks()`; a new one is a JSONL file plus a verifier name (`add_benchmark`).
HotpotQA's paragraphs are searched offline with `search` / `task_search`. See docs/benchmarks.md.
Answer contracts (`answer_contract(task)`: the answer line prompts ask for and verifiers read) and suspect
verdicts (`suspect_reason`, `same_answer`: a failure or a fix that is the check's fault, not an agent's).
What a math/QA text's fenced Python prints (`program_output`, run by `sandbox_runner` in a sandbox) counts
as stated by it in `gives_answer` / `answer_leak`.
"""

from ._answer import (
    AnswerContract,
    answer_contract,
    answer_spans,
    final_answer_span,
    printed_output,
    program_answer,
    team_answer,
    without_code,
)
from ._bfcl import (
    CallStep,
    call_key,
    calls_answer,
    executed_calls_answer,
    function_summaries,
    matching,
    parse_call,
    reads_calls,
    task_functions,
)
from ._code import CodeBlock, asserts_on, build_program, code_blocks, defines, extract_code, writes
from ._custom import add_benchmark, validate_file
from ._errors import BenchmarkError, ValidationError
from ._gaia import gaia_match
from ._math import extract_math_answer, last_boxed, math_equal, normalize_latex
from ._numeric import extract_number, parse_number
from ._assertions import false_assertion
from ._program_output import RunProgram, program_output, python_program, sandbox_runner
from ._qa import exact_match, f1_score, normalize_answer
from ._registry import (
    BENCHMARKS,
    VERIFIERS,
    BenchmarkInfo,
    VerifierInfo,
    benchmark,
    count_tasks,
    get_benchmark,
    get_verifier,
    list_benchmarks,
    list_verifiers,
    load_tasks,
    select,
    verifier,
    verifier_info,
    verify,
)
from ._search import Hit, Paragraph, search, task_search
from ._visible_tests import visible_tests
from ._suspect import (
    Verify,
    answer_leak,
    code_key,
    gives_answer,
    is_suspect,
    mark_suspect,
    plain_failure,
    planted_answer,
    right_answer_in,
    same_answer,
    suspect_reason,
    verify_quietly,
)

__all__ = [
    "BENCHMARKS",
    "VERIFIERS",
    "AnswerContract",
    "BenchmarkError",
    "BenchmarkInfo",
    "CallStep",
    "CodeBlock",
    "Hit",
    "Paragraph",
    "RunProgram",
    "ValidationError",
    "VerifierInfo",
    "Verify",
    "add_benchmark",
    "answer_contract",
    "answer_leak",
    "answer_spans",
    "asserts_on",
    "benchmark",
    "build_program",
    "call_key",
    "calls_answer",
    "code_blocks",
    "code_key",
    "defines",
    "count_tasks",
    "exact_match",
    "executed_calls_answer",
    "extract_code",
    "extract_math_answer",
    "extract_number",
    "f1_score",
    "function_summaries",
    "false_assertion",
    "final_answer_span",
    "gaia_match",
    "get_benchmark",
    "get_verifier",
    "gives_answer",
    "is_suspect",
    "last_boxed",
    "list_benchmarks",
    "list_verifiers",
    "load_tasks",
    "mark_suspect",
    "matching",
    "math_equal",
    "normalize_answer",
    "normalize_latex",
    "parse_call",
    "parse_number",
    "plain_failure",
    "planted_answer",
    "printed_output",
    "program_answer",
    "program_output",
    "reads_calls",
    "python_program",
    "team_answer",
    "right_answer_in",
    "same_answer",
    "sandbox_runner",
    "search",
    "select",
    "suspect_reason",
    "task_functions",
    "task_search",
    "validate_file",
    "verify_quietly",
    "verifier",
    "verifier_info",
    "verify",
    "visible_tests",
    "without_code",
    "writes",
]
