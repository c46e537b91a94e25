"""Test harness executed INSIDE a sandbox by the `code_tests` verifier (standard library only).

It is never imported by rootstep: `_code.py` sends its source as the `code` of one sandbox run, with
`spec.json` (what to check) and `candidate.py` (the program under test) written into the work dir.
It writes exactly one result line, `<marker> {json}`, to the original stdout; everything the candidate
prints (sys.stdout/stderr, or straight to file descriptors 1 and 2) is discarded. Modes:

- `asserts`   (MBPP, custom): exec the program, then each assert statement on its own; score = passed / total.
- `humaneval` (HumanEval, KodCode-style `check`): exec the program, exec `test`, call `check(entry_point)`.
- `evalplus`  (MBPP+, HumanEval+): the canonical solution's outputs (sent as `expected.b64`, made by
  the `evalplus_expected` mode, or computed here input by input) are compared with the candidate's
  (EvalPlus semantics: float tolerance `atol`, set / not-None / find_zero oracles, tuple decoding).
- `pytest`    (KodCode): the candidate is importable as `solution`; every `test_*` function of the test
  module is called. A small built-in `pytest` stands in for the real one (same behaviour whatever the
  image has): `raises`, `approx`, `mark.parametrize`, `mark.skip`/`skipif`/`xfail`; a test that needs a
  fixture is reported as unsupported (a harness error, not a failure of the candidate).

Each test is limited by a per-test alarm; a test that exceeds it fails with `timeout`.
"""

import copy
import io
import json
import math
import signal
import sys
import time
import types

if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)
sys.setrecursionlimit(10_000)


class _TestTimeout(BaseException):
    """Raised by the alarm; a BaseException so candidate `except Exception:` cannot swallow it."""


def _on_alarm(signum, frame):
    raise _TestTimeout()


class _Discard(io.TextIOBase):
    """A text stream that accepts and forgets everything (the candidate's prints)."""

    def writable(self):
        return True

    def write(self, text):
        return len(text)


