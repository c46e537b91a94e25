"""smolagents episode, run inside the framework's sandbox image.

A manager `CodeAgent` (`manager`) with one managed `CodeAgent` (`coder`). Both use smolagents' local
Python executor, which runs here, inside the sandbox container. Each agent's model is an
`OpenAIModel` pointed at the gateway under its own agent name. Steps are captured with
`step_callbacks` on both agents and ordered by start time; a step's index is fixed when its LLM call
starts (the call carries it in `X-Rootstep-Step`), which is start-time order because an agent's action
step begins with its one model call. Step 0 is the task (`user`, a human step).
"""

from __future__ import annotations

from typing import Any

import _episode


def gateway_model(episode: dict[str, Any], state: dict[str, Any]) -> Any:
    """The agents' model class: an `OpenAIModel` at the agent's gateway route that fixes the index of the step its
    call produces before calling (`state["next"]`; `state["pending"][agent]` until the step is captured)."""
    from smolagents import OpenAIModel

    cfg = episode["config"]

    class GatewayModel(OpenAIModel):
        def __init__(self, agent: str):
            super().__init__(model_id=cfg.get("model_alias", "rootstep"), api_base=_episode.agent_base_url(episode, agent),
                             api_key="unused-the-gateway-holds-the-key", temperature=cfg.get("temperature", 0))
            self.rootstep_agent = agent

        def generate(self, *args, **kwargs):
            index = state["next"]
            state["next"] += 1
            state["pending"][self.rootstep_agent] = index
            state["active"] = index
            try:
                return super().generate(*args, **kwargs)
            finally:
                state["active"] = None

    _episode.current_step = lambda: state["active"]
    return GatewayModel


def run(episode: dict[str, Any]) -> dict[str, Any]:
    import smolagents
    from smolagents import CodeAgent
    from smolagents.memory import ActionStep

    cfg = episode["config"]
    prompts = cfg["prompts"]
    state: dict[str, Any] = {"next": 1, "active": None, "pending": {}}
    steps: list[dict[str, Any]] = [
        {"agent": "user", "kind": "human", "content": episode["task"]["prompt"], "index": 0},
    ]

    GatewayModel = gateway_model(episode, state)

    def capture(memory_step, agent=None):
        if not isinstance(memory_step, ActionStep):
            return
        name = agent.name if agent is not None and agent.name else "manager"
        index = state["pending"].pop(name, None)
        made_by_llm = index is not None
        if index is None:  # a step that made no model call: it takes the next index
            index = state["next"]
            state["next"] += 1
        observation = memory_step.observations
        if memory_step.error is not None:
            observation = ((observation or "") + f"\nError: {memory_step.error}").strip()
        code = memory_step.code_action
        steps.append({
            "index": index,
            "agent": name,
            "kind": "agent" if made_by_llm else "environment",
            "content": str(memory_step.model_output or memory_step.action_output or ""),
            "tool_calls": [{"name": "python_interpreter", "arguments": code}] if code else [],
            "observation": observation,
            "started_at": memory_step.timing.start_time,
            "metadata": {"step_number": memory_step.step_number, "is_final_answer": bool(memory_step.is_final_answer)},
        })

    coder = CodeAgent(
        tools=[],
        model=GatewayModel("coder"),
        name="coder",
        description=prompts["coder_description"],
        instructions=prompts["coder"],
        max_steps=cfg.get("coder_max_steps", 4),
        step_callbacks=[capture],
        verbosity_level=0,
        additional_authorized_imports=cfg.get("authorized_imports", []),
        executor_kwargs={"timeout_seconds": cfg.get("coder_code_timeout_s", 30)},
    )
    manager = CodeAgent(
        tools=[],
        model=GatewayModel("manager"),
        managed_agents=[coder],
        name="manager",
        instructions=prompts["manager"],
        max_steps=cfg.get("manager_max_steps", 4),
        step_callbacks=[capture],
        verbosity_level=0,
        additional_authorized_imports=cfg.get("authorized_imports", []),
        executor_kwargs={"timeout_seconds": cfg.get("manager_code_timeout_s")},
    )

    def result(final: Any) -> dict[str, Any]:
        ordered = sorted(steps, key=lambda s: s["index"])
        return {"steps": ordered, "final_answer": None if final is None else str(final),
                "framework_version": smolagents.__version__}

    outcome: dict[str, Any] = {"final": None}

    def work() -> None:
        outcome["final"] = manager.run(episode["task"]["prompt"])

    return _episode.kept_steps(work, lambda: result(outcome["final"]))


