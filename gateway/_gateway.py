"""The gateway: runs registered with their context, and one call's way through record or replay.

Every answered call becomes one `LLMCall` journaled (fsync'd) before the client gets the answer: live
calls (`mode="live"`), prefix calls served from the recording (`"replayed"`), the intervention
(`"forced"`) and cache hits (`"cached"`). A failed provider call is journaled as an error row. A call
whose client goes away before the answer is complete writes nothing, and its occurrence counter is given
back, so the recording holds only calls a client received whole. A run that ends (`Gateway.unregister`, e.g.
an episode cut by its time limit) cancels its live calls still in flight: a local model stops generating an
answer no client will read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Mapping

from rootstep.model import LLMCall, Usage

from ._cache import ResponseCache, cacheable
from ._chunks import to_chunks
from ._context import RunContext
from ._hashing import redact, request_hash, scrub
from ._providers import ProviderCall, ProviderError, Providers, assemble, provider_name
from ._recorder import Journal
from ._replay import ReplayDivergence, ReplayPlan

if TYPE_CHECKING:  # pragma: no cover
    from rootstep.model import CallPurpose
    from rootstep.warehouse import Warehouse, WriteReport

log = logging.getLogger("rootstep.gateway")


class UnknownRun(LookupError):
    """A call for a run that was never registered with this gateway."""


class UnattributedRequest(ValueError):
    """A call of a run with declared agents that names no declared agent (URL, header or system prompt)."""


class RunEnded(ProviderError):
    """A live call cancelled because its run was unregistered while the provider was still answering."""

    def __init__(self, run_id: str):
        super().__init__(410, "run_ended", f"run {run_id!r} ended while this call was in flight; the call was stopped")


@dataclass
class RunStats:
    """What a run's calls cost: how many went live and how many the recording or cache served."""

    live: int = 0
    replayed: int = 0
    forced: int = 0
    cached: int = 0
    errors: int = 0
    aborted: int = 0
    """Calls whose client disconnected before the answer was complete (nothing journaled)."""
    cancelled: int = 0
    """Live calls still in flight when the run ended (unregistered): stopped, nothing journaled."""
    divergence: str | None = None
    unattributed: int = 0
    """Calls refused because no declared agent matched them (`Gateway.agent_for`)."""
    unattributed_reason: str | None = None
    """Why the first of them was refused."""

    @property
    def usage(self) -> Usage:
        """The run's calls as a cost: live calls (paid) and calls served from the recording (free)."""
        return Usage(llm_calls=self.live, replayed_calls=self.replayed)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Run:
    ctx: RunContext
    plan: ReplayPlan | None
    counters: dict[tuple[str, str], int] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)
    """Provider calls being answered live (each its own task, on the gateway's event loop)."""
    ended: bool = False

    def take_counter(self, agent: str, digest: str) -> int:
        with self.lock:
            n = self.counters.get((agent, digest), 0)
            self.counters[(agent, digest)] = n + 1
            return n

    def give_back_counter(self, agent: str, digest: str, counter: int) -> None:
        with self.lock:
            if self.counters.get((agent, digest)) == counter + 1:
                self.counters[(agent, digest)] = counter


@dataclass
class CallMeta:
    """What the client said about a call besides its body (from headers): purpose and step."""

    purpose: "CallPurpose" = "step"
    step_index: int | None = None


