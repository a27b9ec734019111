"""A real REAPI backend for the tests: BuildGrid on PostgreSQL, and Bots API workers.

`backend.py` starts and stops it (from the tests and from `scripts/reapi_backend.sh`);
`worker.py` is the worker, run by BuildGrid's virtual environment's Python.
"""
