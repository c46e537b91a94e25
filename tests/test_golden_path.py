"""The golden-path matrix: for every framework x every benchmark it supports, a scripted team that works
correctly, in the format the framework's prompts ask for, and hands in the reference answer (the canonical
solution for code) is judged a success; the same team handing in a wrong answer (another number, a
broken program) is judged a failure, and that failure is not marked suspect.

Each cell runs one real task of `../shared/data` (chosen in tests/_golden_tasks.py) through the real
framework in its Docker image, every LLM call through the gateway to the scripted provider (the teams:
tests/_golden_teams.py). The answer a team writes is `adapter.answer_contract(task).format(value)`, the
contract the prompts render, never a form chosen because the verifier reads it: what is tested is that
the prompts' contract, the framework's final-answer extraction and the verifier agree.

Beside each scripted cell, real runs (tests/_golden_recorded.py): every reply of a run of the framework on the
local Qwen2.5-Coder-0.5B model, recorded once, right and wrong, replayed through the real framework; the verdict
must be what it was when recorded and a wrong answer a plain failure. Pairs without both recordings are named,
with the reason, in `_golden_recorded.LEFT`.

The episodes of the selected cells (`-k` narrows them) run concurrently in one session (a thread pool,
`ROOTSTEP_GOLDEN_WORKERS`, default 4) with one gateway and one verifier sandbox; each test then asserts
on its own cell, so a failure names the framework, the benchmark and the outcome.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import pytest

from rootstep.adapters import adapter_class, list_adapters
from rootstep.benchmarks import get_benchmark, list_benchmarks, load_tasks
from rootstep.model import Task, Trajectory

from ._golden_recorded import LEFT as NOT_RECORDED
from ._golden_recorded import Recording, load_recordings
from ._golden_tasks import CELLS, LEFT_OUT, Cell, answer_of
from ._golden_teams import TEAMS, Work

docker = pytest.mark.docker

_BY_ID = {cell.id: cell for cell in CELLS}
HEAVY_FIRST = ("metagpt", "owl")
"""Frameworks whose episodes cost the most (MetaGPT's import alone takes seconds): started first, so the
pool does not end on them."""


def _matrix() -> list[Any]:
    """Every (framework, benchmark) pair whose kinds match, as a pytest param: the chosen cell (a Cell
    without a task when none was chosen: its tests fail), or a skip naming the missing data (the shared
    data dir is not beside the clone). Benchmarks that cannot be fetched here (`LEFT_OUT`) have no cells."""
    params = []
    for framework in list_adapters():
        kinds = adapter_class(framework).task_kinds
        for info in list_benchmarks():
            if not info.builtin or info.kind not in kinds or info.name in LEFT_OUT:
                continue
            cell_id = f"{framework}-{info.name}"
            if not info.available():
                missing = ", ".join(str(p) for p in info.paths() if not p.exists())
                params.append(pytest.param(Cell(framework, info.name, ""), id=cell_id, marks=pytest.mark.skip(
                    reason=f"{info.name}: no data in the shared data dir (missing {missing}; source: {info.source})")))
            else:
                params.append(pytest.param(_BY_ID.get(cell_id, Cell(framework, info.name, "")), id=cell_id))
    return params


MATRIX = _matrix()
OUTCOMES = {"test_right_answer_succeeds": "right", "test_wrong_answer_fails_unsuspected": "wrong"}
RECORDINGS = load_recordings()
_RECORDED = {r.id: r for r in RECORDINGS}
REPLAYED = "recorded"
"""The outcome key of a recorded real run's replay in the `golden` results (its id says right or wrong)."""


def test_left_out_benchmarks_are_builtin_and_have_no_data_here():
    """The benchmarks without golden cells are built in and still have no data: when one's data arrives,
    this fails, so that its cells are chosen in tests/_golden_tasks.py instead of being silently absent."""
    builtin = {info.name: info for info in list_benchmarks() if info.builtin}
    for name, why in LEFT_OUT.items():
        assert name in builtin, f"{name} is not a built-in benchmark; take it off LEFT_OUT"
        assert not builtin[name].available(), (
            f"{name}'s data is here now ({', '.join(map(str, builtin[name].paths()))}): choose its golden cells in "
            f"tests/_golden_tasks.py and take it off LEFT_OUT (left out because: {why})")
        assert not any(cell.benchmark == name for cell in CELLS), f"{name} is left out but has cells"


@lru_cache(maxsize=None)
def _tasks(benchmark: str) -> dict[str, Task]:
    return {t.task_id: t for t in load_tasks(benchmark)}


def _task(cell: Cell) -> Task:
    if not cell.task_id:
        pytest.fail(f"{cell.id}: no golden task chosen for this supported cell (add it to tests/_golden_tasks.py)")
    found = _tasks(cell.benchmark).get(cell.task_id)
    assert found is not None, f"{cell.id}: task {cell.task_id!r} is not in {cell.benchmark}'s data"
    return found


@pytest.mark.parametrize("cell", MATRIX)
def test_every_cell_has_a_real_task_and_a_wrong_answer(cell):
    """Without Docker: the cell's task is in the shared data, and its wrong answer is really wrong (the
    verifier rejects it in the contract's form and accepts the reference) or its broken program still
    defines the entry point."""
    from rootstep.adapters import get_adapter
    from rootstep.benchmarks import verify
    from rootstep.benchmarks._code import extract_code

    task = _task(cell)
    right, wrong = answer_of(cell, task, True), answer_of(cell, task, False)
    assert wrong != right
    if task.kind == "coding":
        code, _ = extract_code(wrong, task.metadata["entry_point"])
        assert f"def {task.metadata['entry_point']}(" in code
    else:
        contract = get_adapter(cell.framework).answer_contract(task)
        assert verify(task, contract.format(right)).success and not verify(task, contract.format(wrong)).success


def _selected(request: pytest.FixtureRequest) -> set[tuple[str, str]]:
    """(cell id, outcome) of this module's episode tests that this session runs."""
    module = sys.modules[__name__]
    mine = [item for item in request.session.items if getattr(item, "module", None) is module]
    selected = {(item.callspec.params["cell"].id, OUTCOMES[item.originalname]) for item in mine
                if item.originalname in OUTCOMES and item.callspec.params["cell"].task_id}
    if any(item.originalname == "test_the_issues_ag2_math500_example_is_a_success" for item in mine):
        selected.add(("ag2-math500", "right"))
    selected |= {(item.callspec.params["recording"].id, REPLAYED) for item in mine
                 if item.originalname == "test_a_recorded_real_run_keeps_its_verdict"}
    return selected


def _framework(key: tuple[str, str]) -> str:
    return (_RECORDED[key[0]] if key[1] == REPLAYED else _BY_ID[key[0]]).framework


def _replay_recorded(recording: Recording, adapter: Any) -> Trajectory:
    """The recorded run again: each agent a scripted model serving its recorded replies in order (running out
    is an error naming the agent); afterwards every reply must have been served (the run took its path)."""
    from rootstep.gateway import register_script

    task = _tasks(recording.benchmark).get(recording.task_id)
    assert task is not None, f"{recording.id}: task {recording.task_id!r} is not in {recording.benchmark}'s data"
    prefix = f"golden-real-{recording.id}"
    scripts = {agent: register_script(f"{prefix}-{agent}", replies) for agent, replies in recording.scripts().items()}
    register_script(f"{prefix}-other", lambda m, p: AssertionError(f"{prefix}: a call from an agent the recording does not have"))
    t = adapter.run(task, f"scripted/{prefix}-other", agent_models={a: f"scripted/{prefix}-{a}" for a in scripts})
    unserved = {agent: f"{script.calls} of {len(script.responses or [])}" for agent, script in scripts.items()
                if script.calls != len(script.responses or [])}
    t.metadata["unserved_replies"] = unserved
    return t


def _run(cell: Cell, outcome: str, adapter: Any) -> Trajectory:
    from rootstep.gateway import register_script

    task = _task(cell)
    work = Work(task, adapter.answer_contract(task), answer_of(cell, task, outcome == "right"))
    prefix = f"golden-{cell.id}-{outcome}"
    agents = TEAMS[cell.framework](work)
    for agent, reply in agents.items():
        register_script(f"{prefix}-{agent}", reply)
    register_script(f"{prefix}-other", lambda m, p: AssertionError(f"{prefix}: a call from an agent the team does not have"))
    return adapter.run(task, f"scripted/{prefix}-other", agent_models={a: f"scripted/{prefix}-{a}" for a in agents})


@pytest.fixture(scope="module")
def golden(request, tmp_path_factory) -> dict[tuple[str, str], Any]:
    """Runs every selected (cell, outcome) episode: {(cell id, outcome): Trajectory, exception, or the
    reason to skip}."""
    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier
    from rootstep.gateway import Gateway, GatewayServer
    from rootstep.sandboxes import SandboxLimits, SandboxUnavailableError, get_sandbox

    try:  # EvalPlus tasks run their canonical solution too: room for both
        sandbox = get_sandbox("docker", limits=SandboxLimits(timeout_s=120, memory_mb=2048), pool=2)
    except SandboxUnavailableError as exc:
        pytest.skip(f"Docker sandbox unavailable: {exc}")
    gateway = Gateway(tmp_path_factory.mktemp("golden-journal"), fsync=False)
    server = GatewayServer(gateway).start()
    results: dict[tuple[str, str], Any] = {}
    adapters: dict[str, Any] = {}
    jobs = []
    for cell_id, outcome in sorted(_selected(request), key=lambda key: (_framework(key) not in HEAVY_FIRST, key)):
        framework = _framework((cell_id, outcome))
        if framework not in adapters:
            adapter = get_adapter(framework, gateway=server, verifier=default_verifier(sandbox), timeout_s=300)
            adapters[framework] = adapter if adapter.image_built() else (
                f"the {framework} image {adapter.image_tag()} is not built: run `rootstep frameworks build`")
        if isinstance(adapters[framework], str):
            results[(cell_id, outcome)] = adapters[framework]
        else:
            jobs.append(((cell_id, outcome), adapters[framework]))

    def run(job: tuple[tuple[str, str], Any]) -> tuple[Any, float]:
        (cell_id, outcome), adapter = job
        started = time.monotonic()
        try:
            if outcome == REPLAYED:
                return _replay_recorded(_RECORDED[cell_id], adapter), time.monotonic() - started
            return _run(_BY_ID[cell_id], outcome, adapter), time.monotonic() - started
        except Exception as exc:  # noqa: BLE001 - reported by the cell's own test
            return exc, time.monotonic() - started

    started = time.monotonic()
    workers = max(1, int(os.environ.get("ROOTSTEP_GOLDEN_WORKERS", "4")))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            timings = []
            for (key, _), (result, seconds) in zip(jobs, pool.map(run, jobs)):
                results[key] = result
                timings.append((seconds, " ".join(key)))
    finally:
        server.stop()
        gateway.close()
        sandbox.close()
    slowest = ", ".join(f"{name} {seconds:.0f} s" for seconds, name in sorted(timings, reverse=True)[:3])
    print(f"golden path: {len(jobs)} episodes in {time.monotonic() - started:.0f} s with {workers} workers "
          f"(slowest: {slowest})")
    return results


def _trajectory(golden: dict[tuple[str, str], Any], cell: Cell, outcome: str) -> Trajectory:
    _task(cell)
    return _result(golden, (cell.id, outcome))


def _result(golden: dict[tuple[str, str], Any], key: tuple[str, str]) -> Trajectory:
    result = golden[key]
    if isinstance(result, str):
        pytest.skip(result)
    if isinstance(result, BaseException):
        raise result
    assert "error" not in result.metadata, f"{key[0]} ({key[1]}): the framework failed:\n{result.metadata.get('traceback')}"
    return result


def _explain(t: Trajectory) -> str:
    return f"verdict {t.verdict.details}\nfinal answer:\n{t.final_answer}"


@docker
@pytest.mark.parametrize("cell", MATRIX)
def test_right_answer_succeeds(golden, cell):
    t = _trajectory(golden, cell, "right")
    assert t.verdict.success, f"{cell.id}: a correct team was judged a failure\n{_explain(t)}"
    if get_benchmark(cell.benchmark).kind == "coding":
        assert t.verdict.details["passed"] == t.verdict.details["total"]
    else:  # the verifier read exactly the answer the team stated, not another span of the text
        assert t.verdict.details["extracted"] == t.recording.task.ground_truth, _explain(t)


@docker
@pytest.mark.parametrize("cell", MATRIX)
def test_wrong_answer_fails_unsuspected(golden, cell):
    t = _trajectory(golden, cell, "wrong")
    assert not t.verdict.success, f"{cell.id}: a wrong answer was judged a success\n{_explain(t)}"
    assert t.verdict.details.get("suspect") is None, f"{cell.id}: an honest failure was marked suspect\n{_explain(t)}"
    if get_benchmark(cell.benchmark).kind == "coding":  # the program was found and ran: its tests failed
        assert t.verdict.details["total"] > 0 and t.verdict.details["passed"] < t.verdict.details["total"], _explain(t)
    else:  # the verifier read the team's wrong answer (not "no answer found")
        assert t.verdict.details["extracted"] == cell.wrong, _explain(t)


@docker
def test_the_issues_ag2_math500_example_is_a_success(golden):
    """Issue 13: "smallest integer x with f(x)=sqrt(x-1)/(x-2) real", ground truth 1; the coder's
    message ends `Answer: 1`, the critic agrees. It was judged "no answer found"; now a success."""
    cell = _BY_ID["ag2-math500"]
    assert cell.task_id == "test/algebra/2023.json"
    t = _trajectory(golden, cell, "right")
    assert "sqrt{x-1}" in t.question and t.ground_truth == "1"
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("executor", "human"), ("coder", "agent"), ("executor", "tool"), ("critic", "agent")]
    assert t.steps[1].content.endswith("Answer: 1") and "TERMINATE" in t.steps[3].content
    assert t.verdict.success and t.verdict.details["method"] == "answer_line"


