"""The embedded default models (no imports: read by every CLI module without loading the gateway).

Chosen by measurement on the main job's slice (README, "Offline models"): the agents run on the fast
0.5B model, whose real small-model mistakes are the material the pipeline labels; the analyzer and the
perturber, whose answers must follow a JSON contract and rewrite a step faithfully, on the 1.5B model.
"""

DEFAULT_MODEL = "local/qwen2.5-coder-0.5b"
"""The agents' model when a run names none."""

DEFAULT_ANNOTATOR_MODEL = "local/qwen2.5-coder-1.5b"
"""The analyzer's (counterfactual) and perturber's (fault injection) model when none is named."""

DEFAULT_SCORER_MODEL = "local/gemma-3-270m"
"""The confidence tracer's scoring model (a base model, read through its SentencePiece vocabulary)."""
