"""Prefect flows and tasks: collect, annotate (counterfactual, inject), pipeline, backfill, deployments."""
