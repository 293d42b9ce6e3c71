"""ext-tools-http: call a REST endpoint as an ext tool (`HttpTool`)."""

from .__about__ import __version__
from ._errors import HttpConnectionError, HttpResponseFormatError, HttpStatusError, HttpTimeoutError, HttpToolError
from ._tool import HttpTool, HttpToolConfig

__all__ = [
    "HttpConnectionError",
    "HttpResponseFormatError",
    "HttpStatusError",
    "HttpTimeoutError",
    "HttpTool",
    "HttpToolConfig",
    "HttpToolError",
    "__version__",
]
