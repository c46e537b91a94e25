"""A system file's program, run inside its sandbox image (`rootstep.adapters._command`).

The program's files are in `program/`; it runs there with
- `$<task env>` (default `ROOTSTEP_TASK_FILE`): a JSON file with the task as the program may see it
  (benchmark, task id, kind, prompt, the answer format's instruction, entry point, visible tests; never the
  ground truth or the hidden tests);
- `OPENAI_BASE_URL` (the run's gateway URL), `OPENAI_API_KEY` (a placeholder: the gateway holds the key),
  `ROOTSTEP_AGENT_URL_<AGENT>` and `ROOTSTEP_AGENT_URLS` (each agent's own URL), `ROOTSTEP_MODEL`,
  `ROOTSTEP_ANSWER_FILE`.
Steps are not the driver's business: the host builds them from the gateway's journal. The driver reports
the final answer (the answer file, or the last non-empty line of stdout), the exit code and the ends of
stdout and stderr.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import _episode

TAIL = 4000


def _env_name(agent: str) -> str:
    return "ROOTSTEP_AGENT_URL_" + re.sub(r"[^A-Za-z0-9]", "_", agent).upper()


def run(episode: dict[str, Any]) -> dict[str, Any]:
    cfg = episode["config"]
    # the program shares this folder: it sees the task only as its task file gives it
    for name in ("episode.json", "_episode.py"):
        if os.path.exists(name):
            os.remove(name)
    workdir = os.path.abspath("program")
    task_file = os.path.abspath("rootstep_task.json")
    with open(task_file, "w", encoding="utf-8") as f:
        json.dump(cfg["program_task"], f, ensure_ascii=False, indent=1)
    answer_file = os.path.join(workdir, cfg["answer"]["file"])
    gateway = (os.environ.get("ROOTSTEP_GATEWAY_URL") or episode["gateway_url"]).rstrip("/")
    run_url = f"{gateway}/run/{episode['run_id']}/v1"
    urls = {agent: _episode.agent_base_url(episode, agent) for agent in cfg["agents"]}
    env = {
        **os.environ,
        cfg["task_env"]: task_file,
        "OPENAI_BASE_URL": run_url,
        "OPENAI_API_BASE": run_url,
        "OPENAI_API_KEY": "unused-the-gateway-holds-the-key",
        "ROOTSTEP_MODEL": cfg.get("model_alias", "rootstep"),
        "ROOTSTEP_AGENT_URLS": json.dumps(urls),
        "ROOTSTEP_ANSWER_FILE": answer_file,
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
        **{_env_name(agent): url for agent, url in urls.items()},
    }
    env.pop("ROOTSTEP_GATEWAY_URL", None)
    if os.path.exists(answer_file):
        os.remove(answer_file)
    try:
        proc = subprocess.run(list(cfg["command"]), cwd=workdir, env=env, capture_output=True, text=True,
                              errors="replace", timeout=float(cfg["timeout_s"]))
        exit_code, stdout, stderr, timed_out = proc.returncode, proc.stdout, proc.stderr, False
    except subprocess.TimeoutExpired as exc:
        def text(value: Any) -> str:
            return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")

        exit_code, stdout, stderr, timed_out = None, text(exc.stdout), text(exc.stderr), True
    except OSError as exc:  # the command itself cannot be started
        exit_code, stdout, stderr, timed_out = 127, "", f"{type(exc).__name__}: {exc}", False
    if cfg["answer"]["source"] == "file":
        answer = None
        if os.path.exists(answer_file):
            with open(answer_file, encoding="utf-8", errors="replace") as f:
                answer = f.read().strip() or None
    else:
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        answer = lines[-1] if lines else None
    return {
        "steps": [],
        "final_answer": answer,
        "framework_version": cfg.get("version"),
        "program": {"exit_code": exit_code, "timed_out": timed_out, "stdout_tail": stdout[-TAIL:],
                    "stderr_tail": stderr[-TAIL:]},
    }


def main() -> None:
    """Unlike the framework drivers (`_episode.main`), nothing is patched: the program is another process."""
    try:
        result = run(_episode.load_episode())
    except BaseException as exc:  # noqa: BLE001 - reported to the host
        import traceback

        _episode.emit({"steps": [], "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]})
        sys.exit(1)
    _episode.emit(result)


if __name__ == "__main__":
    main()
