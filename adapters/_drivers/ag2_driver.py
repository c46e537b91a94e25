"""AG2 / AutoGen (`autogen==0.14.*`) GroupChat episode, run inside the framework's sandbox image.

Team: `executor` (a UserProxyAgent that states the task and runs the code blocks it receives, here in
this container), `coder` (an AssistantAgent that writes the solution) and `critic` (an AssistantAgent
that checks the solution against the execution result and ends the chat with TERMINATE).
Speaker order is fixed (no LLM speaker selection): executor(task) -> coder -> executor(runs code) ->
critic -> coder -> ... , so a replay takes the same path as its recording.

A tool-use task (BFCL multi-turn: `config["tools"]`) runs `run_tools` instead: per user turn the executor states
the request, the `planner` (no tools) says which calls it needs, the `caller` (an AssistantAgent whose llm_config
holds the offered functions as OpenAI tools) makes them, and the executor runs each through AG2's function map
on BFCL's simulators (`_bfcl_tools.ToolServer`), until the caller answers without a call (the turn is done).
"""

from __future__ import annotations

import os
from typing import Any

import _episode

ORDER = {"executor": "critic", "critic": "coder", "coder": "executor"}


def _step_kind(name: str, index: int) -> str:
    if name == "executor":
        return "human" if index == 0 else "tool"
    return "agent"


def agent_llm_config(episode: dict[str, Any], agent: str) -> dict[str, Any]:
    """An agent's llm_config: its own gateway route, no AG2 disk cache (it would answer calls without reaching the
    gateway), the episode's temperature and timeout."""
    cfg = episode["config"]
    return {
        "config_list": [{
            "model": cfg.get("model_alias", "rootstep"),
            "base_url": _episode.agent_base_url(episode, agent),
            "api_key": "unused-the-gateway-holds-the-key",
            "price": [0.0, 0.0],
        }],
        "cache_seed": None,
        "temperature": cfg.get("temperature", 0),
        "timeout": cfg.get("llm_timeout_s", 600),
    }


def run(episode: dict[str, Any]) -> dict[str, Any]:
    import autogen
    from autogen.coding import LocalCommandLineCodeExecutor

    cfg = episode["config"]
    prompts = cfg["prompts"]

    is_done = lambda m: "TERMINATE" in str(m.get("content") or "")  # noqa: E731
    work_dir = os.path.join(os.getcwd(), "coding")
    os.makedirs(work_dir, exist_ok=True)
    executor = autogen.UserProxyAgent(
        name="executor",
        human_input_mode="NEVER",
        llm_config=False,
        is_termination_msg=is_done,
        default_auto_reply=prompts["executor_no_code"],
        code_execution_config={
            "executor": LocalCommandLineCodeExecutor(timeout=cfg.get("code_timeout_s", 30), work_dir=work_dir),
            "last_n_messages": 1,
        },
    )
    coder = autogen.AssistantAgent(
        name="coder", system_message=prompts["coder"], llm_config=agent_llm_config(episode, "coder"), is_termination_msg=is_done,
    )
    critic = autogen.AssistantAgent(
        name="critic", system_message=prompts["critic"], llm_config=agent_llm_config(episode, "critic"), is_termination_msg=is_done,
    )
    agents = {"executor": executor, "coder": coder, "critic": critic}

    def next_speaker(last_speaker, groupchat):
        if len(groupchat.messages) == 1:  # the task was stated: the coder answers it
            return coder
        return agents[ORDER[last_speaker.name]]

    groupchat = autogen.GroupChat(
        agents=[executor, coder, critic],
        messages=[],
        max_round=cfg.get("max_round", 12),
        speaker_selection_method=next_speaker,
        send_introductions=False,
    )
    manager = autogen.GroupChatManager(groupchat=groupchat, llm_config=False, is_termination_msg=is_done)
    _episode.current_step = lambda: len(groupchat.messages)

    def collected() -> dict[str, Any]:
        steps = []
        for index, message in enumerate(list(groupchat.messages)):
            name = message.get("name") or "executor"
            steps.append({
                "agent": name,
                "kind": _step_kind(name, index),
                "role": message.get("role"),
                "content": str(message.get("content") or ""),
            })
        final = next((s["content"] for s in reversed(steps) if s["agent"] == "coder"), None)
        if final is not None:
            final = final.replace("TERMINATE", "").strip()
        return {"steps": steps, "final_answer": final, "framework_version": autogen.__version__}

    return _episode.kept_steps(
        lambda: executor.initiate_chat(manager, message=episode["task"]["prompt"], clear_history=True, silent=True),
        collected)


