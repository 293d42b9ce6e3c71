from ext.testing.__about__ import __version__

__all__ = ["__version__"]