class Gateway:
    """Registered runs, the journal, the providers and the optional cache.

    `journal_dir` holds one JSONL file per run (see `Journal`); `cache_dir` enables the response cache
    for runs that opt in (`RunContext.cache`).
    """

    def __init__(
        self,
        journal_dir: str | os.PathLike[str],
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        providers: Providers | None = None,
        fsync: bool = True,
    ):
        from ._local_model import install_local_provider as install_local
        from ._scripted import install_scripted_provider as install_scripted

        install_scripted()
        install_local()
        self.journal = Journal(journal_dir, fsync=fsync)
        self.cache = None if cache_dir is None else ResponseCache(cache_dir)
        self.providers = providers or Providers()
        self.default_run_id: str | None = None
        self._runs: dict[str, _Run] = {}
        self._secrets: set[str] = set()
        _install_log_scrubber(self._secrets)

    # ------------------------------------------------------------------ runs

    def register(self, ctx: RunContext, *, default: bool = False) -> None:
        """Start (or resume, after a gateway restart) a run; replay runs load their recording here.

        A run that already has journaled calls continues their occurrence counters, so calls made after
        a restart get the ids they would have had without it; a replay whose intervention was already
        served stays live.
        """
        plan = None
        if ctx.mode == "replay":
            recorded = ctx.recorded if ctx.recorded is not None else self.journal.calls(ctx.replay_of or "")
            if not recorded:
                raise ValueError(f"replay of {ctx.replay_of!r}: no recorded calls (journal {self.journal.path(ctx.replay_of or '')})")
            plan = ReplayPlan(
                ctx.replay_of or "",
                recorded,
                ctx.intervention,
                call_position=ctx.intervention_call,
                step_calls=ctx.step_calls,
            )
        run = _Run(ctx=ctx, plan=plan)
        for call in self.journal.calls(ctx.run_id):
            key = (call.agent, call.request_hash)
            run.counters[key] = max(run.counters.get(key, 0), call.counter + 1)
            if plan is not None and call.mode == "forced":
                plan.live = True  # resumed after a restart: the intervention was already served
        if ctx.api_key is not None:
            self._secrets.add(ctx.secret() or "")
        self._runs[ctx.run_id] = run
        if default:
            self.default_run_id = ctx.run_id

    def unregister(self, run_id: str) -> RunStats:
        """End a run: its stats, after cancelling its live calls still in flight (`RunStats.cancelled`).

        Safe from any thread: the cancellation is handed to each call's event loop."""
        run = self._runs.pop(run_id)
        with run.lock:
            run.ended = True
            in_flight = [task for task in run.in_flight if not task.done()]
        run.stats.cancelled += len(in_flight)
        for task in in_flight:
            try:
                task.get_loop().call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop is closed (the server stopped): nothing runs there any more
                pass
        if in_flight:
            log.info("run %s ended with %d call(s) in flight: cancelled", run_id, len(in_flight))
        return run.stats

    def run(self, run_id: str | None) -> _Run:
        run_id = run_id or self.default_run_id
        if run_id is None or run_id not in self._runs:
            known = ", ".join(sorted(self._runs)) or "none"
            raise UnknownRun(f"run {run_id!r} is not registered with the gateway (registered: {known})")
        return self._runs[run_id]

    def runs(self) -> list[RunContext]:
        return [r.ctx for r in self._runs.values()]

    def stats(self, run_id: str) -> RunStats:
        return self.run(run_id).stats

    def agent_for(self, run_id: str | None, url_agent: str | None, headers: Mapping[str, str],
                  body: dict[str, Any]) -> str:
        """The agent a call belongs to: its URL's agent, else the run's agent header, else the first of the
        run's `agent_prompts` found in its system message, else `X-Rootstep-Agent`, else `unknown`.

        A run with declared `agents` refuses (UnattributedRequest, counted in its stats) a call whose agent is
        none of them, naming the rule's source and what the call showed."""
        try:
            run = self.run(run_id)
        except UnknownRun:
            return url_agent or headers.get("x-rootstep-agent") or "unknown"
        ctx = run.ctx
        agent = url_agent
        tried: list[str] = [] if agent is None else [f"its URL gave {agent!r}"]
        if agent is None and ctx.agent_header:
            agent = headers.get(ctx.agent_header.lower())
            tried.append(f"header {ctx.agent_header} gave " + ("nothing" if agent is None else repr(agent)))
        if agent is None and ctx.agent_prompts:
            system = system_text(body)
            agent = next((name for pattern, name in ctx.agent_prompts if re.search(pattern, system)), None)
            tried.append(f"system prompt {system[:120]!r} " + ("matched no pattern" if agent is None else f"gave {agent!r}"))
        if agent is None and headers.get("x-rootstep-agent"):
            agent = headers["x-rootstep-agent"]
            tried.append(f"header X-Rootstep-Agent gave {agent!r}")
        if not ctx.agents:
            return agent or "unknown"
        if agent in ctx.agents:
            return agent
        source = f" of {ctx.attribution_source}" if ctx.attribution_source else ""
        reason = (f"run {ctx.run_id}: a request matches no agent{source} (agents: {', '.join(ctx.agents)}); "
                  + ("; ".join(tried) or "it has no agent in its URL and the run has no header or prompt rules"))
        with run.lock:
            run.stats.unattributed += 1
            run.stats.unattributed_reason = run.stats.unattributed_reason or reason
        raise UnattributedRequest(reason)

    def calls(self, run_id: str) -> list[LLMCall]:
        """The run's journaled calls, in the order they were answered."""
        return self.journal.calls(run_id)

    def flush(self, warehouse: "Warehouse", run_ids: list[str] | None = None) -> "WriteReport":
        """Copy journaled calls into the warehouse's `llm_calls` (idempotent: ids are content-derived)."""
        return self.journal.flush_to_warehouse(warehouse, run_ids)

    def close(self) -> None:
        self.journal.close()

    # ------------------------------------------------------------------ one call

    def _row(self, run: _Run, agent: str, digest: str, counter: int, meta: CallMeta, body: dict[str, Any],
             response: dict[str, Any], mode: str, latency: float, error: str | None = None,
             source: LLMCall | None = None) -> LLMCall:
        """One journal row. A replayed row keeps the model, provider and `simulated` flag of the recorded
        call it serves (`source`); a forced row is never simulated: the intervention wrote it."""
        model = source.model if source is not None else run.ctx.model_for(agent)
        provider = source.provider if source is not None else provider_name(model)
        simulated = source.simulated if source is not None else provider == "scripted" and mode in ("live", "cached")
        usage = response.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        return LLMCall(
            run_id=run.ctx.run_id,
            framework=run.ctx.framework,
            benchmark=run.ctx.benchmark,
            agent=agent,
            request_hash=digest,
            counter=counter,
            model=model,
            provider=provider,
            mode=mode,  # type: ignore[arg-type]
            simulated=simulated,
            purpose=meta.purpose,
            step_index=meta.step_index,
            request=redact(body),
            response=response,
            latency_s=latency,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=_cost(model, prompt, completion) if mode == "live" else 0.0,
            error=error,
        )

    def _write(self, run: _Run, call: LLMCall) -> None:
        self.journal.append(call)
        if call.error is not None:
            run.stats.errors += 1
        else:
            setattr(run.stats, call.mode, getattr(run.stats, call.mode) + 1)

    def _provider_call(self, run: _Run, agent: str) -> ProviderCall:
        ctx = run.ctx
        return ProviderCall(ctx.model_for(agent), ctx.secret(), ctx.api_base, dict(ctx.litellm_kwargs))

    def _served(self, run: _Run, agent: str, digest: str, counter: int, body: dict[str, Any],
                meta: CallMeta) -> tuple[str, dict[str, Any], LLMCall | None] | None:
        """A response that needs no provider: from the recording, the intervention or the cache."""
        if run.plan is not None:
            try:
                decision, value = run.plan.decide(agent, digest, counter, body)
            except ReplayDivergence as exc:
                run.stats.divergence = str(exc)
                run.give_back_counter(agent, digest, counter)
                raise
            if decision == "replayed":
                if value.error is not None:  # the recorded call failed: so does its replay
                    self._write(run, self._row(run, agent, digest, counter, meta, body, value.response, "replayed",
                                               0.0, value.error, source=value))
                    raise _replayed_error(value)
                return "replayed", value.response, value
            if decision == "forced":
                return "forced", value, None
        if self.cache is not None and run.ctx.cache and cacheable(body):
            hit = self.cache.get(run.ctx.model_for(agent), body)
            if hit is not None:
                return "cached", hit, None
        return None

    def _error_row(self, run: _Run, agent: str, digest: str, counter: int, meta: CallMeta, body: dict[str, Any],
                   exc: ProviderError, latency: float) -> None:
        error = scrub(str(exc), list(self._secrets))
        response = {"error": {"message": error, "type": exc.kind, "code": exc.status_code}}
        self._write(run, self._row(run, agent, digest, counter, meta, body, response, "live", latency, error))

    def _begin(self, run_id: str | None, agent: str, body: dict[str, Any], meta: CallMeta | None
               ) -> tuple[CallMeta, _Run, str, int, float, tuple[str, dict[str, Any], LLMCall | None] | None]:
        """A call's start: its meta, run, request hash and occurrence counter (taken), start time, and the
        answer the recording, the intervention or the cache serves (None: it goes live)."""
        meta = meta or CallMeta()
        run = self.run(run_id)
        digest = request_hash(body)
        counter = run.take_counter(agent, digest)
        return meta, run, digest, counter, time.perf_counter(), self._served(run, agent, digest, counter, body, meta)

    async def complete(self, run_id: str | None, agent: str, body: dict[str, Any], meta: CallMeta | None = None) -> tuple[LLMCall, dict[str, Any]]:
        """Answer one non-streaming call; returns the journaled row and the response for the client."""
        meta, run, digest, counter, started, served = self._begin(run_id, agent, body, meta)
        source = None
        if served is not None:
            mode, response, source = served
        else:
            mode = "live"
            body = self._provider_body(run, agent, body)
            provider = asyncio.ensure_future(self.providers.complete(self._provider_call(run, agent), body))
            with run.lock:
                if run.ended:
                    provider.cancel()
                run.in_flight.add(provider)
            try:
                response = await provider
            except ProviderError as exc:
                self._error_row(run, agent, digest, counter, meta, body, exc, time.perf_counter() - started)
                raise
            except asyncio.CancelledError:  # nothing to journal
                run.give_back_counter(agent, digest, counter)
                current = asyncio.current_task()
                if provider.cancelled() and run.ended and not (current and current.cancelling()):
                    raise RunEnded(run.ctx.run_id) from None  # the run ended: the call was stopped
                run.stats.aborted += 1  # the server gave up on the call
                raise
            finally:
                with run.lock:
                    run.in_flight.discard(provider)
            self._maybe_cache(run, agent, body, response)
        call = self._row(run, agent, digest, counter, meta, body, response, mode, time.perf_counter() - started,
                         source=source)
        self._write(run, call)
        return call, response

    async def stream(self, run_id: str | None, agent: str, body: dict[str, Any], meta: CallMeta | None = None) -> AsyncIterator[dict[str, Any]]:
        """Answer one streaming call chunk by chunk; the row is journaled once the answer is whole.

        The first item is `{"call_id": ...}` (for the response header); the rest are chunks. If the
        consumer stops early (the client disconnected), nothing is journaled.
        """
        meta, run, digest, counter, started, served = self._begin(run_id, agent, body, meta)
        done = False
        try:
            if served is not None:
                mode, response, source = served
                call = self._row(run, agent, digest, counter, meta, body, response, mode, time.perf_counter() - started,
                                 source=source)
                yield {"call_id": call.id}
                served_chunks = list(to_chunks(response))
                for chunk in served_chunks[:-1]:
                    yield chunk
                self._write(run, call)
                done = True
                yield served_chunks[-1]
                return
            chunks: list[dict[str, Any]] = []
            body = self._provider_body(run, agent, body)
            provider_call = self._provider_call(run, agent)
            row_id = LLMCall.model_construct(run_id=run.ctx.run_id, agent=agent, request_hash=digest, counter=counter).id
            yield {"call_id": row_id}
            try:
                async for chunk in self.providers.stream(provider_call, body):
                    chunks.append(chunk)
                    yield chunk
            except ProviderError as exc:
                self._error_row(run, agent, digest, counter, meta, body, exc, time.perf_counter() - started)
                done = True
                raise
            response = assemble(chunks)
            self._maybe_cache(run, agent, body, response)
            self._write(run, self._row(run, agent, digest, counter, meta, body, response, "live", time.perf_counter() - started))
            done = True
        finally:
            if not done:
                run.stats.aborted += 1
                run.give_back_counter(agent, digest, counter)
                if served is not None and served[0] == "forced" and run.plan is not None:
                    run.plan.live = False  # the intervention was never delivered: serve it again

    @staticmethod
    def _provider_body(run: _Run, agent: str, body: dict[str, Any]) -> dict[str, Any]:
        """The body a live call sends (and journals as its request): a persistent intervention's
        instruction is appended for its agent; the request hash stays that of what the client sent."""
        return body if run.plan is None else run.plan.provider_body(agent, body)

    def _maybe_cache(self, run: _Run, agent: str, body: dict[str, Any], response: dict[str, Any]) -> None:
        if self.cache is not None and run.ctx.cache and cacheable(body):
            self.cache.put(run.ctx.model_for(agent), body, response)


