"""PNG charts of an evaluation: accuracy by method, and where the decisive steps lie."""

from __future__ import annotations

from pathlib import Path

from rootstep.warehouse import Warehouse

ACCURACY_SQL = """
    SELECT a.annotator,
           avg(CASE WHEN a.agent = l.agent THEN 1 ELSE 0 END) AS agent_acc,
           avg(CASE WHEN a.step = l.step THEN 1 ELSE 0 END) AS step_acc,
           count(*) AS n
    FROM annotations a JOIN labels l ON l.run_id = a.run_id
    WHERE a.method = 'tracer'
    GROUP BY a.annotator ORDER BY a.annotator
"""
POSITION_SQL = "SELECT l.step, r.n_steps FROM labels l JOIN runs r ON r.id = l.run_id"


def plot_evaluation(warehouse: Warehouse, out: str | Path) -> Path:
    """Two panels: agent/step accuracy of every tracer annotator stored, and the gold decisive-step positions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    accuracy = warehouse.rows(ACCURACY_SQL)
    positions = warehouse.rows(POSITION_SQL)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    names = [f"{r['annotator']}\n(n={r['n']})" for r in accuracy]
    xs = range(len(accuracy))
    left.bar([x - 0.2 for x in xs], [r["agent_acc"] for r in accuracy], width=0.4, label="agent-level")
    left.bar([x + 0.2 for x in xs], [r["step_acc"] for r in accuracy], width=0.4, label="step-level (exact)")
    left.set_xticks(list(xs), names, fontsize=7)
    left.set_ylim(0, 1)
    left.set_ylabel("accuracy")
    left.set_title("attribution accuracy by method")
    left.legend()
    right.hist([p["step"] for p in positions], bins=range(0, max([p["step"] for p in positions] + [1]) + 2), color="tab:red")
    right.set_xlabel("decisive step (0-based)")
    right.set_ylabel("labelled runs")
    right.set_title(f"decisive-step distribution (n={len(positions)})")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