def run_tools(episode: dict[str, Any]) -> dict[str, Any]:
    """One BFCL episode: every user turn a chat of executor, planner and caller over the same group chat."""
    import autogen

    import _bfcl_tools

    cfg = episode["config"]
    prompts = cfg["prompts"]
    server = _bfcl_tools.ToolServer(episode["task"])
    state: dict[str, Any] = {"asked_by": None, "call_id": None}
    records: dict[str, dict[str, Any] | None] = {}  # AG2 tool call id -> what the server ran (None: refused)

    class Executor(autogen.UserProxyAgent):
        def execute_function(self, func_call, call_id=None, verbose=False):  # noqa: ANN001 - AG2's signature
            state["call_id"] = call_id
            return super().execute_function(func_call, call_id=call_id, verbose=verbose)

    def tool(name: str):
        def run_call(**arguments: Any) -> str:
            told, record = server.call(name, arguments, state["asked_by"])
            if state["call_id"] is not None:
                records[state["call_id"]] = record
            return told

        return run_call

    executor = Executor(name="executor", human_input_mode="NEVER", llm_config=False, code_execution_config=False,
                        default_auto_reply="")
    planner = autogen.AssistantAgent(name="planner", system_message=prompts["planner"],
                                     llm_config=agent_llm_config(episode, "planner"))
    caller = autogen.AssistantAgent(name="caller", system_message=prompts["caller"], llm_config={
        **agent_llm_config(episode, "caller"), "tools": _bfcl_tools.openai_tools(server.offered)})
    executor.register_function({doc["name"]: tool(doc["name"]) for doc in server.offered})

    def next_speaker(last_speaker, groupchat):  # noqa: ANN001 - AG2's signature
        last = groupchat.messages[-1]
        if last_speaker is executor:
            return caller if last.get("tool_responses") else planner
        if last_speaker is planner:
            return caller
        if last.get("tool_calls"):  # the caller asked for calls: the executor runs them
            state["asked_by"] = len(groupchat.messages) - 1
            return executor
        return None  # the caller answered without a call: the turn is done

    groupchat = autogen.GroupChat(agents=[executor, planner, caller], messages=[],
                                  max_round=cfg.get("max_round_per_turn", 12), speaker_selection_method=next_speaker,
                                  send_introductions=False)
    manager = autogen.GroupChatManager(groupchat=groupchat, llm_config=False)
    _episode.current_step = lambda: len(groupchat.messages)

    turn_of: dict[int, int] = {}  # the executor's message index -> the user turn it states

    def collected() -> dict[str, Any]:
        steps: list[dict[str, Any]] = []
        position: dict[int, int] = {}  # message index -> the position of its step
        turn = 0
        messages = list(groupchat.messages)
        for index, message in enumerate(messages):
            name = message.get("name") or "executor"
            if index in turn_of:
                turn = turn_of[index]
                position[index] = len(steps)
                steps.append({"index": index, "agent": "executor", "kind": "human", "role": "user",
                              "content": str(message.get("content") or ""), "metadata": {"turn": turn}})
            elif message.get("tool_responses"):
                asked = max(i for i in position if i < index and messages[i].get("tool_calls"))
                calls = {c.get("id"): c for c in messages[asked].get("tool_calls") or []}
                for j, response in enumerate(message["tool_responses"]):
                    call = calls.get(response.get("tool_call_id"), {}).get("function", {})
                    record = records.get(response.get("tool_call_id"))
                    steps.append({"index": _bfcl_tools.tool_index(index, j), **_bfcl_tools.tool_step(
                        "executor", turn, str(response.get("content") or ""), call.get("name"), call.get("arguments"),
                        record, asked_by=position[asked])})
            else:
                position[index] = len(steps)
                calls = list(message.get("tool_calls") or [])
                text = str(message.get("content") or "")
                if calls and text == "None":  # AG2 keeps a call-only message's missing content as the string "None"
                    text = ""
                steps.append({"index": index, "agent": name, "kind": "agent", "role": message.get("role"),
                              "content": text, "tool_calls": calls, "metadata": {"turn": turn}})
        final = next((s["content"] for s in reversed(steps) if s["agent"] == "caller" and not s["tool_calls"]), None)
        return {"steps": steps, "final_answer": final, "framework_version": autogen.__version__}

    def turns() -> None:
        for turn, text in _bfcl_tools.turns_to_run(episode):
            for doc in server.start_turn(turn):  # miss_func: a held-back function appears at its turn
                caller.update_tool_signature(_bfcl_tools.openai_tools([doc])[0], is_remove=False)
                executor.register_function({doc["name"]: tool(doc["name"])})
            turn_of[len(groupchat.messages)] = turn
            executor.initiate_chat(manager, message=text, clear_history=(turn == 0), silent=True)

    return _episode.kept_steps(turns, collected)


if __name__ == "__main__":
    _episode.main(lambda episode: run_tools(episode) if episode["config"].get("tools") else run(episode))
