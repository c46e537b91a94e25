"""Prompt templates (analyzer, perturber, attribution methods) as files, loaded with jinja2, and the one
renderer of a run into prompt text (`render_steps`, printed by `_run.j2`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ._run import MAX_OUTPUT_CHARS, MIN_STEP_CHARS, compact_contents, render_steps, shorten, step_cap

__all__ = ["MAX_OUTPUT_CHARS", "MIN_STEP_CHARS", "PROMPTS_DIR", "compact_contents", "environment", "render", "render_steps",
           "shorten", "step_cap"]

PROMPTS_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The jinja2 environment over this folder: undefined variables are errors, not empty strings."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def render(name: str, **variables: Any) -> str:
    """Render `prompts/<name>` with `variables`."""
    return environment().get_template(name).render(**variables).strip() + "\n"