def run_tools(episode: dict[str, Any]) -> dict[str, Any]:
    """One BFCL episode: every user turn a run of the manager, which delegates the calls to the caller."""
    import smolagents
    from smolagents import Tool, ToolCallingAgent
    from smolagents.memory import ActionStep

    import _bfcl_tools

    cfg = episode["config"]
    prompts = cfg["prompts"]
    server = _bfcl_tools.ToolServer(episode["task"])
    state: dict[str, Any] = {"next": 0, "active": None, "pending": {}, "turn": 0}
    steps: list[dict[str, Any]] = []

    GatewayModel = gateway_model(episode, state)

    def make_tool(doc: dict[str, Any]) -> Any:
        """A smolagents `Tool` for one BFCL function: its inputs typed as BFCL's handlers type them, optional ones
        nullable; calling it runs the function on the episode's simulators."""
        parameters = _bfcl_tools.openai_tools([doc])[0]["function"]["parameters"]
        required = set(parameters.get("required") or [])
        inputs = {key: {"type": value["type"], "description": value.get("description") or key,
                        **({} if key in required else {"nullable": True})}
                  for key, value in parameters["properties"].items()}

        def forward(self, **arguments: Any) -> str:
            return server.call(doc["name"], arguments, state["pending"].get("caller"))[0]

        cls = type(f"BFCL_{doc['name']}", (Tool,), {
            "name": doc["name"], "description": doc.get("description") or doc["name"], "inputs": inputs,
            "output_type": "string", "skip_forward_signature_validation": True, "forward": forward})
        return cls()

    def capture(memory_step, agent=None):  # noqa: ANN001 - smolagents' callback
        if not isinstance(memory_step, ActionStep):
            return
        name = agent.name if agent is not None and agent.name else "manager"
        index = state["pending"].pop(name, None)
        made_by_llm = index is not None
        if index is None:
            index = state["next"]
            state["next"] += 1
        observation = memory_step.observations
        if memory_step.error is not None:
            observation = ((observation or "") + f"\nError: {memory_step.error}").strip()
        # the model's own tool calls, in the OpenAI form (an intervention restates them: `Intervention.tool_calls`)
        calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                 for c in memory_step.tool_calls or []]
        steps.append({"index": index, "agent": name, "kind": "agent" if made_by_llm else "environment",
                      "content": str(memory_step.model_output or ""), "tool_calls": calls, "observation": observation,
                      "started_at": memory_step.timing.start_time,
                      "metadata": {"turn": state["turn"], "step_number": memory_step.step_number,
                                   "is_final_answer": bool(memory_step.is_final_answer)}})
        for j, record in enumerate(r for r in server.calls if r["step"] == index):
            steps.append({"index": _bfcl_tools.tool_index(index, j), **_bfcl_tools.tool_step(
                "tools", record["turn"], record["result"], record["name"], record["arguments"], record,
                asked_by_index=index)})

    caller = ToolCallingAgent(tools=[make_tool(doc) for doc in server.offered], model=GatewayModel("caller"), max_tool_threads=1,
                              name="caller", description=prompts["caller_description"], instructions=prompts["caller"],
                              max_steps=cfg.get("caller_max_steps", 6), step_callbacks=[capture], verbosity_level=0)
    manager = ToolCallingAgent(tools=[], model=GatewayModel("manager"), managed_agents=[caller], name="manager",
                               instructions=prompts["manager"], max_steps=cfg.get("manager_max_steps", 4),
                               step_callbacks=[capture], verbosity_level=0)

    def collected() -> dict[str, Any]:
        out = _bfcl_tools.in_order(steps)
        final = next((s["content"] for s in reversed(out) if s["agent"] == "manager" and s["kind"] == "agent"), None)
        return {"steps": out, "final_answer": final, "framework_version": smolagents.__version__}

    def turns() -> None:
        for turn, text in _bfcl_tools.turns_to_run(episode):
            state["turn"] = turn
            for doc in server.start_turn(turn):  # miss_func: a held-back function appears at its turn
                caller.tools[doc["name"]] = make_tool(doc)
            steps.append({"index": state["next"], "agent": "user", "kind": "human", "role": "user", "content": text,
                          "metadata": {"turn": turn}})
            state["next"] += 1
            manager.run(text, reset=(turn == 0))

    return _episode.kept_steps(turns, collected)


if __name__ == "__main__":
    _episode.main(lambda episode: run_tools(episode) if episode["config"].get("tools") else run(episode))
