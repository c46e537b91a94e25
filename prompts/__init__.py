"""Prompt templates (analyzer, perturber, attribution methods) as files, loaded with jinja2."""
