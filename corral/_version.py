"""corral's version, in a module of its own so that the core can record it without importing the public face."""

__version__ = "0.1.0"
