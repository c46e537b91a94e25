"""OWL-Workforce episode: camel-ai's `Workforce` (camel.societies.workforce), run inside its sandbox image.

The society is camel's own: a task planner (`planner`, the Workforce's task agent: it decomposes the
task and evaluates the quality of every finished subtask), a coordinator (`coordinator`: it assigns
subtasks to workers with their dependencies) and two `SingleAgentWorker`s, `coder` (with camel's
`CodeExecutionToolkit`; its subprocess interpreter runs the code here, inside the container) and
`reviewer`. Every agent's model is camel's OpenAI-compatible backend pointed at the gateway under the
agent's own name.

Steps: step 0 is the task (`user`, human); then one `agent` step per LLM call, in call order: the
planner's decomposition and quality checks, the coordinator's assignments, each worker's model calls
(a call that asks for tools carries them in `tool_calls`, and the tools' results become the step's
observation). Every answered call produces exactly one step (its `X-Rootstep-Step` header says which);
a call that fails leaves no step (the adapter keeps it in `unlinked_calls`).

Determinism:
- one call at a time: workers run one after another, in the order the workforce posted their tasks,
  and only while the workforce itself is waiting for a returned task (its planner and coordinator calls
  are synchronous), so step indices follow one fixed order;
- pinned ids: the main task's id is fixed (subtask ids derive from it), workers are `ChatAgent`s with
  `agent_id` = their name (worker node ids, and the clones camel makes per task keep them);
- camel's retry prompt shows the earlier attempt's wall-clock time; the gateway's request hashing
  replaces such timestamps by a placeholder;
- no automatic summarisation (`summarize_threshold=None`, a large token limit) and a character-based
  token counter (camel's default counter downloads tiktoken tables: no network here);
- the code interpreter writes each snippet under a numbered directory instead of a random temp
  directory, so tracebacks (which the next prompt shows) are the same in every run;
- recovery is limited to the strategies in the episode config (default retry and replan, not worker
  creation or decomposition); camel's assignment fallback may still create workers (`helper-<n>`, their
  calls go to the gateway as `helper`) and they take turns like the others;
- calls are not retried by the OpenAI client (the gateway retries providers).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import time
from typing import Any

import _episode


class Recorder:
    """The steps of the episode: one per LLM call, indexed when the call starts."""

    def __init__(self, task_prompt: str | None, openai_calls: bool = False):
        self.steps: list[dict[str, Any]] = []
        self.next = 0
        if task_prompt is not None:
            self.human(task_prompt)
        self.openai_calls = openai_calls
        """Keep a step's tool calls in the OpenAI form (BFCL: an intervention restates them as the model gave them)."""
        self.active: int | None = None
        self.action: dict[str, Any] = {"action": "other"}
        self.by_tool_call: dict[str, dict[str, Any]] = {}

    def human(self, content: str, metadata: dict[str, Any] | None = None) -> None:
        """A user's message (the task; a BFCL user turn) as a `human` step."""
        step = {"index": self.next, "agent": "user", "kind": "human", "content": content}
        if metadata is not None:
            step.update(role="user", metadata=metadata)
        self.steps.append(step)
        self.next += 1

    def begin(self) -> int:
        index, self.next = self.next, self.next + 1
        self.active = index
        return index

    def end(self, index: int, agent: str, completion: Any, started: float) -> None:
        self.active = None
        choices = getattr(completion, "choices", None)
        if not choices:  # a stream or an empty answer: nothing to record as a step
            return
        message = choices[0].message
        tool_calls = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is None:
                continue
            try:
                arguments: Any = json.loads(function.arguments or "{}")
            except json.JSONDecodeError:
                arguments = function.arguments
            tool_calls.append({"id": call.id, "type": "function",
                               "function": {"name": function.name, "arguments": function.arguments}}
                              if self.openai_calls else {"id": call.id, "name": function.name, "arguments": arguments})
        step = {
            "index": index,
            "agent": agent,
            "kind": "agent",
            "role": "assistant",
            "content": message.content or "",
            "tool_calls": tool_calls,
            "observation": None,
            "started_at": started,
            "metadata": dict(self.action),
        }
        for call in tool_calls:
            self.by_tool_call[call["id"]] = step
        self.steps.append(step)

    def failed(self) -> None:
        self.active = None

    def observe(self, tool_call_id: str, tool_name: str, result: Any) -> None:
        """A tool's result joins the observation of the step that asked for it."""
        step = self.by_tool_call.get(tool_call_id)
        if step is None:
            return
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        if len(step["tool_calls"]) > 1:
            text = f"[{tool_name}] {text}"
        step["observation"] = text if step["observation"] is None else f"{step['observation']}\n{text}"

    def event(self, record: dict[str, Any]) -> None:
        """A workforce event (callbacks) is kept in the metadata of the latest step."""
        self.steps[-1].setdefault("metadata", {}).setdefault("events", []).append(record)