# ------------------------------------------------------------------------------ recorded real runs


def _pairs() -> list[tuple[str, str]]:
    """(framework, benchmark) of every matrix cell that has data here."""
    return [(p.values[0].framework, p.values[0].benchmark) for p in MATRIX if not p.marks]


def test_every_pair_has_real_runs_right_and_wrong_or_says_why_not():
    """Each framework x benchmark of the matrix has a recorded right and a recorded wrong real run, or is named
    in `_golden_recorded.LEFT` with the reason; a pair named there that has both is taken off."""
    recorded = {(r.framework, r.benchmark, r.outcome) for r in RECORDINGS if not r.known_issue}
    pairs = _pairs()
    for framework, benchmark in pairs:
        missing = [o for o in ("right", "wrong") if (framework, benchmark, o) not in recorded]
        if missing:
            assert NOT_RECORDED.get((framework, benchmark)), (
                f"{framework}-{benchmark}: no recorded {' or '.join(missing)} real run, and no reason in "
                "tests/_golden_recorded.py LEFT (record it: python -m tests._golden_recorded record ...)")
        else:
            assert (framework, benchmark) not in NOT_RECORDED, f"{framework}-{benchmark} is recorded: take it off LEFT"
    assert set(NOT_RECORDED) <= set(pairs), set(NOT_RECORDED) - set(pairs)


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda r: r.id)
def test_a_recording_holds_real_model_replies_for_a_real_task(recording):
    """Without Docker: the fixture's replies came from a local model (the gateway journaled them as live,
    not simulated, calls: `recording_of` refuses anything else), its task is in the shared data, and its
    recorded verdict is the one its id names."""
    assert recording.model.startswith("local/") and recording.replies
    assert all(r.content is not None or r.tool_calls or r.error for r in recording.replies)  # "" is a real reply
    assert recording.task_id in _tasks(recording.benchmark)
    assert recording.success is (recording.outcome == "right") and recording.judgement
    assert recording.id.endswith("-misjudged") is bool(recording.known_issue)


@docker
@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda r: r.id)
def test_a_recorded_real_run_keeps_its_verdict(golden, recording, request):
    t = _result(golden, (recording.id, REPLAYED))
    why = f"{_explain(t)}\nrecorded: {recording.details}\nrecorded final answer:\n{recording.final_answer}"
    assert t.metadata["unserved_replies"] == {}, f"{recording.id}: the replay left recorded replies unserved\n{why}"
    if recording.known_issue:  # the recorded verdict is wrong: the right one is the other, once the contract is fixed
        request.applymarker(pytest.mark.xfail(reason=f"{recording.id}: {recording.known_issue}", strict=True))
        assert t.verdict.success is not recording.success, f"{recording.id}: {recording.known_issue}\n{why}"
        return
    assert t.verdict.success is recording.success, f"{recording.id}: the verdict changed\n{why}"
    for key in ("extracted", "passed", "total"):
        if key in recording.details:
            assert t.verdict.details.get(key) == recording.details[key], f"{recording.id}: {key} changed\n{why}"
    if not recording.success:
        assert t.verdict.details.get("suspect") is None, f"{recording.id}: a real wrong answer was marked suspect\n{why}"
