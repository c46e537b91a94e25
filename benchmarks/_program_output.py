"""What a math or QA text's program prints: the answer a code-writing team states by running code.

A coder whose team has an executor (AG2) states its answer through what its program prints: the text
`total = 2 * 30 * 4` / `print(total)` states 240, though its last number is 4. `program_output(text,
run_program)` reads that: the text's fenced Python blocks (```python, ```py or no language, or smolagents'
`<code>` blocks), joined in order as the executor runs them, are handed to `run_program(code) -> stdout or None`, and what they print
is the output. No fenced Python, code that does not compile, a run that fails (an exception, a non-zero
exit, a timeout) or prints nothing: no output (None).

`run_program` is the caller's: the annotation passes `sandbox_runner(...)` over the session's no-network
verification sandbox; pure tests pass a fake. Model-written code never runs in this process or on the host.
"""

from __future__ import annotations

import ast
import threading
from typing import Any, Callable

from ._code import code_blocks, with_final_answer

RunProgram = Callable[[str], "str | None"]
"""`code -> what it printed` (None: it failed or could not run)."""

PROGRAM_TIMEOUT_S = 5.0


def python_program(text: str) -> str | None:
    """The program of `text`'s fenced Python blocks, joined in order (as an executor runs them), or None
    when it has none or the joined blocks do not compile (a block of prose, a `>>>` session). A program that
    calls smolagents' `final_answer` without defining it gets a `final_answer` that prints its answer."""
    blocks = [b.code for b in code_blocks(text or "") if b.python]
    if not any(block.strip() for block in blocks):
        return None
    code = "\n\n".join(block.rstrip() for block in blocks) + "\n"
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    return with_final_answer(code)


def program_output(text: str, run_program: RunProgram | None) -> str | None:
    """What `text`'s program (`python_program`) prints when `run_program` runs it, stripped, or None (no
    runner, no program, a failed run, nothing printed). A runner that raises says nothing: None."""
    if run_program is None:
        return None
    code = python_program(text)
    if code is None:
        return None
    try:
        out = run_program(code)
    except Exception:  # noqa: BLE001 - a program that cannot be run states nothing
        return None
    if out is None:
        return None
    return out.strip() or None


def sandbox_runner(sandbox: Any, timeout: float = PROGRAM_TIMEOUT_S) -> RunProgram:
    """A `RunProgram` over `sandbox` (a `rootstep.sandboxes.Sandbox`, or a function that makes it on first
    use): `sandbox.run(code=..., timeout=timeout)`, its stdout when the run is `ok`, else None. Results are
    cached by code text (a fix is checked several times).

    Refused (None, nothing runs): a sandbox that is not isolated (the local fallback runs code on the host)
    or that lets code reach the network. A sandbox that cannot be made or raises (an infrastructure error)
    gives None, not cached; one that cannot be made is not asked again."""
    cache: dict[str, str | None] = {}
    lock = threading.Lock()
    state: dict[str, Any] = {}

    def get() -> Any:
        with lock:
            if "sandbox" not in state:
                try:
                    state["sandbox"] = sandbox if hasattr(sandbox, "run") else sandbox()
                except Exception:  # noqa: BLE001 - no sandbox (no Docker): no program output
                    state["sandbox"] = None
            return state["sandbox"]

    def run(code: str) -> str | None:
        if code in cache:
            return cache[code]
        box = get()
        if box is None or not _contained(box):
            return None
        try:
            result = box.run(code=code, timeout=timeout)
        except Exception:  # noqa: BLE001 - an infrastructure error is not the program's output
            return None
        out = result.stdout if result.ok and getattr(result, "isolated", True) else None
        cache[code] = out
        return out

    return run


def _contained(sandbox: Any) -> bool:
    from rootstep.sandboxes import LocalSandbox

    network = getattr(getattr(sandbox, "limits", None), "network", None)
    return not isinstance(sandbox, LocalSandbox) and getattr(network, "kind", "none") == "none"
