"""Building a kernel from configuration, the way ext builds clients.

`build_kernel("openai", {"default_model": "gpt-4o-mini"})` is the .NET design's "add a kernel, register a provider's
chat completion with a model and key": ext's `build_client` makes the provider's client (the key from the provider's
environment variable, never from the configuration in clear) and the kernel gets it as its chat service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ext.core import AIClientOptions, ChatCompletionClient, ConfigurationError
from ext.pipeline import build_client
from semantic_kernel import Kernel
from semantic_kernel.functions import KernelPlugin

from ._service import ExtChatCompletion

__all__ = ["build_kernel", "kernel_with_client"]


def kernel_with_client(
    client: ChatCompletionClient,
    *,
    service_id: str | None = None,
    plugins: Sequence[KernelPlugin] = (),
    kernel: Kernel | None = None,
) -> Kernel:
    """`kernel` (a new one by default) with `client` as a chat service and `plugins` added."""
    if kernel is None:
        kernel = Kernel()
    elif not isinstance(kernel, Kernel):
        raise ConfigurationError(f"kernel must be a semantic_kernel.Kernel, got {type(kernel).__name__}")
    given: object = plugins
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise ConfigurationError(f"plugins must be a list of KernelPlugins, got {type(given).__name__}")
    for index, plugin in enumerate(plugins):
        if not isinstance(plugin, KernelPlugin):
            raise ConfigurationError(f"plugins[{index}] must be a KernelPlugin, got {type(plugin).__name__}")
    kernel.add_service(ExtChatCompletion(client, service_id=service_id))
    for plugin in plugins:
        kernel.add_plugin(plugin)
    return kernel


def build_kernel(
    provider: str,
    options: AIClientOptions | Mapping[str, Any] | None = None,
    /,
    *,
    service_id: str | None = None,
    plugins: Sequence[KernelPlugin] = (),
    **client_args: Any,
) -> Kernel:
    """A kernel whose chat service is `provider`'s ext client, built by `ext.pipeline.build_client(provider, options,
    **client_args)` (so `provider` is any installed ext provider: `openai`, `anthropic`, `llama-cpp`, ...), with
    `plugins` added. Bad configuration raises `ConfigurationError` naming the field, before any request."""
    client = build_client(provider, options, **client_args)
    return kernel_with_client(client, service_id=service_id, plugins=plugins)
