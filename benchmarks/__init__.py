"""Task sets and their verifiers (the success function Omega)."""
