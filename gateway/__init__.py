"""The LLM gateway: one local OpenAI-compatible endpoint that records, replays and intervenes.

Every framework is pointed at `/run/<run_id>/agent/<agent>/v1`. In record mode calls go to the real
model through litellm and are journaled as `LLMCall` rows; in replay mode the recorded prefix is served,
the intervention forced, and later calls go live. See docs/gateway.md.

Public face:
- `Gateway`, `RunContext`, `RunStats`, `CallMeta`: the core and a run's context.
- `DEFAULT_MODEL`, `DEFAULT_ANNOTATOR_MODEL`, `DEFAULT_SCORER_MODEL`: the default model strings (one source).
- `GatewayServer`, `create_app`: the HTTP server, in a thread or (`rootstep gateway serve`) a process.
- `ReplayDivergence`, `ReplayPlan`, `forced_response`, `intervention_position`: replay.
- `Journal`: the fsync'd per-run JSONL journal; `ResponseCache`: the opt-in temperature-0 cache.
- `register_script`, `Script`: the `scripted/<name>` provider; `LocalLLM`: the offline `local/` provider.
- `request_hash`, `canonical_request`, `redact`, `scrub`: hashing and secret stripping.
- `install_local_provider`, `install_scripted_provider`, `engine`, `gguf_path`, `LOCAL_MODELS`: the offline providers.
"""

import os as _os

# litellm fetches its price table from the network at import unless told not to; no network here.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from typing import TYPE_CHECKING

from rootstep.model import lazy_exports

# Lazy public face: `rootstep --help` and `rootstep.gateway.cli` must not pay for importing
# litellm (seconds); each name loads its module on first use.
_EXPORTS = {
    "ResponseCache": "_cache",
    "Chat": "_chat",
    "GatewayCallError": "_chat",
    "DEFAULT_ANNOTATOR_MODEL": "_defaults",
    "DEFAULT_MODEL": "_defaults",
    "DEFAULT_SCORER_MODEL": "_defaults",
    "GatewayMode": "_context",
    "RunContext": "_context",
    "CallMeta": "_gateway",
    "Gateway": "_gateway",
    "RunEnded": "_gateway",
    "RunStats": "_gateway",
    "UnknownRun": "_gateway",
    "UnattributedRequest": "_gateway",
    "canonical_request": "_hashing",
    "redact": "_hashing",
    "scrub": "_hashing",
    "request_hash": "_hashing",
    "LOCAL_MODELS": "_local_weights",
    "GGUFError": "_gguf",
    "gguf_metadata": "_gguf",
    "engine": "_local_model",
    "gguf_path": "_local_model",
    "install_local_provider": "_local_model",
    "LocalLLM": "_local_model",
    "ProviderError": "_providers",
    "Providers": "_providers",
    "register_provider": "_providers",
    "Journal": "_recorder",
    "ReplayDivergence": "_replay",
    "ReplayPlan": "_replay",
    "forced_response": "_replay",
    "intervention_position": "_replay",
    "SCRIPTED_FINGERPRINT": "_scripted",
    "Script": "_scripted",
    "ScriptedLLM": "_scripted",
    "register_script": "_scripted",
    "install_scripted_provider": "_scripted",
    "GatewayServer": "_server",
    "create_app": "_server",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from ._cache import ResponseCache
    from ._chat import Chat, GatewayCallError
    from ._context import GatewayMode, RunContext
    from ._defaults import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL, DEFAULT_SCORER_MODEL
    from ._gateway import CallMeta, Gateway, RunEnded, RunStats, UnattributedRequest, UnknownRun
    from ._hashing import canonical_request, redact, request_hash, scrub
    from ._local_model import LocalLLM, engine, gguf_path, install_local_provider
    from ._gguf import GGUFError, gguf_metadata
    from ._local_weights import LOCAL_MODELS
    from ._providers import ProviderError, Providers, register_provider
    from ._recorder import Journal
    from ._replay import ReplayDivergence, ReplayPlan, forced_response, intervention_position
    from ._scripted import SCRIPTED_FINGERPRINT, Script, ScriptedLLM, install_scripted_provider, register_script
    from ._server import GatewayServer, create_app

__all__ = [
    "Chat",
    "GatewayCallError",
    "DEFAULT_ANNOTATOR_MODEL",
    "DEFAULT_MODEL",
    "DEFAULT_SCORER_MODEL",
    "LOCAL_MODELS",
    "SCRIPTED_FINGERPRINT",
    "CallMeta",
    "GGUFError",
    "Gateway",
    "GatewayMode",
    "GatewayServer",
    "Journal",
    "LocalLLM",
    "ProviderError",
    "Providers",
    "ReplayDivergence",
    "ReplayPlan",
    "ResponseCache",
    "RunContext",
    "RunEnded",
    "RunStats",
    "Script",
    "ScriptedLLM",
    "UnattributedRequest",
    "UnknownRun",
    "canonical_request",
    "create_app",
    "engine",
    "forced_response",
    "gguf_metadata",
    "gguf_path",
    "install_local_provider",
    "install_scripted_provider",
    "intervention_position",
    "redact",
    "register_provider",
    "register_script",
    "request_hash",
    "scrub",
]
