"""Server-rendered SVG charts for the evaluation page (matplotlib's SVG backend, text kept as text).

Each function returns an `<svg>` element to inline in the page (no image files, no JavaScript), or
None when there is nothing to draw.
"""

from __future__ import annotations

import io
import re
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

_LOCK = threading.Lock()  # matplotlib's rcParams are process-global
_STYLE: "dict[RcKeyType, Any]" = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#e3e6ea",
    "axes.edgecolor": "#8a939c",
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
}
COLORS = ["#3b6fb6", "#d9822b", "#3a9a5b", "#b8463f", "#7a5cb0", "#8a939c"]


def _svg(fig: Any, title: str) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    # scale with the page: keep the viewBox, let CSS set the size
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', text, count=1)
    return text.replace("<svg", f'<svg role="img" aria-label="{title}" class="chart"', 1)


def _figure(width: float, height: float, panels: int = 1) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, panels)
    return fig, list(axes) if panels > 1 else [axes]


def accuracy_chart(scores: list[Any]) -> str | None:
    """Agent- and step-level accuracy of each tracer annotator, with the random baseline as a black tick."""
    if not scores:
        return None
    import matplotlib

    with _LOCK, matplotlib.rc_context(_STYLE):
        fig, (ax,) = _figure(5.2, 3.4)
        xs = range(len(scores))
        for offset, key, label, color in ((-0.18, "agent_acc", "agent", COLORS[0]), (0.18, "step_acc", "step (exact)", COLORS[1])):
            ax.bar([x + offset for x in xs], [s.overall.get(key) or 0.0 for s in scores], width=0.34, label=label, color=color)
            ax.scatter([x + offset for x in xs], [s.overall.get(f"random_{key}") or 0.0 for s in scores], marker="_",
                       s=200, linewidths=2, color="#222", zorder=3, label="random baseline" if key == "agent_acc" else None)
        ax.set_xticks(list(xs), [f"{s.annotator}\n(n={s.overall['n']})" for s in scores], fontsize=7)
        ax.set_xlim(-0.7, len(scores) - 0.3)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("accuracy")
        ax.set_title("attribution accuracy by method")
        ax.legend(fontsize=7, frameon=False, ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.22))
        return _svg(fig, "attribution accuracy by method")


def position_chart(positions: list[dict[str, Any]], bins: int = 10) -> str | None:
    """Histogram of where labels sit: the decisive step as a share of the run's length, by label method."""
    if not positions:
        return None
    import matplotlib

    from matplotlib.ticker import MaxNLocator

    methods = sorted({p["method"] for p in positions})
    counts = {m: Counter(min(int(bins * p["step"] / p["n_steps"]), bins - 1) for p in positions if p["method"] == m)
              for m in methods}
    with _LOCK, matplotlib.rc_context(_STYLE):
        fig, (ax,) = _figure(5.2, 3.2)
        bottom = [0] * bins
        for i, m in enumerate(methods):
            heights = [counts[m].get(b, 0) for b in range(bins)]
            ax.bar([b + 0.5 for b in range(bins)], heights, width=0.9, bottom=bottom, label=m, color=COLORS[i % len(COLORS)])
            bottom = [a + h for a, h in zip(bottom, heights)]
        ax.set_xticks(range(0, bins + 1, 2), [f"{100 * b // bins}%" for b in range(0, bins + 1, 2)])
        ax.set_xlim(0, bins)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("decisive step, as a share of the run's steps")
        ax.set_ylabel("labels")
        ax.set_title(f"where the decisive step lies (n={len(positions)})")
        ax.legend(fontsize=7, frameon=False)
        return _svg(fig, "decisive-step position histogram")


def cost_chart(costs: list[dict[str, Any]]) -> str | None:
    """USD, LLM calls and replays spent per verified label, by annotation method."""
    rows = [c for c in costs if c["verified"]]
    if not rows:
        return None
    import matplotlib

    panels = (("usd_per_label", "USD"), ("llm_calls_per_label", "analyzer / perturber calls"), ("replays_per_label", "replays"))
    with _LOCK, matplotlib.rc_context(_STYLE):
        fig, axes = _figure(9.0, 0.5 + 0.45 * len(rows), panels=len(panels))
        names = [r["method"] for r in rows]
        for ax, (key, title) in zip(axes, panels):
            values = [r[key] or 0.0 for r in rows]
            ax.barh(range(len(rows)), values, color=[COLORS[i % len(COLORS)] for i in range(len(rows))], height=0.6)
            ax.set_yticks(range(len(rows)), names if ax is axes[0] else [""] * len(rows))
            for y, v in enumerate(values):
                ax.text(v, y, f" {v:.4g}", va="center", fontsize=8)
            ax.set_title(title, fontsize=9)
            ax.grid(axis="x", color="#e3e6ea")
            ax.grid(axis="y", visible=False)
            ax.margins(x=0.3)
        return _svg(fig, "cost per verified label by method")