class Gate:
    """Lets one worker run at a time, in the order the workforce posted tasks, while the workforce waits."""

    def __init__(self) -> None:
        self.queue: collections.deque[str] = collections.deque()
        self.open = False
        self._cond: asyncio.Condition | None = None

    @property
    def cond(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    def posted(self, task_id: str) -> None:
        self.queue.append(task_id)

    async def workforce_waits(self) -> None:
        async with self.cond:
            self.open = True
            self.cond.notify_all()

    async def take(self, task_id: str) -> None:
        async with self.cond:
            await self.cond.wait_for(lambda: self.open and bool(self.queue) and self.queue[0] == task_id)
            self.queue.popleft()
            self.open = False


def char_token_counter() -> Any:
    """About four characters a token; camel's default counter (tiktoken) would download its tables."""
    from camel.utils import BaseTokenCounter

    class CharTokenCounter(BaseTokenCounter):
        def count_tokens_from_messages(self, messages):
            return sum(3 + len(json.dumps(m, default=str, ensure_ascii=False)) // 4 for m in messages)

        def encode(self, text):
            return list(text.encode("utf-8"))

        def decode(self, token_ids):
            return bytes(token_ids).decode("utf-8", errors="replace")

    return CharTokenCounter()


def gateway_model(episode: dict[str, Any], recorder: Recorder, agent: str) -> Any:
    """camel's OpenAI-compatible backend for `agent`, pointed at the gateway; each call is recorded as one step."""
    from camel.models import ModelFactory
    from camel.types import ModelPlatformType

    cfg = episode["config"]
    model = ModelFactory.create(
        model_platform=ModelPlatformType.OPENAI_COMPATIBLE_MODEL,
        model_type=cfg.get("model_alias", "rootstep"),
        url=_episode.agent_base_url(episode, agent),
        api_key="unused-the-gateway-holds-the-key",
        model_config_dict={"temperature": cfg.get("temperature", 0)},
        token_counter=char_token_counter(),
        timeout=cfg.get("llm_timeout_s", 600),
        max_retries=0,
    )
    sync_run, async_run = model._run, model._arun

    def _run(messages, response_format=None, tools=None):
        index, started = recorder.begin(), time.time()
        try:
            completion = sync_run(messages, response_format, tools)
        except BaseException:
            recorder.failed()
            raise
        recorder.end(index, agent, completion, started)
        return completion

    async def _arun(messages, response_format=None, tools=None):
        index, started = recorder.begin(), time.time()
        try:
            completion = await async_run(messages, response_format, tools)
        except BaseException:
            recorder.failed()
            raise
        recorder.end(index, agent, completion, started)
        return completion

    model._run, model._arun = _run, _arun
    return model


def run(episode: dict[str, Any]) -> dict[str, Any]:
    import camel
    from camel.agents import ChatAgent
    from camel.interpreters import SubprocessInterpreter
    from camel.societies.workforce import SingleAgentWorker, Workforce
    from camel.societies.workforce import workforce as workforce_module
    from camel.societies.workforce.structured_output_handler import StructuredOutputHandler
    from camel.societies.workforce.workforce_callback import WorkforceCallback
    from camel.tasks import Task
    from camel.toolkits import CodeExecutionToolkit

    cfg = episode["config"]
    prompts = cfg["prompts"]
    token_limit = int(cfg.get("token_limit", 1_000_000))
    recorder = Recorder(episode["task"]["prompt"])
    gate = Gate()
    _episode.current_step = lambda: recorder.active

    # -- tool results become observations; clones keep the agent's id and no summarisation
    sync_tool, async_tool, clone = ChatAgent._execute_tool, ChatAgent._aexecute_tool, ChatAgent.clone

    def _execute_tool(self, request):
        record = sync_tool(self, request)
        recorder.observe(record.tool_call_id, record.tool_name, record.result)
        return record

    async def _aexecute_tool(self, request):
        record = await async_tool(self, request)
        recorder.observe(record.tool_call_id, record.tool_name, record.result)
        return record

    def _clone(self, with_memory=False):
        new = clone(self, with_memory)
        new.agent_id = self.agent_id
        new.memory.agent_id = self.agent_id
        new.summarize_threshold = self.summarize_threshold
        return new

    ChatAgent._execute_tool, ChatAgent._aexecute_tool, ChatAgent.clone = _execute_tool, _aexecute_tool, _clone

    # -- camel's JSON extraction deletes `,}` and `,]` before parsing, inside strings too: a worker result
    # whose code holds `\w{4,}` came back as `\w{4}`; valid JSON is now read as written and
    # only text that does not parse gets camel's trailing-comma clean-up
    extract_json = StructuredOutputHandler.extract_json

    def _extract_json(text, schema=None):
        for pattern in StructuredOutputHandler.JSON_PATTERNS:
            for match in re.findall(pattern, text or "", re.DOTALL | re.IGNORECASE):
                try:
                    data = json.loads(match.strip())
                except json.JSONDecodeError:
                    continue
                if isinstance(data, dict):
                    return data
        return extract_json(text, schema)

    StructuredOutputHandler.extract_json = staticmethod(_extract_json)

    class NumberedInterpreter(SubprocessInterpreter):
        """camel's subprocess interpreter; snippets go to numbered directories, not random temp ones."""

        def __init__(self, root: str, **kwargs):
            super().__init__(**kwargs)
            self.root, self.count = root, 0

        def _create_temp_file(self, code: str, extension: str):
            from pathlib import Path

            self.count += 1
            directory = Path(self.root) / f"run{self.count}"
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"temp_code.{extension}"
            path.write_text(code, encoding="utf-8")
            return path

    class GatedWorker(SingleAgentWorker):
        """camel's SingleAgentWorker; it waits for its turn (see `Gate`) before processing a task."""

        async def _process_task(self, task, dependencies, stream_callback=None):
            await gate.take(task.id)
            recorder.action = {"action": "process_task", "task_id": task.id}
            return await super()._process_task(task, dependencies, stream_callback=stream_callback)

    # the workforce builds workers it creates itself (assignment fallback) from this name
    workforce_module.SingleAgentWorker = GatedWorker
    helpers = {"count": 0}

    class RootstepWorkforce(Workforce):
        """camel's Workforce; each LLM-backed decision says what it is, and workers take turns."""

        def _decompose_task(self, task, stream_callback=None):
            recorder.action = {"action": "decompose", "task_id": task.id}
            return super()._decompose_task(task, stream_callback)

        def _call_coordinator_for_assignment(self, tasks, invalid_ids=None):
            recorder.action = {"action": "assign", "task_ids": [t.id for t in tasks]}
            return super()._call_coordinator_for_assignment(tasks, invalid_ids)

        def _analyze_task(self, task, *, for_failure, error_message=None):
            recorder.action = {"action": "failure_analysis" if for_failure else "quality_check", "task_id": task.id}
            return super()._analyze_task(task, for_failure=for_failure, error_message=error_message)

        async def _create_worker_node_for_task(self, task):
            recorder.action = {"action": "create_worker", "task_id": task.id}
            return await super()._create_worker_node_for_task(task)

        async def _create_new_agent(self, role, sys_msg):
            agent = await super()._create_new_agent(role, sys_msg)
            helpers["count"] += 1
            agent.agent_id = agent.memory.agent_id = f"helper-{helpers['count']}"
            return agent

        async def _post_task(self, task, assignee_id):
            gate.posted(task.id)
            await super()._post_task(task, assignee_id)

        async def _get_returned_task(self):
            await gate.workforce_waits()
            return await super()._get_returned_task()

    class EventLog(WorkforceCallback):
        """Workforce lifecycle events, kept (without their wall-clock times) in the steps' metadata."""

        def _keep(self, event, *fields):
            record = {"event": event.event_type}
            for name in fields:
                value = getattr(event, name, None)
                if value is not None:
                    record[name] = value
            recorder.event(record)

        def log_message(self, event):
            pass

        def log_task_created(self, event):
            self._keep(event, "task_id", "parent_task_id")

        def log_task_decomposed(self, event):
            self._keep(event, "parent_task_id", "subtask_ids")

        def log_task_assigned(self, event):
            self._keep(event, "task_id", "worker_id", "dependencies")

        def log_task_started(self, event):
            self._keep(event, "task_id", "worker_id")

        def log_task_updated(self, event):
            self._keep(event, "task_id", "update_type", "new_value")

        def log_task_completed(self, event):
            self._keep(event, "task_id", "worker_id")

        def log_task_failed(self, event):
            self._keep(event, "task_id", "worker_id", "error_message")

        def log_worker_created(self, event):
            self._keep(event, "worker_id", "role")

        def log_worker_deleted(self, event):
            self._keep(event, "worker_id")

        def log_all_tasks_completed(self, event):
            self._keep(event)

    def agent(name: str, system: str | None = None, tools: list | None = None) -> ChatAgent:
        return ChatAgent(
            system_message=system,
            model=gateway_model(episode, recorder, name),
            tools=tools,
            agent_id=name,
            token_limit=token_limit,
            summarize_threshold=None,
            max_iteration=cfg.get("worker_max_iterations", 6),
        )

    code_dir = os.path.join(os.getcwd(), "code")
    toolkit = CodeExecutionToolkit(sandbox="subprocess")
    toolkit.interpreter = NumberedInterpreter(code_dir, require_confirm=False, print_stdout=False, print_stderr=False,
                                              execution_timeout=int(cfg.get("code_timeout_s", 30)))
    code_tools = [t for t in toolkit.get_tools() if t.get_function_name() == "execute_code"]

    coder = GatedWorker(prompts["coder_description"].strip(),
                        worker=agent("coder", prompts["coder"].strip(), code_tools))
    reviewer = GatedWorker(prompts["reviewer_description"].strip(),
                           worker=agent("reviewer", prompts["reviewer"].strip()))
    workforce = RootstepWorkforce(
        prompts["workforce"].strip(),
        children=[coder, reviewer],
        coordinator_agent=agent("coordinator"),
        task_agent=agent("planner"),
        new_worker_agent=agent("helper", None, code_tools),
        graceful_shutdown_timeout=0,
        share_memory=False,
        use_structured_output_handler=True,
        task_timeout_seconds=cfg.get("task_timeout_s", 300),
        callbacks=[EventLog()],
        failure_handling_config={
            "enabled_strategies": cfg.get("recovery_strategies", ["retry", "replan"]),
            "max_retries": cfg.get("max_retries", 3),
        },
    )
    # the workforce rebuilds its coordinator and planner from the agents given; no summarisation there either
    for internal in (workforce.coordinator_agent, workforce.task_agent):
        internal.summarize_threshold = None

    main_task = Task(content=episode["task"]["prompt"], id=cfg.get("task_id", "task"))

    def result(final: Any) -> dict[str, Any]:
        return {"steps": sorted(recorder.steps, key=lambda s: s["index"]), "final_answer": final,
                "framework_version": camel.__version__}

    outcome: dict[str, Any] = {}

    def work() -> None:
        done = asyncio.run(workforce.process_task_async(main_task))
        recorder.steps[0].setdefault("metadata", {})["subtasks"] = [
            {"id": sub.id, "state": str(getattr(sub.state, "value", sub.state)), "worker": sub.assigned_worker_id}
            for sub in done.subtasks
        ]
        outcome["done"] = done

    return _episode.kept_steps(work, lambda: result(outcome["done"].result if "done" in outcome else main_task.result))


def run_tools(episode: dict[str, Any]) -> dict[str, Any]:
    """One BFCL episode as OWL's role-playing pair: an `instructor` (OWL's user role) turns each user turn into
    instructions one at a time and says TASK_DONE when the turn is done; the `assistant` (a `ChatAgent` with the
    offered functions as camel `FunctionTool`s) carries each out, calling functions in camel's tool loop. Both keep
    their memory across turns. The pair is driven as camel's `RolePlaying.step` drives it (instructor, then
    assistant), except that an instructor's TASK_DONE ends the turn before the assistant answers it."""
    import camel
    from camel.agents import ChatAgent
    from camel.messages import BaseMessage
    from camel.toolkits import FunctionTool

    import _bfcl_tools

    cfg = episode["config"]
    prompts = cfg["prompts"]
    server = _bfcl_tools.ToolServer(episode["task"])
    recorder = Recorder(None, openai_calls=True)
    _episode.current_step = lambda: recorder.active
    state: dict[str, Any] = {"asked_by": None, "turn": 0}
    tool_steps: list[dict[str, Any]] = []
    asked_calls: collections.Counter[int] = collections.Counter()

    def make_tool(doc: dict[str, Any]) -> Any:
        def function(**arguments: Any) -> str:
            return server.call(doc["name"], arguments, state["asked_by"])[0]

        function.__name__ = doc["name"]
        return FunctionTool(function, openai_tool_schema=_bfcl_tools.openai_tools([doc])[0])

    sync_tool = ChatAgent._execute_tool

    def _execute_tool(self, request):  # each call the assistant asked for is a `tool` step after its asking step
        asking = recorder.by_tool_call.get(request.tool_call_id)
        state["asked_by"] = None if asking is None else asking["index"]
        before = len(server.calls)
        record = sync_tool(self, request)
        if asking is not None:
            ran = server.calls[before] if len(server.calls) > before else None
            j = asked_calls[asking["index"]]
            asked_calls[asking["index"]] += 1
            tool_steps.append({"index": _bfcl_tools.tool_index(asking["index"], j), **_bfcl_tools.tool_step(
                "tools", state["turn"], str(record.result), request.tool_name, request.args, ran,
                asked_by_index=asking["index"])})
        return record

    ChatAgent._execute_tool = _execute_tool

    def agent(name: str, tools: list | None = None) -> ChatAgent:
        return ChatAgent(system_message=prompts[name].strip(), model=gateway_model(episode, recorder, name), tools=tools,
                         agent_id=name, token_limit=int(cfg.get("token_limit", 1_000_000)), summarize_threshold=None,
                         max_iteration=cfg.get("assistant_max_iterations", 6))

    instructor = agent("instructor")
    assistant = agent("assistant", [make_tool(doc) for doc in server.offered])

    def collected() -> dict[str, Any]:
        out = _bfcl_tools.in_order(recorder.steps + tool_steps)
        final = next((s["content"] for s in reversed(out) if s["agent"] == "assistant" and s["kind"] == "agent"), None)
        return {"steps": out, "final_answer": final, "framework_version": camel.__version__}

    def reported(start: int) -> str:
        """What the instructor is shown of the assistant's round: its reply and the calls it made, with results."""
        reply = next((s["content"] for s in reversed(recorder.steps) if s["index"] >= start and s["agent"] == "assistant"
                      and s["content"]), "")
        made = [f"- {s['tool_calls'][0]['name']}({json.dumps(s['tool_calls'][0]['arguments'], ensure_ascii=False)})"
                f" -> {s['content'][:300]}" for s in tool_steps if s["metadata"]["asked_by_index"] >= start]
        return (reply or "(no text)") + ("\nFunction calls made:\n" + "\n".join(made) if made else "\nNo function was called.")

    def turns() -> None:
        for turn, text in _bfcl_tools.turns_to_run(episode):
            state["turn"] = turn
            for doc in server.start_turn(turn):  # miss_func: a held-back function appears at its turn
                assistant.add_tool(make_tool(doc))
            recorder.human(text, {"turn": turn})
            recorder.action = {"turn": turn}
            message = prompts["turns"][turn].strip()
            for _ in range(int(cfg.get("rounds_per_turn", 3))):
                instruction = instructor.step(BaseMessage.make_user_message(role_name="user", content=message))
                said = instruction.msgs[0].content if instruction.msgs else ""
                if instruction.terminated or not said or "TASK_DONE" in said:
                    break
                start = recorder.next
                assistant.step(BaseMessage.make_user_message(role_name="instructor", content=said))
                message = reported(start)

    return _episode.kept_steps(turns, collected)


if __name__ == "__main__":
    _episode.main(lambda episode: run_tools(episode) if episode["config"].get("tools") else run(episode))
