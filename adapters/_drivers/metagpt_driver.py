"""MetaGPT (`metagpt==0.8.2`) episode, run inside the framework's sandbox image.

A `Team` of four MetaGPT `Role`s, each with its own LLM pointed at the gateway under its name:
`coder` (WriteCode: watches the requirement and change requests), `tester` (WriteTests: watches the
code), `runner` (RunTests, no LLM: runs code + tests in this container) and `reviewer` (ReviewCode:
approves with APPROVED or asks for changes, which the coder picks up). Steps are the messages published
to the environment (`Environment.publish_message` is hooked); step 0 is the requirement (`user`).
One role acts per round, so the index of the message an action will publish is the number published
so far, which the LLM call carries in `X-Rootstep-Step`.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from typing import Any

import _episode

KINDS = {"coder": "agent", "tester": "agent", "reviewer": "agent", "runner": "tool"}
PROFILES = {"Engineer": "coder", "QaEngineer": "tester", "Executor": "runner", "Reviewer": "reviewer"}


def _write_config(episode: dict[str, Any]) -> None:
    cfg = episode["config"]
    home = os.environ.get("HOME") or os.getcwd()
    os.makedirs(os.path.join(home, ".metagpt"), exist_ok=True)
    with open(os.path.join(home, ".metagpt", "config2.yaml"), "w", encoding="utf-8") as f:
        f.write(
            "llm:\n  api_type: openai\n"
            f"  base_url: {_episode.agent_base_url(episode, 'unassigned')}\n"
            "  api_key: unused-the-gateway-holds-the-key\n"
            f"  model: {cfg.get('model_alias', 'gpt-4o')}\n"
            "  stream: false\n  calc_usage: false\n"
            f"  temperature: {cfg.get('temperature', 0)}\n"
        )


def _code_of(text: str) -> str:
    blocks = re.findall(r"```(?:python|py)?[^\n]*\n(.*?)```", text, re.DOTALL)
    return (blocks[-1] if blocks else text).strip() + "\n"


def _role(episode: dict[str, Any], name: str, profile: str, action: type, watch: list[type], llm: bool = True,
          goal: str = "") -> Any:
    """A MetaGPT `Role` doing `action` on the messages `watch` names; with `llm`, its own LLM pointed at the gateway
    under its name (non-streaming, usage from the response, the episode's temperature and timeout)."""
    from metagpt.configs.llm_config import LLMConfig
    from metagpt.llm import LLM
    from metagpt.roles import Role

    cfg = episode["config"]
    role = Role(name=name, profile=profile, goal=goal)
    if llm:
        role.llm = LLM(llm_config=LLMConfig(
            api_type="openai", base_url=_episode.agent_base_url(episode, name), api_key="unused",
            model=cfg.get("model_alias", "gpt-4o"), stream=False, calc_usage=False,
            temperature=cfg.get("temperature", 0), timeout=cfg.get("llm_timeout_s", 600),
        ))
    role.set_actions([action])
    role._watch(watch)
    return role


def run(episode: dict[str, Any]) -> dict[str, Any]:
    _write_config(episode)
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")  # no git in the image; projects are not archived
    import metagpt
    from metagpt.actions import Action, UserRequirement
    from metagpt.environment import Environment
    from metagpt.schema import Message
    from metagpt.team import Team

    cfg = episode["config"]
    prompts = cfg["prompts"]
    task = episode["task"]["prompt"]
    published: list[Any] = []
    original_publish = Environment.publish_message

    def publish_message(self, message, peekable: bool = True):
        published.append(message)
        return original_publish(self, message, peekable)

    Environment.publish_message = publish_message
    _episode.current_step = lambda: len(published)

    def latest(messages, action_name: str) -> str:
        return next((m.content for m in reversed(messages) if m.cause_by.endswith(action_name)), "")

    class WriteCode(Action):
        name: str = "WriteCode"

        async def run(self, messages):
            prompt = prompts["coder"].replace("{task}", task).replace("{review}", latest(messages, "ReviewCode"))
            return await self._aask(prompt)

    class WriteTests(Action):
        name: str = "WriteTests"

        async def run(self, messages):
            prompt = prompts["tester"].replace("{task}", task).replace("{code}", _code_of(latest(messages, "WriteCode")))
            return await self._aask(prompt)

    class RunTests(Action):
        name: str = "RunTests"

        async def run(self, messages):
            program = _code_of(latest(messages, "WriteCode")) + "\n" + _code_of(latest(messages, "WriteTests"))
            with open("metagpt_check.py", "w", encoding="utf-8") as f:
                f.write(program)
            try:
                done = subprocess.run([sys.executable, "metagpt_check.py"], capture_output=True, text=True,
                                      timeout=cfg.get("code_timeout_s", 30))
                tail = (done.stdout + done.stderr)[-2000:]
                return f"exit code {done.returncode}\n{tail}".strip()
            except subprocess.TimeoutExpired:
                return "timed out"

    class ReviewCode(Action):
        name: str = "ReviewCode"

        async def run(self, messages):
            prompt = (prompts["reviewer"].replace("{task}", task)
                      .replace("{code}", _code_of(latest(messages, "WriteCode")))
                      .replace("{result}", latest(messages, "RunTests")))
            return await self._aask(prompt)

    def make_role(name: str, profile: str, action: type, watch: list[type], llm: bool = True) -> Any:
        return _role(episode, name, profile, action, watch, llm, goal=prompts.get(f"{name}_goal", ""))

    coder = make_role("coder", "Engineer", WriteCode, [UserRequirement, ReviewCode])
    original_observe = coder._observe

    async def observe_changes_only(ignore_memory=False):
        await original_observe(ignore_memory)
        coder.rc.news = [m for m in coder.rc.news if "APPROVED" not in m.content]
        return len(coder.rc.news)

    object.__setattr__(coder, "_observe", observe_changes_only)
    team = Team()
    team.hire([
        coder,
        make_role("tester", "QaEngineer", WriteTests, [WriteCode]),
        make_role("runner", "Executor", RunTests, [WriteTests], llm=False),
        make_role("reviewer", "Reviewer", ReviewCode, [RunTests]),
    ])
    team.invest(cfg.get("investment", 1000.0))

    def result() -> dict[str, Any]:
        steps = []
        for message in published:
            agent = "user" if message.cause_by.endswith("UserRequirement") else PROFILES.get(message.role, message.role)
            steps.append({"agent": agent, "kind": KINDS.get(agent, "human"), "role": message.role,
                          "content": message.content, "metadata": {"cause_by": message.cause_by}})
        final = next((s["content"] for s in reversed(steps) if s["agent"] == "coder"), None)
        return {"steps": steps, "final_answer": final, "framework_version": metagpt.__version__
                if hasattr(metagpt, "__version__") else "0.8.2"}

    return _episode.kept_steps(lambda: asyncio.run(team.run(n_round=cfg.get("n_round", 12), idea=task, auto_archive=False)),
                               result)


def run_tools(episode: dict[str, Any]) -> dict[str, Any]:
    """One BFCL episode as a MetaGPT Team: every user turn is the Team's idea (`team.run(idea=...)`, the roles keep
    their memory); `planner` (PlanCalls) says which calls, `caller` (CallFunctions: MetaGPT's OpenAI client and request
    builder, as its `_achat_completion_function`, with the offered functions as tools) calls them, `executor`
    (RunCalls, no LLM) runs them on the tool server and publishes their results, which the caller reads before it
    calls again or answers in text; a text answer without calls ends the turn (the executor does not watch it)."""
    _write_config(episode)
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    import metagpt
    from metagpt.actions import Action, UserRequirement
    from metagpt.environment import Environment
    from metagpt.schema import Message
    from metagpt.team import Team

    import _bfcl_tools

    cfg = episode["config"]
    prompts = cfg["prompts"]
    turns: list[str] = episode["task"]["metadata"]["turns"]
    server = _bfcl_tools.ToolServer(episode["task"])
    published: list[Any] = []
    asked: dict[str, list[dict[str, Any]]] = {}
    """A caller message's id -> its tool calls, in the OpenAI form."""
    ran: dict[str, list[dict[str, Any]]] = {}
    """An executor message's id -> its tool steps."""
    history: list[dict[str, Any]] = []
    """The caller's conversation over all turns: each turn's request and plan, its calls and their results."""
    state: dict[str, Any] = {"turn": 0}
    told_plans: set[str] = set()
    original_publish = Environment.publish_message

    def publish_message(self, message, peekable: bool = True):
        published.append(message)
        return original_publish(self, message, peekable)

    def steps_of(message: Any) -> int:
        return len(ran[message.id]) if message.id in ran else 1

    def position(message: Any | None = None) -> int:
        """The step index of `message` (None: of the next message published)."""
        count = 0
        for m in published:
            if m is message:
                return count
            count += steps_of(m)
        return count

    Environment.publish_message = publish_message
    _episode.current_step = position

    class PlanCalls(Action):
        name: str = "PlanCalls"

        async def run(self, messages):
            prompt = (prompts["planner"].replace("{request}", turns[state["turn"]])
                      .replace("{results}", server.made()))
            return await self._aask(prompt)

    class CallFunctions(Action):
        name: str = "CallFunctions"

        async def run(self, messages):
            plan = next((m for m in reversed(messages) if m.cause_by.endswith("PlanCalls")), None)
            if plan is not None and plan.id not in told_plans:  # the turn's plan, once, after its request
                told_plans.add(plan.id)
                history.append({"role": "user", "content": prompts["plan"].replace("{plan}", plan.content)})
            # MetaGPT's function-calling completion (`_achat_completion_function`) without its `format_msg`, which
            # admits only {role, content} messages: not a tool call or its result
            llm = self.llm
            rsp = await llm.aclient.chat.completions.create(**llm._cons_kwargs(
                [{"role": "system", "content": prompts["caller"]}, *history], timeout=llm.get_timeout(None),
                tools=_bfcl_tools.openai_tools(server.offered), tool_choice="auto"))
            message = rsp.choices[0].message
            calls = _bfcl_tools.asked_calls(message)
            history.append({"role": "assistant", "content": message.content or "", **({"tool_calls": calls} if calls else {})})
            out = Message(content=message.content or "", role="Caller", cause_by=CallFunctions, sent_from="caller")
            if calls:
                asked[out.id] = calls
            return out

    class RunCalls(Action):
        name: str = "RunCalls"

        async def run(self, messages):
            request = next(m for m in reversed(messages) if m.id in asked)
            asker, steps, told_all = position(request), [], []
            for call in asked[request.id]:
                name, arguments = _bfcl_tools.name_and_arguments(call)
                told, record = server.call(name, arguments, asker)
                steps.append(_bfcl_tools.tool_step("executor", state["turn"], told, name, arguments, record, asked_by=asker))
                history.append({"role": "tool", "tool_call_id": call["id"], "content": told})
                told_all.append(f"[{name}] {told}")
            out = Message(content="\n".join(told_all), role="Executor", cause_by=RunCalls, sent_from="executor")
            ran[out.id] = steps
            return out

    executor = _role(episode, "executor", "Executor", RunCalls, [CallFunctions], llm=False)
    original_observe = executor._observe

    async def observe_calls_only(ignore_memory=False):
        await original_observe(ignore_memory)
        executor.rc.news = [m for m in executor.rc.news if m.id in asked]  # a text answer ends the turn
        return len(executor.rc.news)

    object.__setattr__(executor, "_observe", observe_calls_only)
    team = Team()
    team.hire([_role(episode, "planner", "Planner", PlanCalls, [UserRequirement]),
               _role(episode, "caller", "Caller", CallFunctions, [PlanCalls, RunCalls]), executor])
    team.invest(cfg.get("investment", 1000.0))

    def collected() -> dict[str, Any]:
        steps: list[dict[str, Any]] = []
        turn = -1
        for message in published:
            if message.cause_by.endswith("UserRequirement"):
                turn += 1
                steps.append({"agent": "user", "kind": "human", "role": "user", "content": message.content,
                              "metadata": {"turn": turn, "cause_by": message.cause_by}})
            elif message.id in ran:
                steps.extend(ran[message.id])
            else:
                agent = {"Planner": "planner", "Caller": "caller"}.get(message.role, message.role)
                steps.append({"agent": agent, "kind": "agent", "role": message.role, "content": message.content,
                              "tool_calls": asked.get(message.id, []),
                              "metadata": {"turn": turn, "cause_by": message.cause_by}})
        final = next((s["content"] for s in reversed(steps) if s["agent"] == "caller" and s["content"]), None)
        return {"steps": steps, "final_answer": final,
                "framework_version": getattr(metagpt, "__version__", "0.8.2")}

    async def all_turns() -> None:
        for turn, text in _bfcl_tools.turns_to_run(episode):
            state["turn"] = turn
            server.start_turn(turn)  # miss_func: a held-back function is offered from its turn on
            history.append({"role": "user", "content": text})
            await team.run(n_round=cfg.get("n_round_per_turn", 12), idea=text, auto_archive=False)

    return _episode.kept_steps(lambda: asyncio.run(all_turns()), collected)


if __name__ == "__main__":
    _episode.main(lambda episode: run_tools(episode) if episode["config"].get("tools") else run(episode))
