"""The scheduler (`rootstep.flows._scheduler`) and work budgets (`rootstep.annotation.Budget`, `Meter.cut`).

Searches on a slow model that every search shares: admitted one at a time (FIFO), each finishes within its
work budget whatever the queue did to the wall clock, and a search that the outer wall clock cuts says so.
The analyzer is a scripted model with latency whose calls hold the scheduler's call slot; the replays are the
`Ledger` simulation of tests/test_annotation_core.py, slowed down and holding an episode slot.
"""

from __future__ import annotations

import threading
import time

import pytest

from rootstep.annotation import Budget, find_decisive_step
from rootstep.flows._scheduler import REMOTE_SEARCHES, Scheduler, Slots, fitted_searches
from rootstep.flows._session import Stopped
from rootstep.gateway import register_script
from rootstep.gateway import Script
from rootstep.gateway import Chat

from tests.test_annotation_core import Ledger, at_step, decline, diag


def test_slots_are_handed_out_in_arrival_order():
    slots = Slots(1)
    slots.acquire()
    order: list[int] = []
    arrived: list[threading.Event] = []
    threads = []
    for i in range(4):
        ready = threading.Event()
        arrived.append(ready)

        def wait(i: int = i, ready: threading.Event = ready) -> None:
            ready.set()
            with slots.held():
                order.append(i)

        t = threading.Thread(target=wait)
        t.start()
        ready.wait(5)
        while slots.waiting < i + 1:  # each thread is in the queue before the next one arrives
            time.sleep(0.01)
        threads.append(t)
    slots.release()
    for t in threads:
        t.join(10)
    assert order == [0, 1, 2, 3]
    assert slots.busy == 0 and slots.waiting == 0


def test_a_waiting_unit_gives_up_when_the_run_stops():
    slots = Slots(1)
    slots.acquire()
    stop = threading.Event()
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            slots.acquire(lambda: Stopped("stopped") if stop.is_set() else None)
        except Stopped as exc:
            raised.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    while slots.waiting < 1:
        time.sleep(0.01)
    stop.set()
    t.join(10)
    assert raised and slots.waiting == 0 and slots.busy == 1
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)
    slots.release()
    with pytest.raises(RuntimeError, match="released more often"):
        slots.release()


def test_searches_fit_the_machine():
    assert fitted_searches(["local/qwen2.5-coder-1.5b", "local/qwen2.5-coder-0.5b"], cores=2) == 2
    assert fitted_searches(["local/qwen2.5-coder-1.5b", "openai/gpt-4o"], cores=8) == 8
    assert fitted_searches(["openai/gpt-4o", "openai/gpt-4o-mini"], cores=2) == REMOTE_SEARCHES
    assert fitted_searches([None, "local/x"], cores=1) == 1
    scheduler = Scheduler(per_model=2, per_local_model=2, sandboxes=2, cores=2)
    assert scheduler.search_slots(["local/a"]).size == 2
    assert scheduler.search_slots(["openai/a"]).size == REMOTE_SEARCHES
    assert Scheduler(per_model=2, per_local_model=2, sandboxes=2, searches=3).search_slots(["local/a"]).size == 3


class SlowTeam:
    """A Ledger whose replays take `seconds` and hold an episode slot of the agents' model."""

    def __init__(self, scheduler: Scheduler, seconds: float):
        self.ledger = Ledger({3})
        self.scheduler, self.seconds = scheduler, seconds

    def replay(self, intervention):
        with self.scheduler.episode("scripted/slow-agents"):
            time.sleep(self.seconds)
            return self.ledger.replay(intervention)


class SlotChat:
    """The analyzer as the flows give it: every call holds a call slot of its model (`Scheduler.call`)."""

    def __init__(self, chat: Chat, scheduler: Scheduler):
        self.chat, self.scheduler = chat, scheduler
        self.model, self.usage = chat.model, chat.usage

    def __call__(self, prompt):
        with self.scheduler.call(self.chat.model):
            answer = self.chat(prompt)
        self.usage = self.chat.usage
        return answer


def _analyzer(name: str, latency: float) -> None:
    def fn(messages, params):
        prompt = messages[-1]["content"]
        return decline() if at_step(prompt) is not None else diag(3)

    register_script(name, Script(fn=fn, latency_s=latency))


