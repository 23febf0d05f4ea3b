"""Deterministic metrics (SPEC section 4): same inputs, same numbers, no model."""
