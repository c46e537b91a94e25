"""AG2 (autogen 0.14): `autogen.runtime_logging` SQLite databases, and GroupChat message lists.

* SQLite (`runtime_logging.start(logger_type="sqlite")`): one trajectory per `session_id`. Each row of
  `chat_completions` (in start order) is an agent step of its `source_name` (the response's text and tool
  calls; the source id is the row's `invocation_id`); the messages of a request that no earlier response
  produced (the task, a user proxy's replies) come before it as human steps; `function_calls` rows are
  tool steps, placed by their timestamp. Agents of class `UserProxyAgent` are human.
* GroupChat messages (`groupchat.messages` as JSON, `[{"content", "role", "name"}, ...]`): a step per
  message, the agent is `name`; `tool`/`function` roles are tool steps, a user proxy (`User`, `user_proxy`,
  `human`) is human. The source id is the message's position.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from rootstep.model import InputError, StepKind, Trajectory
from ._build import SourceStep, build_trajectory, from_iso, text_of, tool_call

SQLITE_MAGIC = b"SQLite format 3\x00"
_HUMAN = re.compile(r"^(user|human|user[_ ]?proxy|admin)$", re.IGNORECASE)


def is_ag2_messages(data: Any) -> tuple[bool, str]:
    if isinstance(data, list) and data and all(isinstance(m, dict) and "content" in m and "role" in m for m in data) \
            and any("name" in m for m in data):
        return True, "a list of {content, role, name} messages"
    return False, "not a GroupChat message list ([{content, role, name}, ...])"


def is_ag2_sqlite(path: Path) -> tuple[bool, str]:
    try:
        with path.open("rb") as f:
            magic = f.read(16)
    except OSError as exc:
        return False, f"cannot be read ({exc.strerror})"
    if magic != SQLITE_MAGIC:
        return False, "not an SQLite database"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        return False, f"an unreadable SQLite database ({exc})"
    if "chat_completions" not in tables:
        return False, "an SQLite database without autogen's `chat_completions` table"
    return True, "autogen runtime-logging tables"


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        out.append(tool_call(str(function.get("name", "")), function.get("arguments"), call.get("id")))
    if isinstance(message.get("function_call"), dict):
        out.append(tool_call(str(message["function_call"].get("name", "")), message["function_call"].get("arguments")))
    return out


def load_messages(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    steps = []
    for i, m in enumerate(data):
        if not isinstance(m, dict):
            raise InputError(file, f"[{i}]", "expected a message object")
        if not isinstance(m.get("content", ""), (str, list, type(None))):
            raise InputError(file, f"[{i}].content", f"expected a string, found {type(m['content']).__name__}")
        role = str(m.get("role") or "")
        name = str(m.get("name") or role or "unknown")
        kind: StepKind = "tool" if role in ("tool", "function") else "human" if _HUMAN.match(name) else "agent"
        steps.append(SourceStep(agent=name, kind=kind, content=text_of(m.get("content")), source_id=f"message[{i}]",
                                tool_calls=_calls(m), role=role or None))
    question = next((s.content for s in steps if s.kind == "human"), steps[0].content if steps else "")
    return [build_trajectory(file, "ag2", steps, trace={"trace_id": None}, framework=framework or "ag2",
                             benchmark=benchmark or "imported-traces", task_id=Path(file).stem, question=question,
                             final_answer=next((s.content for s in reversed(steps) if s.kind == "agent"), None))]


def _json(text: Any, file: str, where: str) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise InputError(file, where, f"malformed JSON: {exc.msg}") from None


def load_sqlite(path: Path, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        con.row_factory = sqlite3.Row
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        completions = [dict(r) for r in con.execute("SELECT * FROM chat_completions ORDER BY start_time, id")]
        classes = {r["name"]: r["class"] for r in con.execute("SELECT name, class FROM agents")} if "agents" in tables else {}
        functions = [dict(r) for r in con.execute("SELECT * FROM function_calls ORDER BY timestamp")] if "function_calls" in tables else []
    sessions: dict[str, list[tuple[str, int, SourceStep]]] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    for row in completions:
        where = f"chat_completions id {row['id']}"
        session = str(row.get("session_id") or "session")
        request = _json(row.get("request"), file, f"{where}: request")
        response = _json(row.get("response"), file, f"{where}: response")
        items, known = sessions.setdefault(session, []), seen.setdefault(session, set())
        stamp = str(row.get("start_time") or "")
        for message in (request or {}).get("messages", []) if isinstance(request, dict) else []:
            if not isinstance(message, dict) or message.get("role") == "system":
                continue
            author = str(message.get("name") or message.get("role") or "user")
            key = (author, text_of(message.get("content")))
            if key in known:
                continue
            known.add(key)
            human = classes.get(author) == "UserProxyAgent" or _HUMAN.match(author) is not None
            items.append((stamp, len(items), SourceStep(agent=author, kind="human" if human else "agent", content=key[1],
                                                        source_id=f"{where}: request", role=message.get("role"))))
        if not isinstance(response, dict) or not isinstance(response.get("choices"), list) or not response["choices"]:
            raise InputError(file, f"{where}: response.choices", "missing: expected an OpenAI chat completion")
        message = response["choices"][0].get("message") or {}
        agent = str(row.get("source_name") or "agent")
        text = text_of(message.get("content"))
        known.add((agent, text))
        items.append((stamp, len(items), SourceStep(
            agent=agent, kind="agent", content=text, source_id=str(row.get("invocation_id") or row["id"]),
            tool_calls=_calls(message), started_at=from_iso(stamp.replace(" ", "T")), role="assistant",
            extra={"completion_id": row["id"], "model": response.get("model")})))
    for row in functions:
        session = str(row.get("session_id") or "session")
        stamp = str(row.get("timestamp") or "")
        sessions.setdefault(session, []).append((stamp, 10**9, SourceStep(
            agent=str(row.get("source_name") or "tool"), kind="tool", content=text_of(row.get("returns")),
            source_id=f"function_calls {row.get('function_name')} {stamp}",
            tool_calls=[tool_call(str(row.get("function_name") or ""), _json(row.get("args"), file, "function_calls.args"))],
            started_at=from_iso(stamp.replace(" ", "T")))))
    if not sessions:
        raise InputError(file, "chat_completions", "is empty: the runtime log holds no LLM call")
    out = []
    for session, items in sessions.items():
        steps = [s for _, _, s in sorted(items, key=lambda item: (item[0], item[1]))]
        question = next((s.content for s in steps if s.kind == "human"), "")
        out.append(build_trajectory(
            file, "ag2", steps, trace={"trace_id": session, "session_id": session}, framework=framework or "ag2",
            benchmark=benchmark or "imported-traces", task_id=session, question=question,
            final_answer=next((s.content for s in reversed(steps) if s.kind == "agent"), None),
            model=next((s.extra.get("model") for s in steps if s.extra.get("model")), None),
            started_at=steps[0].started_at,
        ))
    return out
