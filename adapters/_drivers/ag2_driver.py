"""AG2 / AutoGen (`autogen==0.14.*`) GroupChat episode, run inside the framework's sandbox image.

Team: `executor` (a UserProxyAgent that states the task and runs the code blocks it receives, here in
this container), `coder` (an AssistantAgent that writes the solution) and `critic` (an AssistantAgent
that checks the solution against the execution result and ends the chat with TERMINATE).
Speaker order is fixed (no LLM speaker selection): executor(task) -> coder -> executor(runs code) ->
critic -> coder -> ... , so a replay takes the same path as its recording.
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


def run(episode: dict[str, Any]) -> dict[str, Any]:
    import autogen
    from autogen.coding import LocalCommandLineCodeExecutor

    cfg = episode["config"]
    prompts = cfg["prompts"]

    def llm_config(agent: str) -> dict[str, Any]:
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
        name="coder", system_message=prompts["coder"], llm_config=llm_config("coder"), is_termination_msg=is_done,
    )
    critic = autogen.AssistantAgent(
        name="critic", system_message=prompts["critic"], llm_config=llm_config("critic"), is_termination_msg=is_done,
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

    error = None
    try:
        executor.initiate_chat(manager, message=episode["task"]["prompt"], clear_history=True, silent=True)
    except Exception as exc:  # noqa: BLE001 - the steps so far are still the trajectory
        error = exc

    steps = []
    for index, message in enumerate(groupchat.messages):
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
    result = {"steps": steps, "final_answer": final, "framework_version": autogen.__version__}
    if error is not None:
        error.rootstep_partial = result  # type: ignore[attr-defined]
        raise error
    return result


if __name__ == "__main__":
    _episode.main(run)