def test_four_searches_on_a_slow_shared_model_all_finish_within_their_work_budgets():
    """Four failures searched at once on one slow analyzer (one call at a time) and slow replays: the scheduler
    admits one search at a time (as on a 2-core machine with the offline models), each search's meter starts at
    its admission, and every search finishes with its label and the same work as a search alone: none is cut."""
    _analyzer("slow-shared-analyzer", 0.15)
    scheduler = Scheduler(per_model=1, per_local_model=1, sandboxes=1, searches=1)
    budget = Budget.for_pipeline()  # work budgets sized to the run, and the outer wall clock
    results: dict[int, object] = {}
    spans: dict[int, tuple[float, float]] = {}

    def search(i: int) -> None:
        team = SlowTeam(scheduler, 0.1)
        run = team.ledger.trajectory()
        analyzer = SlotChat(Chat("scripted/slow-shared-analyzer"), scheduler)
        with scheduler.search(["local/qwen2.5-coder-1.5b"]):
            started = time.perf_counter()
            results[i] = find_decisive_step(run, run.verdict, None, analyzer, team.replay, budget)
            spans[i] = (started, time.perf_counter())

    threads = [threading.Thread(target=search, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == [0, 1, 2, 3]
    alone = None
    for i, result in results.items():
        a = result.annotation
        stats = a.search_stats.model_dump()
        assert (a.status, a.verified, a.step) == ("labelled", True, 3), a.evidence.notes
        assert stats["cut_by"] is None and not any(n.startswith("cut:") for n in a.evidence.notes)
        work = (stats["replays"], stats["control_replays"], stats["analyzer_calls"], stats["live_calls"])
        alone = alone or work
        assert work == alone  # the same work whatever the queue: the budget measures the search, not the machine
        assert stats["seconds"] <= spans[i][1] - spans[i][0] + 0.5  # the meter counts from admission
    ordered = sorted(spans.values())
    assert all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:]))  # one search at a time, never overlapping


def test_a_search_cut_by_the_outer_wall_clock_says_so():
    """The analyzer's first answer takes longer than the outer wall clock: its fix is replayed (work already
    started is finished), then the search stops; it is not a label, and its record says which limit cut it and
    what it had done."""
    ledger = Ledger({3})
    run = ledger.trajectory()

    def answer_step5(messages, params):
        return diag(5, fix="value = 0")  # a wrong fix: the run still fails, the search would go on

    register_script("slow-wrong-fix", Script(fn=answer_step5, latency_s=0.6))
    result = find_decisive_step(run, run.verdict, None, Chat("scripted/slow-wrong-fix"), ledger.replay,
                                Budget.for_pipeline(max_seconds=0.3))
    a = result.annotation
    stats = a.search_stats.model_dump()
    assert a.status == "unresolved" and not a.verified
    assert stats["cut_by"] == "wall_clock" and "outer wall clock of 0.3s" in stats["cut_reason"]
    assert stats["replays"] == 1 and stats["analyzer_calls"] == 1 and stats["seconds"] >= 0.3
    assert any(n.startswith("cut: cut by the outer wall clock") for n in a.evidence.notes)


def test_a_work_budget_cut_is_named_by_its_limit():
    ledger = Ledger({3})
    run = ledger.trajectory()
    _analyzer("budgeted", 0.0)
    result = find_decisive_step(run, run.verdict, None, Chat("scripted/budgeted"), ledger.replay,
                                Budget(max_replays=0))
    stats = result.annotation.search_stats.model_dump()
    assert stats["cut_by"] == "replays" and stats["cut_stopped"] == "the ranked search"
    assert result.annotation.status == "unresolved" and stats["replays"] == 0
    result = find_decisive_step(run, run.verdict, None, Chat("scripted/budgeted"), ledger.replay,
                                Budget(max_tokens=1))
    stats = result.annotation.search_stats.model_dump()
    assert stats["cut_by"] == "tokens" and "token budget of 1 spent" in stats["cut_reason"]