class _Limit:
    """Swallow the candidate's I/O and stop it after `seconds` (SIGALRM; this is the main thread)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        self._saved = (sys.stdout, sys.stderr, sys.stdin)
        sys.stdout, sys.stderr, sys.stdin = _Discard(), _Discard(), io.StringIO("")
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr, sys.stdin = self._saved
        return False


def _safe_repr(value, limit=120):
    try:
        return repr(value)[:limit]
    except BaseException:  # noqa: BLE001 - a candidate object whose repr fails
        return "<%s, repr failed>" % type(value).__name__


def _describe(exc):
    if isinstance(exc, _TestTimeout):
        return "timeout"
    try:
        text = "%s: %s" % (type(exc).__name__, exc)
    except BaseException:  # noqa: BLE001
        text = type(exc).__name__
    return text[:300]


def _run(fn, seconds):
    """(ok, value_or_error)"""
    try:
        with _Limit(seconds):
            value = fn()
        return True, value
    except BaseException as exc:  # noqa: BLE001 - the candidate may raise anything, SystemExit included
        return False, _describe(exc)


def _load(source, name, seconds):
    namespace = {"__name__": name, "__builtins__": __builtins__}

    def go():
        exec(compile(source, name + ".py", "exec"), namespace)

    ok, err = _run(go, seconds)
    return namespace, (None if ok else err)


# ------------------------------------------------------------------ input decoding (MBPP+)
# JSON cannot hold tuples, sets or complex numbers; EvalPlus restores them per task. These tables
# state, per MBPP+ task number, which arguments were tuples (facts of the data set).


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _decode(kind, inputs):
    if not kind:
        return inputs
    if kind == "args_tuple":
        return [[tuple(a) for a in inp] for inp in inputs]
    if kind == "args_list_of_tuple":
        return [[[tuple(x) for x in a] for a in inp] for inp in inputs]
    if kind == "first_list_of_tuple":
        return [[[tuple(x) for x in inp[0]]] + [inp[1]] for inp in inputs]
    if kind == "second_tuple":
        return [[inp[0]] + [tuple(inp[1])] for inp in inputs]
    if kind == "sets_or_empty_dicts":
        return [[[set(x) if isinstance(x, list) and len(x) else {} for x in inp[0]]] for inp in inputs]
    if kind == "float_complex":
        return [(float(inp[0]), complex(inp[1])) for inp in inputs]
    if kind == "first_tuple":
        return [[tuple(inp[0])] + list(inp[1:]) for inp in inputs]
    if kind == "nested_tuple_of_tuples":
        step = [[[tuple(x) for x in a] for a in inp] for inp in inputs]
        return [[tuple(a) for a in inp] for inp in step]
    if kind == "items_then_tuple":
        step = [[[tuple(x) if isinstance(x, list) else x for x in inp[0]]] for inp in inputs]
        return [[tuple(a) for a in inp] for inp in step]
    if kind == "dict_values_tuple":
        return [[{k: tuple(v) for k, v in inp[0].items()}] + list(inp[1:]) for inp in inputs]
    if kind == "complex":
        return [[complex(inp[0])] for inp in inputs]
    if kind == "all_tuples":
        return [_tuples(inp) for inp in inputs]
    raise ValueError("unknown input decoding %r" % kind)


# ------------------------------------------------------------------ output comparison (EvalPlus)


def _is_floats(x):
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def _allclose(out, exp, atol):
    if isinstance(exp, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(exp):
            return False
        return all(_allclose(o, e, atol) for o, e in zip(out, exp))
    if isinstance(exp, (int, float)) and isinstance(out, (int, float)):
        if math.isnan(exp) or math.isnan(out):
            return math.isnan(exp) and math.isnan(out)
        if math.isinf(exp) or math.isinf(out):
            return exp == out
        return abs(out - exp) <= atol + 1e-7 * abs(exp)
    return out == exp


def _surface_area(base_edge, height):
    slant = math.sqrt((base_edge / 2) ** 2 + height ** 2)
    return base_edge ** 2 + 2 * base_edge * slant


def _poly(xs, x):
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def _matches(out, exp, inp, atol, oracle, entry_point):
    if oracle == "any":
        return True
    if oracle == "find_zero":
        try:
            return abs(_poly(*inp, out)) <= (atol or 1e-6)
        except Exception:  # noqa: BLE001
            return False
    if oracle == "not_none":
        out_flag = out if isinstance(out, bool) else out is not None
        exp_flag = exp if isinstance(exp, bool) else exp is not None
        return out_flag == exp_flag
    if oracle == "set":
        try:
            return set(out) == set(exp)
        except TypeError:
            return False
    try:
        if out == exp:
            return True
    except Exception:  # noqa: BLE001 - exotic __eq__
        pass
    if oracle == "or_zero" and out == 0:
        return True
    if oracle == "surface_area":
        try:
            return abs(out - _surface_area(*inp)) <= atol
        except Exception:  # noqa: BLE001
            return False
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    if atol:
        if type(out) is not type(exp):
            return False
        return _allclose(out, exp, atol)
    return False


# ------------------------------------------------------------------ modes


def _mode_asserts(spec, program, seconds):
    ns, err = _load(program, "__candidate__", seconds)
    tests = spec["tests"]
    if err is not None:
        return {"passed": 0, "total": len(tests), "load_error": err, "failures": [{"test": 0, "error": err}]}
    if spec.get("setup"):
        _, setup_err = _run(lambda: exec(spec["setup"], ns), seconds)
        if setup_err is not None:
            return {"passed": 0, "total": len(tests), "load_error": "test setup: " + str(setup_err)}
    passed, failures = 0, []
    for i, test in enumerate(tests):
        ok, value = _run(lambda: exec(compile(test, "<test %d>" % i, "exec"), ns), seconds)
        if ok:
            passed += 1
        elif len(failures) < 10:
            failure = {"test": i, "assert": test.strip()[:300], "error": value}
            if value.startswith("AssertionError"):
                failure.update(_compared(test, ns, seconds))
            failures.append(failure)
    return {"passed": passed, "total": len(tests), "failures": failures}


def _compared(test, ns, seconds):
    """For a failed `assert <got> == <expected>`: both sides' values (what pytest's assertion rewriting
    shows), so a reader of the verdict sees what the program returned, not only that it was wrong."""
    import ast

    try:
        tree = ast.parse(test.strip())
    except SyntaxError:
        return {}
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return {}
    check = tree.body[0].test
    if not (isinstance(check, ast.Compare) and len(check.ops) == 1 and isinstance(check.ops[0], ast.Eq)):
        return {}
    out = {}
    for key, node in (("got", check.left), ("expected", check.comparators[0])):
        expression = ast.Expression(body=node)
        ok, value = _run(lambda: eval(compile(expression, "<test>", "eval"), ns), seconds)
        if not ok:
            return {}
        out[key] = _safe_repr(value, 200)
    return out


def _mode_humaneval(spec, program, seconds):
    ns, err = _load(program, "__candidate__", seconds)
    if err is not None:
        return {"passed": 0, "total": 1, "load_error": err}
    entry = spec["entry_point"]
    if entry not in ns:
        return {"passed": 0, "total": 1, "load_error": "the program does not define %r" % entry}
    ok, value = _run(lambda: exec(spec["test"], ns) or ns["check"](ns[entry]), seconds)
    return {"passed": int(ok), "total": 1, "failures": [] if ok else [{"test": 0, "error": value}]}


def _reference(spec, seconds):
    entry = spec["entry_point"]
    ref_ns, ref_err = _load(spec["canonical"], "__reference__", seconds)
    if ref_err is not None or entry not in ref_ns:
        return None, "canonical solution: %s" % (ref_err or "does not define " + entry)
    return ref_ns[entry], None


def _reference_call(ref, inp, seconds, oracle):
    """(ok, expected output, seconds taken) of the canonical solution on one input."""
    start = time.perf_counter()
    ok, value = _run(lambda: ref(*copy.deepcopy(inp)), max(seconds, 60.0))
    taken = time.perf_counter() - start
    if ok and oracle == "not_none":  # as EvalPlus: only whether the output is None matters
        value = value if isinstance(value, bool) else value is not None
    return ok, value, taken


def _mode_evalplus_expected(spec, program, seconds):
    """Run only the canonical solution; return its outputs pickled (base64) for later candidate runs,
    or `unpicklable` when they cannot be pickled or would be too large to send back (then every
    candidate run recomputes them, one input at a time)."""
    import base64
    import pickle

    inputs = _decode(spec.get("decode"), spec["inputs"])
    ref, error = _reference(spec, seconds)
    if error is not None:
        return {"passed": 0, "total": 0, "harness_error": error}
    limit = spec.get("max_expected_bytes", 300_000)
    expected, times, size = [], [], 0
    for inp in inputs:
        ok, value, taken = _reference_call(ref, inp, seconds, spec.get("oracle"))
        try:
            size += len(pickle.dumps(value, protocol=4))
        except Exception as exc:  # noqa: BLE001
            return {"passed": 0, "total": len(inputs), "unpicklable": _describe(exc)}
        if size > limit:
            return {"passed": 0, "total": len(inputs), "unpicklable": "too large (over %d bytes)" % limit}
        expected.append((ok, value))
        times.append(taken)
    blob = pickle.dumps((expected, times), protocol=4)
    return {"passed": 0, "total": len(inputs), "expected_b64": base64.b64encode(blob).decode("ascii")}


def _mode_evalplus(spec, program, seconds):
    """Compare the candidate with the canonical outputs: read from `expected.b64` when the verifier
    sent them, else computed here input by input (each expected output is dropped after its comparison,
    so memory holds one output at a time)."""
    import os

    entry, oracle = spec["entry_point"], spec.get("oracle")
    atol = spec.get("atol", 0) or 0
    inputs = _decode(spec.get("decode"), spec["inputs"])
    stored = None
    if os.path.exists("expected.b64"):
        import base64
        import pickle

        with open("expected.b64", "rb") as fh:
            stored = pickle.loads(base64.b64decode(fh.read()))
        ref = None
    else:
        ref, error = _reference(spec, seconds)
        if error is not None:
            return {"passed": 0, "total": len(inputs), "harness_error": error}
    ns, err = _load(program, "__candidate__", seconds)
    if err is not None:
        return {"passed": 0, "total": len(inputs), "load_error": err}
    if entry not in ns or not callable(ns[entry]):
        return {"passed": 0, "total": len(inputs), "load_error": "the program does not define %r" % entry}
    fn = ns[entry]
    passed, total, skipped, failures = 0, 0, 0, []
    for i, inp in enumerate(inputs):
        if stored is not None:
            (ref_ok, exp), taken = stored[0][i], stored[1][i]
        else:
            ref_ok, exp, taken = _reference_call(ref, inp, seconds, oracle)
        if not ref_ok:  # the canonical solution rejects this input: it is not a test
            skipped += 1
            continue
        total += 1
        ok, value = _run(lambda: fn(*copy.deepcopy(inp)), max(seconds, spec.get("time_factor", 4.0) * taken))
        if ok and _matches(value, exp, inp, atol, oracle, entry):
            passed += 1
        elif len(failures) < 10:
            error = value if not ok else "wrong output %s (expected %s)" % (_safe_repr(value), _safe_repr(exp))
            failures.append({"test": i, "input": _safe_repr(inp, 200), "error": error})
        value = exp = None
    return {"passed": passed, "total": total, "skipped_inputs": skipped, "failures": failures}


class _Raises:
    def __init__(self, expected, match=None):
        self.expected, self.match = expected, match

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        if typ is None:
            raise AssertionError("DID NOT RAISE %r" % (self.expected,))
        if not issubclass(typ, self.expected):
            return False
        if self.match is not None:
            import re

            if not re.search(self.match, str(value)):
                raise AssertionError("exception message %r does not match %r" % (str(value), self.match))
        return True


class _Approx:
    def __init__(self, expected, rel=1e-6, abs=1e-12):
        self.expected, self.rel, self.abs = expected, rel, abs

    def __eq__(self, other):
        def close(a, b):
            if isinstance(b, (list, tuple)):
                return isinstance(a, (list, tuple)) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
            if isinstance(b, dict):
                return isinstance(a, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in b)
            return abs(a - b) <= max(self.rel * abs(b), self.abs)

        try:
            return close(other, self.expected)
        except TypeError:
            return False


class _Marks:
    """`pytest.mark.<name>`: parametrize is expanded; skip / skipif / xfail exclude the test from the
    count; any other mark is accepted and ignored."""

    def __getattr__(self, name):
        def factory(*args, **kwargs):
            def mark(fn):
                fn.__dict__.setdefault("_marks", []).append((name, args, kwargs))
                return fn

            if name in ("skip", "xfail") and len(args) == 1 and callable(args[0]) and not kwargs:
                fn, args = args[0], ()
                return mark(fn)
            return mark

        return factory


def _pytest_shim():
    module = types.ModuleType("pytest")
    module.raises = lambda exc, match=None: _Raises(exc, match)
    module.approx = _Approx
    module.mark = _Marks()

    def fixture(fn=None, **_):
        if fn is not None:
            fn._is_fixture = True
            return fn
        return lambda f: fixture(f)

    module.fixture = fixture
    return module


def _excluded(fn):
    for name, args, kwargs in fn.__dict__.get("_marks", []):
        if name in ("skip", "xfail"):
            return True
        if name == "skipif" and (args[0] if args else kwargs.get("condition")):
            return True
    return False


def _expand(fn):
    calls = [{}]
    for name, args, kwargs in reversed(fn.__dict__.get("_marks", [])):
        if name != "parametrize":
            continue
        names = args[0] if args else kwargs["argnames"]
        values = args[1] if len(args) > 1 else kwargs["argvalues"]
        keys = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        new = []
        for call in calls:
            for value in values:
                vals = (value,) if len(keys) == 1 else tuple(value)
                new.append(dict(call, **dict(zip(keys, vals))))
        calls = new
    return calls


def _mode_pytest(spec, program, seconds):
    import inspect

    sys.modules["pytest"] = _pytest_shim()  # the same small pytest everywhere, whatever the image has
    module = types.ModuleType("solution")
    module.__file__ = "solution.py"
    ok, err = _run(lambda: exec(compile(program, "solution.py", "exec"), module.__dict__), seconds)
    if not ok:
        return {"passed": 0, "total": 1, "load_error": err}
    sys.modules["solution"] = module
    test_ns, test_err = _load(spec["test"], "test_solution", seconds)
    if test_err is not None:
        return {"passed": 0, "total": 1, "load_error": "test module: " + str(test_err)}
    tests = [(name, fn) for name, fn in test_ns.items()
             if name.startswith("test") and inspect.isfunction(fn) and not getattr(fn, "_is_fixture", False)]
    passed, total, failures = 0, 0, []
    for name, fn in tests:
        if _excluded(fn):
            continue
        for kwargs in _expand(fn):
            missing = [p for p in inspect.signature(fn).parameters if p not in kwargs]
            if missing:
                return {"passed": 0, "total": 0,
                        "harness_error": "unsupported pytest feature: %s needs fixture(s) %s" % (name, ", ".join(missing))}
            total += 1
            ok, value = _run(lambda: fn(**kwargs), seconds)
            if ok:
                passed += 1
            else:
                failures.append({"test": name, "error": value})
    return {"passed": passed, "total": total, "failures": failures[:10]}


_MODES = {
    "asserts": _mode_asserts,
    "humaneval": _mode_humaneval,
    "evalplus": _mode_evalplus,
    "evalplus_expected": _mode_evalplus_expected,
    "pytest": _mode_pytest,
}


def main():
    import os

    with open("spec.json", encoding="utf-8") as fh:
        spec = json.load(fh)
    with open("candidate.py", encoding="utf-8") as fh:
        program = fh.read()
    seconds = float(spec.get("per_test_timeout", 4.0))
    # Output written straight to file descriptors 1 and 2 (os.write, subprocesses) goes nowhere, so
    # it can neither fill the sandbox's output cap nor hide the result line.
    sys.stdout.flush()
    result_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        result = _MODES[spec["mode"]](spec, program, seconds)
    except BaseException as exc:  # noqa: BLE001 - report, never hang or die silently
        result = {"passed": 0, "total": 0, "harness_error": _describe(exc)}
    line = "\n" + spec["marker"] + " " + json.dumps(result, default=repr) + "\n"
    data = line.encode("utf-8")
    while data:
        data = data[os.write(result_fd, data):]


main()
