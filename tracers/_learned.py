"""The learned tracer: a step scorer trained on the warehouse's verified labels, run with no LLM.

Training (`train_model`, `rootstep tracer train`) reads the `labels` view (verified labels: human,
counterfactual, fault injection; a tracer's own predictions are never there), turns every agent step of
every labelled run into one example (decisive or not; features in `tracers._features`, plus a small text
model: the step's hashed terms, TF-IDF weighted and reduced to `text_dims` dimensions by truncated SVD)
and fits scikit-learn's `HistGradientBoostingClassifier` on CPU. A prediction scores every agent step of a run and returns the
highest-scoring step and the agent acting at it, in milliseconds.

Evaluation is always by task: `cross_validate` splits the labelled runs into task-grouped folds (all runs
of a task on the same side, `_training.task_folds`), trains on the others and predicts each fold.

A trained model is saved under the warehouse, `<warehouse>/models/learned/<model_id>/`:
`model.pkl` (the fitted scorer), `manifest.json` (schema version, feature version, library versions,
setting, parameters, cross-validated figures), `training_runs.json` (the run ids and labels it was
trained on) and `MODEL_CARD.md`. The id is derived from the training labels and parameters: training
twice on the same labels gives the same model. A model saved with another schema or feature version is
refused before its pickle is opened.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rootstep.model import Trajectory, content_id, utcnow
from rootstep.warehouse import Warehouse

from ._features import FEATURE_VERSION, feature_names, step_features, step_text
from ._methods import Attribution, TracerError, as_trajectory, tracer
from ._training import task_folds

SCHEMA_VERSION = 1
"""Version of the saved model's layout (files, manifest keys, pickled class). Bump on any change."""
MODELS_DIR = "models/learned"
MODEL_FILE, MANIFEST_FILE, RUNS_FILE, CARD_FILE = "model.pkl", "manifest.json", "training_runs.json", "MODEL_CARD.md"
DEFAULT_FOLDS = 10
DEFAULT_TEXT_DIMS = 8


@dataclass(frozen=True)
class Example:
    """One labelled run: its trajectory and its verified label."""

    run_id: str
    trajectory: Trajectory
    agent: str
    step: int
    method: str

    @property
    def task(self) -> tuple[str, str]:
        return (self.trajectory.benchmark, self.trajectory.task_id)

    @property
    def on_agent_step(self) -> bool:
        return 0 <= self.step < len(self.trajectory.steps) and self.trajectory.steps[self.step].kind == "agent"


def labelled_examples(warehouse: Warehouse, where: str = "true") -> list[Example]:
    """Every run with a verified label (the `labels` view) matching `where` (SQL over `runs`), by run id."""
    labels = {r["run_id"]: r for r in warehouse.rows("SELECT run_id, agent, step, method FROM labels")}
    return [
        Example(run_id, t, labels[run_id]["agent"], int(labels[run_id]["step"]), labels[run_id]["method"])
        for run_id, t in warehouse.trajectories(f"id IN (SELECT run_id FROM labels) AND ({where})")
    ]


@dataclass
class _Rows:
    """One run, featurized: agent step indices, their features (dicts and vectors), their hashed text."""

    indices: list[int]
    features: list[dict[str, float]]
    vectors: list[list[float]]
    text: Any
    """Sparse term counts of each step's text (`HashingVectorizer`, stateless, so cacheable across folds)."""


TEXT_HASH_FEATURES = 2**14


