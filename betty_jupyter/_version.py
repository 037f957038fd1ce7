"""Betty's version, read by the build and reported by every face."""

__version__ = "0.1.0"
