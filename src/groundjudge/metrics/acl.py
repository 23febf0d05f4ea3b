"""ACL checks: no retrieved, context or cited chunk outside the asking user's tenant and roles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from groundjudge.contracts import CorpusChunk, GoldenCase, Trace


@dataclass(frozen=True)
class AclLeak:
    chunk_id: str
    where: str  # "retrieved", "context" or "cited"
    reason: str


def chunk_allowed(chunk: CorpusChunk, tenant: str | None, roles: Sequence[str]) -> str | None:
    """Return why the user may not see ``chunk``, or None when they may."""
    if chunk.acl is None:
        return None
    if chunk.acl.tenants and tenant not in chunk.acl.tenants:
        return f"tenant {tenant!r} not in {chunk.acl.tenants}"
    if chunk.acl.roles and not set(roles) & set(chunk.acl.roles):
        return f"roles {roles} lack one of {chunk.acl.roles}"
    return None


def acl_leaks(case: GoldenCase, trace: Trace, chunks: Mapping[str, CorpusChunk]) -> list[AclLeak] | None:
    """Every chunk the user should not have seen, by stage; None when it cannot be checked."""
    if case.user_context is None or not chunks:
        return None
    tenant, roles = case.user_context.tenant, case.user_context.roles
    leaks = []
    for where, items in (("retrieved", trace.retrieved_chunks), ("context", trace.context_chunks),
                         ("cited", trace.citations)):
        for cid in (c.chunk_id for c in items):
            chunk = chunks.get(cid)
            reason = chunk_allowed(chunk, tenant, roles) if chunk else None
            if reason:
                leaks.append(AclLeak(cid, where, reason))
    return leaks