def system_text(body: dict[str, Any]) -> str:
    """The text of a chat request's system (or developer) messages, joined."""
    parts: list[str] = []
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            content = message.get("content")
            if isinstance(content, list):
                parts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
            elif content is not None:
                parts.append(str(content))
    return "\n".join(parts)


def _replayed_error(call: LLMCall) -> ProviderError:
    error = call.response.get("error") or {}
    return ProviderError(int(error.get("code") or 502), str(error.get("type") or "provider_error"),
                         f"(replayed from the recording) {call.error}")


def _cost(model: str, prompt: int, completion: int) -> float:
    if not (prompt or completion) or provider_name(model) in ("scripted", "local"):
        return 0.0
    try:
        import litellm

        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=completion)
        return float(p + c)
    except Exception:  # unknown price: litellm has no entry for this model
        return 0.0


class _Scrubber(logging.Filter):
    def __init__(self, secrets: set[str]):
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            cleaned = scrub(message, list(self.secrets))
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


def _install_log_scrubber(secrets: set[str]) -> None:
    """Scrub the gateway's API keys from every record of the loggers that may see them."""
    for name in ("rootstep.gateway", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "uvicorn.error", "uvicorn.access", "httpx"):
        logger = logging.getLogger(name)
        logger.filters = [f for f in logger.filters if not isinstance(f, _Scrubber)]
        logger.addFilter(_Scrubber(secrets))