class StepScorer:
    """Scores the agent steps of a run: the probability that each is the decisive error.

    `with_ground_truth` adds the ground-truth features (and requires them at prediction time);
    `text_dims` is the size of the text component (0: features only): the steps' hashed term counts,
    TF-IDF weighted and reduced by truncated SVD, both fitted on the training runs only.
    """

    def __init__(self, with_ground_truth: bool = True, text_dims: int = DEFAULT_TEXT_DIMS, seed: int = 0):
        self.with_ground_truth = with_ground_truth
        self.text_dims = text_dims
        self.seed = seed
        self.names = feature_names(with_ground_truth) + [f"text_{k}" for k in range(text_dims)]
        self._tfidf: Any = None
        self._svd: Any = None
        self._model: Any = None
        self.cache: dict[int, _Rows] | None = None
        """Set by `cross_validate` to featurize each run once across folds (keyed by the object's id)."""

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"cache": None}

    def _rows(self, trajectory: Trajectory) -> _Rows:
        from sklearn.feature_extraction.text import HashingVectorizer

        if self.cache is not None and id(trajectory) in self.cache:
            return self.cache[id(trajectory)]
        names = feature_names(self.with_ground_truth)
        rows = step_features(trajectory, self.with_ground_truth)
        indices = [i for i, _ in rows]
        hashing = HashingVectorizer(n_features=TEXT_HASH_FEATURES, alternate_sign=False, norm=None)
        out = _Rows(indices, [f for _, f in rows], [[f[k] for k in names] for _, f in rows],
                    hashing.transform([step_text(trajectory.steps[i]) for i in indices]) if self.text_dims else None)
        if self.cache is not None:
            self.cache[id(trajectory)] = out
        return out

    def _matrix(self, runs: Sequence[_Rows]) -> Any:
        import numpy as np
        import scipy.sparse as sp

        x = np.asarray([v for r in runs for v in r.vectors], dtype=float)
        if self._svd is not None:
            x = np.hstack([x, self._svd.transform(self._tfidf.transform(sp.vstack([r.text for r in runs])))])
        elif self.text_dims:
            x = np.hstack([x, np.zeros((len(x), self.text_dims))])
        return x

    def fit(self, examples: Sequence[Example]) -> "StepScorer":
        import scipy.sparse as sp
        from sklearn.decomposition import TruncatedSVD
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.feature_extraction.text import TfidfTransformer

        runs = [self._rows(e.trajectory) for e in examples if e.on_agent_step]  # a label elsewhere cannot be learned
        target = [int(i == e.step) for e, r in zip([e for e in examples if e.on_agent_step], runs) for i in r.indices]
        if not any(target):
            raise TracerError("no verified label on an agent step to learn from")
        with _one_thread():
            if self.text_dims:
                counts = sp.vstack([r.text for r in runs]).tocsr()
                if ((counts > 0).sum(axis=0).A1 >= 2).sum() > self.text_dims:  # terms of one step carry no pattern
                    self._tfidf = TfidfTransformer(sublinear_tf=True).fit(counts)
                    self._svd = TruncatedSVD(self.text_dims, random_state=self.seed).fit(self._tfidf.transform(counts))
            self._model = HistGradientBoostingClassifier(max_depth=3, learning_rate=0.1, max_iter=60,
                                                         random_state=self.seed)
            self._model.fit(self._matrix(runs), target)
        return self

    def scores(self, trajectory: Trajectory) -> dict[int, float]:
        """Agent step index -> probability of being the decisive error (empty for a run without agent steps)."""
        return self.explain(trajectory)[0]

    def explain(self, trajectory: Trajectory) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
        """The scores and the features they were computed from, by agent step index."""
        if self._model is None:
            raise TracerError("the step scorer is not trained")
        rows = self._rows(trajectory)
        if not rows.indices:
            return {}, {}
        with _one_thread():
            probabilities = self._model.predict_proba(self._matrix([rows]))[:, 1]
        return {i: float(p) for i, p in zip(rows.indices, probabilities)}, dict(zip(rows.indices, rows.features))


_THREADS: Any = None


@contextmanager
def _one_thread() -> Iterator[None]:
    """scikit-learn's OpenMP threads spin: on a shared machine they made fitting 3x and predicting 10x slower."""
    global _THREADS
    from threadpoolctl import ThreadpoolController

    if _THREADS is None:  # scanning the loaded libraries takes ~10 ms: once per process
        _THREADS = ThreadpoolController()
    with _THREADS.limit(limits=1):
        yield


def attribution_from_scores(trajectory: Trajectory, scores: dict[int, float], features: dict[int, dict[str, float]],
                            model: str, with_ground_truth: bool) -> Attribution:
    """The highest-scoring step (ties: the earlier) and its agent, with the scores as evidence."""
    result = Attribution(method="learned", model=model, with_ground_truth=with_ground_truth,
                         details={"scores": {str(k): round(v, 4) for k, v in scores.items()}})
    if not scores:
        result.error = "no agent step in the run"
        return result
    best = min(scores, key=lambda i: (-scores[i], i))
    ranked = sorted(scores.values(), reverse=True)
    result.step, result.agent = best, trajectory.steps[best].agent
    f = features[best]
    signals = [name for name, on in (("an error follows it", f["error_following"]),
                                     ("it assumes or makes up data", f["fabrication"]),
                                     ("the next agent objects", f["reply_objects"]),
                                     ("it claims a verification", f["claims_verified"])) if on]
    margin = ranked[0] - ranked[1] if len(ranked) > 1 else ranked[0]
    result.reason = (f"learned step score {scores[best]:.2f} (next best {ranked[1]:.2f}, margin {margin:.2f})"
                     if len(ranked) > 1 else f"learned step score {scores[best]:.2f} (the only agent step)")
    if signals:
        result.reason += "; " + ", ".join(signals)
    return result


