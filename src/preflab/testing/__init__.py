"""Helpers for tests and benchmarks that speak real protocols (local servers, failpoints)."""
