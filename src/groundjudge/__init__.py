"""groundjudge: grade the answers of RAG systems and decide whether a release may ship."""

__version__ = "0.1.0"
