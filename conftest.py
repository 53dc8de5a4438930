"""Shared test settings.

The notebooks' kernels inherit this environment: a fixed hash seed keeps any
set or dict ordering that depends on string hashes the same in every run.
"""
import os

os.environ["PYTHONHASHSEED"] = "0"