# ---------------------------------------------------------------------------------- cross-validation


def cross_validate(examples: Sequence[Example], with_ground_truth: bool = True, folds: int = DEFAULT_FOLDS,
                   seed: int = 0, text_dims: int = DEFAULT_TEXT_DIMS) -> tuple[dict[str, Attribution], list[int]]:
    """Task-grouped cross-validation: run id -> the prediction of a model that never saw the run's task.

    Returns the predictions and each example's fold number. A fold whose training part has no usable
    label gets predictions with an `error` instead.
    """
    fold_of = task_folds([e.task for e in examples], folds, seed)
    predictions: dict[str, Attribution] = {}
    name = cv_model_name(examples, with_ground_truth, folds, seed, text_dims)
    cache: dict[int, Any] = {}
    for fold in sorted(set(fold_of)):
        train = [e for e, f in zip(examples, fold_of) if f != fold]
        test = [e for e, f in zip(examples, fold_of) if f == fold]
        started = time.perf_counter()
        scorer = StepScorer(with_ground_truth, text_dims, seed)
        scorer.cache = cache
        try:
            scorer.fit(train)
        except TracerError as exc:
            for e in test:
                predictions[e.run_id] = Attribution(method="learned", model=name, with_ground_truth=with_ground_truth,
                                                    error=f"fold {fold}: {exc}")
            continue
        fit_seconds = time.perf_counter() - started
        for e in test:
            started = time.perf_counter()
            a = attribution_from_scores(e.trajectory, *scorer.explain(e.trajectory), name, with_ground_truth)
            a.cost.seconds = time.perf_counter() - started
            a.details.update(fold=fold, fit_seconds=round(fit_seconds, 3))
            predictions[e.run_id] = a
    return predictions, fold_of


def cv_model_name(examples: Sequence[Example], with_ground_truth: bool, folds: int, seed: int, text_dims: int) -> str:
    """`cv<k>-<hash of the labels and parameters>`: evaluations on other labels never share an annotator."""
    digest = content_id("cv", SCHEMA_VERSION, FEATURE_VERSION, with_ground_truth, folds, seed, text_dims,
                        sorted((e.run_id, e.agent, e.step) for e in examples), length=8)
    return f"cv{folds}-{digest.split('_', 1)[1]}"


# ---------------------------------------------------------------------------------- saved models


@dataclass
class LearnedModel:
    """A trained scorer and where it lives."""

    model_id: str
    path: str
    manifest: dict[str, Any]
    scorer: StepScorer
    notes: list[str] = field(default_factory=list)

    @property
    def with_ground_truth(self) -> bool:
        return bool(self.manifest["with_ground_truth"])


def _library_versions() -> dict[str, str]:
    import numpy
    import sklearn

    return {"scikit-learn": sklearn.__version__, "numpy": numpy.__version__}


def _write(warehouse: Warehouse, path: str, data: bytes) -> None:
    warehouse.write_file(path, lambda f: f.write(data))


def models_dir(warehouse: Warehouse) -> str:
    return f"{warehouse.root}/{MODELS_DIR}"


