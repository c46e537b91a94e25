"""The run page: a trajectory, its label with the evidence behind it, and a run beside one of its replays.

Evidence is read from the warehouse as the annotation flows wrote it: each non-tracer annotation of the
run with the `Replay` rows its evidence names (every attempt: the step and agent intervened on, the
forced fix or corruption, what Omega said before and after, divergence or error, what it cost) and the
re-simulated run each attempt produced.

A label re-done from scratch (`rootstep annotate --recheck N`) is shown beside its re-check: the two
attempts side by side (agent, step, fix, replays) and whether they agree or the re-check lands elsewhere,
as the warehouse's `agreement` view says; the re-check is not listed again among the evidence.

Which replay is shown side by side (`compare`, a replay id): by default, for a replayed run (a fixed or
corrupted re-simulation) the replay that produced it, next to the run it re-simulates; for an original
run the replay that proves its label, else its first replay that flipped Omega, else its first replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rootstep.model import Annotation, Trajectory
from rootstep.warehouse import Warehouse
from rootstep.warehouse import annotation_from_row

from ._align import Alignment, align


@dataclass
class Evidence:
    """One non-tracer annotation and the replays that are its attempts."""

    annotation: Annotation
    attempts: list[dict[str, Any]]
    label: bool
    """This annotation is the run's label (its latest verified one)."""


@dataclass
class Recheck:
    """A label and its re-check (`agreement` view): both attempts, and whether (agent, step) agree."""

    original: Evidence
    again: Evidence
    agrees: bool


@dataclass
class Comparison:
    replay: dict[str, Any]
    original_id: str
    replayed_id: str
    alignment: Alignment | None
    original: Trajectory | None = None
    replayed: Trajectory | None = None
    missing: str | None = None
    """Why there is nothing to show (the replayed run was not stored)."""


@dataclass
class RunView:
    run_id: str
    trajectory: Trajectory
    label: Annotation | None
    evidence: list[Evidence]
    predictions: list[Annotation]
    replays: list[dict[str, Any]]
    """Replays of this run (all purposes), newest last."""
    origin: dict[str, Any] | None
    """The replay that produced this run, when it is a re-simulation."""
    comparison: Comparison | None
    verdict_details: str | None = None
    choices: list[dict[str, Any]] = field(default_factory=list)
    """Replays that can be shown side by side (they have a stored result run)."""
    rechecks: list[Recheck] = field(default_factory=list)
    """This run's labels that were re-done from scratch, each beside its re-check, oldest first."""


def _replay_rows(con: Any, where: str, params: list[Any]) -> list[dict[str, Any]]:
    rows = con.sql(
        f"SELECT p.*, r.success AS result_success, r.final_answer AS result_final_answer, "
        f"r.verdict_details AS result_verdict_details, r.id IS NOT NULL AS result_stored "
        f"FROM replays p LEFT JOIN runs r ON r.id = p.result_run_id WHERE {where} ORDER BY p.created_at, p.id",
        params=params,
    ).to_arrow_table().to_pylist()
    for row in rows:
        row["result_verdict_details"] = _pretty_json(row["result_verdict_details"])
    return rows


def _pretty_json(text: str | None) -> str | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return None if value in ({}, None) else json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True)


def _default_compare(view_replays: list[dict[str, Any]], origin: dict[str, Any] | None,
                     label: Annotation | None) -> dict[str, Any] | None:
    if origin is not None:
        return origin
    stored = [r for r in view_replays if r["result_stored"]]
    proof = label.proof_replay_id if label is not None else None
    for r in stored:
        if r["id"] == proof:
            return r
    return next((r for r in stored if r["flipped"]), stored[0] if stored else None)


def run_view(warehouse: Warehouse, run_id: str, compare: str | None = None) -> RunView:
    """Everything the run page shows; `run_id` may be an unambiguous prefix."""
    run_id = warehouse.resolve_run_id(run_id)
    trajectory = warehouse.trajectory(run_id)
    with warehouse.connect() as con:
        annotations = [annotation_from_row(r) for r in con.sql(
            "SELECT * FROM annotations WHERE run_id = ? ORDER BY created_at, id", params=[run_id]
        ).to_arrow_table().to_pylist()]
        label_rows = con.sql("SELECT id FROM labels WHERE run_id = ?", params=[run_id]).fetchall()
        label_id = label_rows[0][0] if label_rows else None
        replays = _replay_rows(con, "p.run_id = ?", [run_id])
        origins = _replay_rows(con, "p.result_run_id = ?", [run_id])
        named = sorted({i for a in annotations for i in a.evidence.replay_ids})
        by_id = {r["id"]: r for r in _replay_rows(con, "p.id IN (SELECT unnest(?))", [named])} if named else {}
        details = con.execute("SELECT verdict_details FROM runs WHERE id = ?", [run_id]).fetchall()[0][0]
        agreement = con.execute("SELECT label_id, recheck_id, agrees FROM agreement WHERE run_id = ? "
                                "ORDER BY rechecked_at, recheck_id", [run_id]).fetchall()
    label = next((a for a in annotations if a.id == label_id), None)
    searched = {
        a.id: Evidence(annotation=a, attempts=[by_id[i] for i in a.evidence.replay_ids if i in by_id], label=a.id == label_id)
        for a in annotations if a.method != "tracer"
    }
    rechecks = [Recheck(original=searched[original], again=searched[again], agrees=bool(agrees))
                for original, again, agrees in agreement if original in searched and again in searched]
    shown_apart = {r.again.annotation.id for r in rechecks}
    evidence = [e for e in searched.values() if e.annotation.id not in shown_apart]
    predictions = [a for a in annotations if a.method == "tracer"]
    origin = origins[0] if origins else None
    choices = [r for r in [*origins, *replays] if r["result_stored"]]
    chosen = next((r for r in choices if r["id"] == compare), None) if compare else None
    chosen = chosen or _default_compare(replays, origin, label)
    return RunView(run_id=run_id, trajectory=trajectory, label=label, evidence=evidence, predictions=predictions,
                   replays=replays, origin=origin, comparison=None if chosen is None else compare_runs(warehouse, chosen),
                   verdict_details=_pretty_json(details), choices=choices, rechecks=rechecks)


def compare_runs(warehouse: Warehouse, replay: dict[str, Any]) -> Comparison:
    """The replay's original run and its result run, aligned step by step."""
    original_id, replayed_id = replay["run_id"], replay["result_run_id"]
    if not replay["result_stored"]:
        return Comparison(replay=replay, original_id=original_id, replayed_id=replayed_id or "", alignment=None,
                          missing="the re-simulated run of this replay is not in the warehouse")
    runs = dict(warehouse.trajectories("id IN (?, ?)", [original_id, replayed_id]))
    original, replayed = runs.get(original_id), runs.get(replayed_id)
    if original is None or replayed is None:
        return Comparison(replay=replay, original_id=original_id, replayed_id=replayed_id, alignment=None,
                          missing="one of the two runs is not in the warehouse")
    return Comparison(replay=replay, original_id=original_id, replayed_id=replayed_id, original=original,
                      replayed=replayed, alignment=align(original, replayed, replay["intervention_step"]))
