"""Docker sandboxes: locally built images, warm container pool, hard limits, local fallback."""
