"""Which trace format a file is in, and reading it into trajectories.

`detect_format` tries each format's own check in turn and, when none matches, raises an `InputError`
naming the shape when it is a known one rootstep does not read (and the format it resembles), then every
format tried and why it did not match. A file that is empty, or JSON that ends early (a truncated
download or a writer that died), is refused as such, with the line and column where it stops.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rootstep.model import Annotation, InputError, Origin, Registry, Trajectory

from . import ag2, atif, inspect_log, langfuse, langsmith, otlp, phoenix, smolagents, whowhen

SUFFIXES = (".json", ".jsonl", ".eval", ".db", ".sqlite", ".sqlite3")
_BINARY = (".eval", ".db", ".sqlite", ".sqlite3")

Loader = Callable[[Path, Any, str | None, str | None], list[Trajectory]]
Check = Callable[[Path, Any], tuple[bool, str]]
Labelled = list[tuple[Trajectory, "Annotation | None"]]
LabelledLoader = Callable[[Path, Any, str | None, str | None], Labelled]


@dataclass(frozen=True)
class TraceFormat:
    """A trace format that `load_traces` reads, registered by name in `FORMATS`."""

    load: Loader
    """`load(path, data, framework, benchmark)`: the trajectories of one file. `data` is the file's parsed
    JSON (`read_json`), None for a binary file (SQLite, .eval archive); raise `InputError` on a bad file."""
    check: Check | None = None
    """`check(path, data) -> (matches, why not)`: the format takes part in `auto` detection, tried in
    registration order; None: chosen by name (`--format`) only."""
    binary: bool = False
    """`check` is also tried on binary files (`data` None)."""
    load_labelled: LabelledLoader | None = None
    """For a format whose files carry labels too (Who&When's `mistake_agent` / `mistake_step`): the same runs
    as `load`, each with its label or None; `import_traces` stores both."""


def _adopt_format(ep: Any, obj: Any) -> tuple[str, TraceFormat]:
    if not isinstance(obj, TraceFormat):
        raise TypeError(f"{ep.value} is not a rootstep.traces.TraceFormat")
    return ep.name, obj


FORMATS: Registry[TraceFormat] = Registry("trace format", group="rootstep.trace_formats", adopt=_adopt_format)
"""What `--format` takes (besides `auto`), in the order `auto` tries them: the built-ins below (`openinference`
is OTLP/JSON with OpenInference attributes, `phoenix` Phoenix's REST span list), pip-installed plugins (entry
point `rootstep.trace_formats`: a `TraceFormat`) and formats registered in code (`FORMATS.register`)."""


def read_json(path: Path) -> Any:
    """A JSON document, or JSON Lines as a list of documents; errors name the file and the line.

    JSON Lines is tried only when the first line is a whole JSON value of its own: a document broken
    further down is reported as that document's error, never as `<jsonl line 1>`."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(file, "<file>", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(file, "<file>", exc.strerror or str(exc)) from None
    if not text.strip():
        raise InputError(file, "<file>", "the file is empty" if not text else "the file holds only whitespace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) > 1 and lines[0][1].lstrip()[:1] in "{[" and _whole_value(lines[0][1]):
            records = []
            for number, line in lines:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    if number == lines[-1][0] and (exc.pos >= len(line.rstrip()) - 1 or _runs_to_the_end(exc)):
                        raise InputError(file, f"<jsonl line {number}>", f"the last line ends early (truncated at column "
                                                                        f"{len(line.rstrip())}): {exc.msg}") from None
                    raise InputError(file, f"<jsonl line {number}>", f"malformed JSON: {exc.msg} at column {exc.colno}") from None
            return records
        if whole.pos >= len(text.rstrip()) or _runs_to_the_end(whole):
            end = whole.pos if whole.pos >= len(text.rstrip()) else len(text)  # a cut string: the text's end
            at_line, column = text.count("\n", 0, end) + 1, end - (text.rfind("\n", 0, end) + 1) + 1
            raise InputError(file, "<json>", f"the file ends early (truncated?): the JSON stops at line {at_line}, "
                                             f"column {column} (byte {len(text[:end].encode())} of {len(text.encode())}) "
                                             f"with {_open_brackets(text)} still open") from None
        raise InputError(file, "<json>", f"malformed JSON: {whole.msg} at line {whole.lineno}, column {whole.colno}") from None


def _runs_to_the_end(error: json.JSONDecodeError) -> bool:
    """A string that the decoder found open at the end of the text (a file cut inside a string): the error
    names where the string starts, but the text ends early."""
    return error.msg.startswith("Unterminated string")


def _whole_value(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _open_brackets(text: str) -> str:
    """How many objects and arrays a truncated document leaves open (strings skipped)."""
    depth: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped = not escaped and char == "\\"
            if char == '"' and not escaped:
                in_string = False
            continue
        if char == '"':
            in_string, escaped = True, False
        elif char in "{[":
            depth.append(char)
        elif char in "}]" and depth:
            depth.pop()
    objects, arrays = depth.count("{"), depth.count("[")
    return f"{objects} object(s) and {arrays} array(s)"


def known_unsupported(data: Any) -> str | None:
    """The name of a known trace shape rootstep does not read, with the format it resembles and what to do."""
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, dict):
        if isinstance(first.get("resourceLogs"), list) or isinstance(first.get("resourceMetrics"), list):
            kind = "logs" if "resourceLogs" in first else "metrics"
            return f"OTLP {kind} (resembles otlp): only traces (`resourceSpans`) hold the agents' steps; export the traces"
        if isinstance(first.get("data"), list) and first["data"] and isinstance(first["data"][0], dict):
            item = first["data"][0]
            if {"traceID", "spans", "processes"} <= set(item):
                return "Jaeger's JSON trace export (resembles otlp): export the same traces as OTLP/JSON instead"
            if item.get("object") in ("trace", "trace.span"):
                return ("the OpenAI Agents SDK's own trace export (to OpenAI's traces API; resembles otlp): trace the run "
                        "with the OpenInference or LangSmith processor, or export it from OpenAI's dashboard, instead")
            if {"id", "timestamp", "name"} <= set(item) and isinstance(item.get("observations"), list) \
                    and all(isinstance(o, str) for o in item["observations"]):
                return ("a Langfuse traces list (GET /api/public/traces; resembles langfuse): it names its observations by id "
                        "only; export the observations (GET /api/public/v2/observations?traceId=...)")
        if isinstance(first.get("info"), dict) and isinstance((first.get("data") or {}).get("spans"), list):
            return "an MLflow trace (resembles otlp): export its spans as OTLP/JSON instead"
        if {"traceId", "id", "localEndpoint"} <= set(first) or {"traceId", "id", "timestamp", "duration"} <= set(first) and "kind" in first:
            return "Zipkin v2 JSON spans (resembles otlp): export the traces as OTLP/JSON instead"
        if {"post", "patch"} & set(first) and not all(isinstance(first.get(k, []), list) for k in ("post", "patch")):
            return "a single LangSmith run create/update body (resembles langsmith): collect the `/runs/batch` bodies"
        if isinstance(first.get("role"), str) and "content" in first and "name" not in first:
            return ("a bare chat message list (resembles ag2 GroupChat messages, which carry each speaker's `name`): "
                    "it names no agent; export the run from the framework's tracing instead")
    return None


def _data(path: Path) -> Any:
    """The parsed JSON of a text file, None for a binary format (SQLite, .eval archive)."""
    if path.suffix in _BINARY:
        return None
    return read_json(path)


def detect_format(path: str | Path, data: Any = None) -> str:
    """The format of `path` (`data`: its parsed JSON, when already read)."""
    path = Path(path)
    if data is None:
        data = _data(path)
    reasons = []
    for name, fmt in FORMATS.items():
        if fmt.check is None or (data is None and not fmt.binary):
            continue
        ok, why = fmt.check(path, data)
        if ok:
            return name
        reasons.append(f"{name}: {why}")
    known = known_unsupported(data) if data is not None else None
    if known:
        raise InputError(str(path), "<format>", f"a known shape rootstep does not read: {known}")
    raise InputError(str(path), "<format>", "in no known trace format; tried " + "; ".join(reasons))


def load_traces(path: str | Path, format: str = "auto", framework: str | None = None,
                benchmark: str | None = None, strict: bool = False) -> list[Trajectory]:
    """The trajectories in one trace file (`format="auto"` detects it; see `FORMATS`).

    Each trajectory lists what the import could not keep in `metadata["import_warnings"]` (steps stored
    empty, messages in a shape not read, subagents absent); `strict=True` raises on the first instead."""
    return [t for t, _label in read_traces(path, format, framework, benchmark, strict)[1]]


def read_traces(path: str | Path, format: str = "auto", framework: str | None = None, benchmark: str | None = None,
                strict: bool = False) -> tuple[str, Labelled]:
    """The format of one trace file and its trajectories, each with the label the file gives it (None for a
    format without labels); as `load_traces`."""
    path = Path(path)
    file = str(path)
    if format != "auto" and format not in FORMATS:
        raise InputError(file, "<format>", f"{format!r} is not a trace format; choose auto or one of "
                                           f"{', '.join(FORMATS.names())}")
    if not path.is_file():
        raise InputError(file, "<path>", "no such file")
    if path.stat().st_size == 0:
        raise InputError(file, "<file>", "the file is empty")
    data = _data(path)
    name = detect_format(path, data) if format == "auto" else format
    chosen = FORMATS.get(name)
    if chosen.load_labelled is not None:
        labelled = chosen.load_labelled(path, data, framework, benchmark)
    else:
        labelled = [(t, None) for t in chosen.load(path, data, framework, benchmark)]
    if strict:
        for t, _label in labelled:
            for warning in t.metadata.get("import_warnings") or []:
                raise InputError(file, f"trace {t.metadata['trace'].get('trace_id') or t.task_id}", f"{warning} (--strict)")
    return name, labelled


def _required(data: Any, path: Path, name: str, check: Callable[[Any], tuple[bool, str]]) -> Any:
    if data is None:
        raise InputError(str(path), "<format>", f"not {name}: a binary file")
    ok, why = check(data)
    if not ok:
        raise InputError(str(path), "<format>", f"not {name}: {why}")
    return data


def _checked(name: str, path: Path, result: tuple[bool, str]) -> None:
    ok, why = result
    if not ok:
        raise InputError(str(path), "<format>", f"not {name}: {why}")


def _json_format(name: str, module: Any, is_format: Callable[[Any], tuple[bool, str]]) -> TraceFormat:
    """A JSON trace format: `module.load(data, file, framework, benchmark)` once `is_format(data)` holds."""
    return TraceFormat(
        load=lambda path, data, framework, benchmark: module.load(_required(data, path, name, is_format), str(path),
                                                                  framework, benchmark),
        check=lambda path, data: is_format(data))


def _load_ag2(path: Path, data: Any, framework: str | None, benchmark: str | None) -> list[Trajectory]:
    if data is None:
        _checked("ag2", path, ag2.is_ag2_sqlite(path))
        return ag2.load_sqlite(path, str(path), framework, benchmark)
    return ag2.load_messages(_required(data, path, "ag2", ag2.is_ag2_messages), str(path), framework, benchmark)


def _load_whowhen(path: Path, data: Any, framework: str | None, benchmark: str | None) -> Labelled:
    # the record's own parser names the field that is wrong (`history`, `mistake_step`, ...); it reads the
    # file's text again to keep its formatting for a byte-identical export
    return [whowhen.load_file(path, framework, benchmark)]


def _load_inspect(path: Path, data: Any, framework: str | None, benchmark: str | None) -> list[Trajectory]:
    _checked("inspect", path, inspect_log.is_inspect(path, data))
    return inspect_log.load(path, str(path), framework, benchmark)


# the built-ins, in the order `auto` tries them (AG2's SQLite and Inspect's archive are binary)
for _name, _format in {
    "ag2": TraceFormat(_load_ag2, lambda path, data: ag2.is_ag2_sqlite(path) if data is None else ag2.is_ag2_messages(data),
                       binary=True),
    "inspect": TraceFormat(_load_inspect, inspect_log.is_inspect, binary=True),
    "otlp": _json_format("otlp", otlp, otlp.is_otlp),
    "openinference": TraceFormat(_json_format("openinference", otlp, otlp.is_otlp).load),  # by name only
    "phoenix": _json_format("phoenix", phoenix, phoenix.is_phoenix),
    "atif": _json_format("atif", atif, atif.is_atif),
    "langsmith": _json_format("langsmith", langsmith, langsmith.is_langsmith),
    "langfuse": _json_format("langfuse", langfuse, langfuse.is_langfuse),
    "smolagents": _json_format("smolagents", smolagents, smolagents.is_smolagents),
    "whowhen": TraceFormat(lambda path, data, framework, benchmark: [t for t, _ in _load_whowhen(path, data, framework,
                                                                                                 benchmark)],
                           lambda path, data: whowhen.is_whowhen(data), load_labelled=_load_whowhen),
}.items():
    FORMATS.register(_name, _format, origin=Origin.BUILTIN)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """The files named, and the trace files under the folders named (recursively), sorted."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SUFFIXES)
        elif p.exists():
            found.append(p)
        else:
            raise InputError(str(p), "<path>", "no such file or folder")
    if not found:
        raise InputError(", ".join(map(str, paths)), "<path>", f"no trace files found ({', '.join(SUFFIXES)})")
    return found
