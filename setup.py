"""Build of the optional compiled extension ttgnn._C; all metadata lives in pyproject.toml."""
from setuptools import setup

setup()