def train_model(
    warehouse: Warehouse,
    *,
    with_ground_truth: bool = True,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    text_dims: int = DEFAULT_TEXT_DIMS,
    where: str = "true",
) -> tuple[LearnedModel, dict[str, Any]]:
    """Fit the scorer on every verified label (matching `where`), save it under the warehouse.

    Also cross-validates by task with the same parameters (when there are at least two tasks) and
    stores the figures, with the baselines, in the manifest and the model card. Returns the model and
    the cross-validation report (`{}` with one task). Raises `TracerError` when there is nothing to learn.
    """
    from ._card import model_card
    from ._evaluate import as_prediction, scored_items

    examples = labelled_examples(warehouse, where)
    if not examples:
        raise TracerError(
            f"{warehouse.location}: labels: no verified labels to train on (import some with "
            "`rootstep import whowhen ../shared/data/whowhen`, or annotate runs with `rootstep pipeline`)"
        )
    started = time.perf_counter()
    scorer = StepScorer(with_ground_truth, text_dims, seed).fit(examples)
    fit_seconds = time.perf_counter() - started
    tasks = {e.task for e in examples}
    report: dict[str, Any] = {}
    if len(tasks) >= 2:
        predictions, fold_of = cross_validate(examples, with_ground_truth, folds, seed, text_dims)
        report = {"folds": len(set(fold_of)),
                  "scored": scored_items(examples, {k: as_prediction(a) for k, a in predictions.items()}, fold_of)}
    parameters = {"with_ground_truth": with_ground_truth, "text_dims": text_dims, "seed": seed, "folds": folds,
                  "classifier": "HistGradientBoostingClassifier(max_depth=3, learning_rate=0.1, max_iter=60)"}
    training = sorted((e.run_id, e.agent, e.step, e.method) for e in examples)
    model_id = content_id("lrn", SCHEMA_VERSION, FEATURE_VERSION, parameters, [t[:3] for t in training], length=16)
    path = f"{models_dir(warehouse)}/{model_id}"
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "feature_version": FEATURE_VERSION,
        "model_id": model_id,
        "created_at": utcnow().isoformat(),
        "libraries": _library_versions(),
        **parameters,
        "features": scorer.names,
        "training": {
            "runs": len(examples),
            "tasks": len(tasks),
            "usable": sum(e.on_agent_step for e in examples),
            "label_methods": dict(Counter(e.method for e in examples)),
            "benchmarks": dict(Counter(e.trajectory.benchmark for e in examples)),
            "frameworks": dict(Counter(e.trajectory.framework for e in examples)),
            "fit_seconds": round(fit_seconds, 3),
        },
        "cross_validation": _cv_summary(report),
    }
    runs = [{"run_id": r, "agent": a, "step": s, "label_method": m} for r, a, s, m in training]
    _write(warehouse, f"{path}/{RUNS_FILE}", (json.dumps(runs, indent=1) + "\n").encode())
    _write(warehouse, f"{path}/{MODEL_FILE}", pickle.dumps(
        {"schema_version": SCHEMA_VERSION, "feature_version": FEATURE_VERSION, "scorer": scorer}, protocol=5))
    _write(warehouse, f"{path}/{CARD_FILE}", model_card(manifest, report).encode())
    _write(warehouse, f"{path}/{MANIFEST_FILE}", (json.dumps(manifest, indent=1) + "\n").encode())  # last: marks it complete
    return LearnedModel(model_id, path, manifest, scorer), report


def _cv_summary(report: dict[str, Any]) -> dict[str, Any]:
    from ._scoring import score_by

    if not report:
        return {"note": "one task only: no task-grouped cross-validation possible"}
    return {"folds": report["folds"], "by_benchmark": score_by(report["scored"], ("benchmark",))}


def list_models(warehouse: Warehouse) -> list[dict[str, Any]]:
    """Manifests of the complete models saved under the warehouse, newest first."""
    manifests = []
    for manifest_path in warehouse.fs.glob(f"{models_dir(warehouse)}/*/{MANIFEST_FILE}"):
        with warehouse.fs.open(manifest_path, "rb") as f:
            try:
                manifest = json.loads(f.read())
            except ValueError:
                continue
        manifest["path"] = manifest_path.rsplit("/", 1)[0]
        manifests.append(manifest)
    return sorted(manifests, key=lambda m: str(m.get("created_at", "")), reverse=True)


def _check_manifest(manifest: dict[str, Any], where: str) -> None:
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TracerError(
            f"{where}: schema_version: the model was saved with schema version {version!r}; this rootstep reads "
            f"version {SCHEMA_VERSION}. Retrain it with `rootstep tracer train`."
        )
    features = manifest.get("feature_version")
    if features != FEATURE_VERSION:
        raise TracerError(
            f"{where}: feature_version: the model was trained on features of version {features!r}; this rootstep "
            f"computes version {FEATURE_VERSION}. Retrain it with `rootstep tracer train`."
        )


