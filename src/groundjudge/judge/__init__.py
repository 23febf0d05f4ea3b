"""Judge stage: rubric render -> cache lookup -> client call -> parse and validate (SPEC 5)."""
