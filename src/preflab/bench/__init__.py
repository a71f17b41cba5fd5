"""Benchmarks and paper reproductions; each module has ``main(argv) -> int``."""