def _read(fs: Any, path: str, parse: Any, missing: str) -> Any:
    try:
        with fs.open(path, "rb") as f:
            return parse(f.read())
    except FileNotFoundError:
        raise TracerError(f"{path}: missing: {missing}") from None
    except Exception as exc:  # not JSON, a truncated or foreign pickle
        raise TracerError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None


_LOADED: dict[str, LearnedModel] = {}


def load_model(warehouse: Warehouse | None = None, model: str | None = None,
               with_ground_truth: bool = True) -> LearnedModel:
    """A saved model: `model` is a model directory, or a model id (or prefix) under the warehouse; without
    it, the newest model of the warehouse trained in the `with_ground_truth` setting.

    Raises `TracerError` naming the file and the problem: no model, an unknown id, a manifest or model
    file of another schema or feature version, an unreadable file.
    """
    import fsspec

    if model and (os.sep in model or "/" in model or os.path.isdir(model)):
        fs, path = fsspec.core.url_to_fs(model)
        path = path.rstrip("/")
    else:
        if warehouse is None:
            raise TracerError("the learned method needs a warehouse (its models live there) or a model directory")
        fs = warehouse.fs
        found = list_models(warehouse)
        if model:
            found = [m for m in found if str(m.get("model_id", "")).startswith(model)]
            if not found:
                raise TracerError(f"{models_dir(warehouse)}: no learned model with id {model!r} "
                                  "(list them with `rootstep tracer models`)")
        else:
            setting = [m for m in found if m.get("with_ground_truth") == with_ground_truth]
            if not setting:
                flag = "" if with_ground_truth else " --no-ground-truth"
                have = f"; the models there were trained {'without' if with_ground_truth else 'with'} ground truth" if found else ""
                raise TracerError(f"{models_dir(warehouse)}: no learned model trained {'with' if with_ground_truth else 'without'} "
                                  f"ground truth{have}; train one with `rootstep tracer train{flag}`")
            found = setting
        path = found[0]["path"]
    key = fs.unstrip_protocol(path)
    if key in _LOADED:
        return _LOADED[key]
    manifest_path = f"{path}/{MANIFEST_FILE}"
    manifest = _read(fs, manifest_path, json.loads, "not a learned model directory (or an interrupted save)")
    _check_manifest(manifest, manifest_path)
    model_path = f"{path}/{MODEL_FILE}"
    payload = _read(fs, model_path, pickle.loads, "the manifest has no model beside it")
    if not isinstance(payload, dict) or payload.get("schema_version") != SCHEMA_VERSION or not isinstance(payload.get("scorer"), StepScorer):
        found_version = payload.get("schema_version") if isinstance(payload, dict) else None
        raise TracerError(f"{model_path}: schema_version: the file holds schema version {found_version!r}, not "
                          f"{SCHEMA_VERSION}. Retrain it with `rootstep tracer train`.")
    notes = []
    versions = _library_versions()
    for name, version in (manifest.get("libraries") or {}).items():
        if versions.get(name) != version:
            notes.append(f"model trained with {name} {version}, running {versions.get(name)}")
    loaded = LearnedModel(str(manifest.get("model_id")), path, manifest, payload["scorer"], notes)
    _LOADED[key] = loaded
    return loaded


@tracer("learned")
def learned(
    trace: Trajectory | dict[str, Any],
    with_ground_truth: bool = True,
    warehouse: Warehouse | None = None,
    model: str | None = None,
) -> Attribution:
    """Attribute with the learned step scorer: no LLM, milliseconds per run.

    `model` is a model directory or id (default: the warehouse's newest model for the setting); a model
    trained with ground truth is only used with ground truth and vice versa (`TracerError` otherwise).
    """
    t = as_trajectory(trace)
    loaded = load_model(warehouse, model, with_ground_truth)
    if loaded.with_ground_truth != with_ground_truth:
        raise TracerError(f"{loaded.path}: with_ground_truth: the model was trained "
                          f"{'with' if loaded.with_ground_truth else 'without'} ground truth; attribute in the same setting")
    started = time.perf_counter()
    result = attribution_from_scores(t, *loaded.scorer.explain(t), loaded.model_id, with_ground_truth)
    result.cost.seconds = time.perf_counter() - started
    result.notes += loaded.notes
    result.details["model_path"] = loaded.path
    return result
