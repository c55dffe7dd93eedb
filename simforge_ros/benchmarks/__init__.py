"""Pieces of `simforge bench`: statistics, the transport floor, loop runs, hashing, engine."""