def test_the_pipeline_summary_and_the_quality_views_say_which_limit_cut_which_search(tmp_path):
    from rootstep.flows._searches import AnnotatedRun
    from rootstep.model import SearchStats
    from rootstep.flows.pipeline import PipelineReport
    from rootstep.model import Annotation, Evidence
    from rootstep.warehouse import Warehouse

    def row(task: str, status: str, stats: SearchStats) -> AnnotatedRun:
        return AnnotatedRun(method="counterfactual", run_id=f"run-{task}", framework="ag2", benchmark="math500",
                            task_id=task, status=status, stats=stats)

    cut = SearchStats(replays=2, analyzer_calls=5, seconds=3600.4, cut_by="wall_clock",
                      cut_reason="cut by the outer wall clock of 3600s", cut_stopped="the earlier scan before step 5")
    report = PipelineReport(annotated=[row("a", "unresolved", cut), row("b", "labelled", SearchStats(replays=3)),
                                       row("c", "unproven_earliest", SearchStats(replays=9, analyzer_calls=12,
                                                                                 seconds=800, cut_by="replays")),
                                       row("d", "unresolved", SearchStats(replays=1, analyzer_calls=4, seconds=240,
                                                                          cut_by="open_steps"))])
    text = report.render()
    assert "cut by the outer wall clock: 1 search(es): counterfactual ag2/a (unresolved): 2 replays, 5 analyzer " \
           "calls, 3600 s" in text
    assert "cut by the replay budget: 1 search(es): counterfactual ag2/c (unproven_earliest): 9 replays" in text
    assert "cut by a step left open (no label possible after it): 1 search(es): counterfactual ag2/d" in text
    assert report.counts()["cut_by_wall_clock"] == 1 and report.counts()["cut_by_tokens"] == 0
    assert report.counts()["cut_by_open_steps"] == 1
    from typing import get_args

    from rootstep.model import CUT_LIMIT_NAMES, CutLimit
    assert list(CUT_LIMIT_NAMES) == list(get_args(CutLimit))  # every limit named once, in the summary's order

    wh = Warehouse(str(tmp_path / "wh"))
    wh.write_annotations([
        Annotation(run_id=f"run-{r.task_id}", framework="ag2", benchmark="math500", method="counterfactual",
                   status="unresolved", annotator="local/qwen2.5-coder-1.5b", evidence=Evidence(reason=r.task_id),
                   search_stats=r.stats)
        for r in report.annotated if r.stats.cut_by is not None])
    cuts = wh.rows("SELECT * FROM search_cuts ORDER BY cut_by")
    assert [(c["cut_by"], c["searches"], c["mean_replays"], c["mean_analyzer_calls"]) for c in cuts] == [
        ("open_steps", 1, 1.0, 4.0), ("replays", 1, 9.0, 12.0), ("wall_clock", 1, 2.0, 5.0)]


def test_the_pipeline_summary_names_each_episode_it_could_not_collect_and_why():
    """A new user saw `collected 4 runs (0 new, 0 already stored, 4 errors)` and nothing else (BFCL on frameworks
    without a tool-use team): each error is listed with its framework, task and reason."""
    from rootstep.flows._searches import AnnotatedRun
    from rootstep.flows.collect import CollectedRun
    from rootstep.flows.pipeline import PipelineReport

    report = PipelineReport(
        collected=[CollectedRun(framework="metagpt", benchmark="bfcl", task_id="multi_turn_base_17", model="m",
                                error="the metagpt adapter has no tool-use team for bfcl tasks"),
                   CollectedRun(framework="ag2", benchmark="bfcl", task_id="multi_turn_base_118", model="m",
                                run_id="run_x", success=False, n_steps=17)],
        annotated=[AnnotatedRun(method="counterfactual", run_id="run_x", framework="ag2", benchmark="bfcl",
                                task_id="multi_turn_base_118", status="error", error="AdapterError: the sandbox failed")])
    text = report.render()
    assert "collected 2 runs (1 new, 0 already stored, 1 errors)" in text
    assert ("collect error metagpt/bfcl/multi_turn_base_17: the metagpt adapter has no tool-use team for bfcl tasks"
            in text)
    assert "annotation error counterfactual ag2/multi_turn_base_118: AdapterError: the sandbox failed" in text
