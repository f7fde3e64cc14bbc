"""The package version, in a module of its own so that modules inside the package (provenance, cli) read it
without importing the package ``__init__`` (and through it the core). Keep it equal to pyproject.toml's."""

__version__ = "0.1.0"
