"""`OAuthSettings`: checked at construction (before any network call), secrets kept out of repr and dumps."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ext.core import ConfigurationError
from ext.testing.readme import python_example
from ext.tools.mcp import (
    FileTokenStore,
    McpWorkbench,
    OAuthSettings,
    SseServerParams,
    StreamableHttpServerParams,
)

SECRET = "s3cr3t-client-value"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grant": "client_credentials"}, "grant='client_credentials' needs client_id"),
        ({"grant": "client_credentials", "client_id": "c"}, "needs either a client secret"),
        (
            {"grant": "client_credentials", "client_id": "c", "client_secret": "x", "private_key_env": "K"},
            "needs either a client secret",
        ),
        ({"client_secret": "x"}, "a client secret needs the client_id"),
        ({"client_id": "c", "client_secret": "x", "client_secret_env": "E"}, "not both"),
        ({"private_key_env": "K", "client_id": "c"}, "applies to grant='client_credentials' only"),
        ({"scopes": ["read write"]}, "each scope must be a non-empty token"),
        ({"scopes": [""]}, "each scope must be a non-empty token"),
        ({"issuer": "ftp://x"}, "issuer must be the authorization server's http(s) issuer URL"),
        ({"client_metadata_url": "http://example.com/client.json"}, "client_metadata_url must be an https:// URL"),
        ({"client_metadata_url": "https://example.com/"}, "client_metadata_url must be an https:// URL"),
        ({"callback_port": 0}, "callback_port"),
        ({"callback_port": 70000}, "callback_port"),
        ({"callback_path": "callback"}, "callback_path must be a URL path"),
        ({"token_store": object()}, "token_store must be a TokenStore"),
        ({"token_store": FileTokenStore("/tmp/x"), "token_dir": "/tmp/y"}, "give them or token_store, not both"),
        ({"grant": "client_credentials", "client_id": "c", "client_secret": "x", "callback_port": 3030}, "apply to"),
        (
            {"private_key_file": "/nonexistent/key.pem", "client_id": "c", "grant": "client_credentials"},
            "does not exist",
        ),
        ({"grant": "password"}, "grant"),
        ({"unknown": 1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        OAuthSettings(**kwargs)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert SECRET not in str(caught.value)


def test_bad_auth_on_params_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"auth must be OAuthSettings, an httpx2\.Auth"):
        StreamableHttpServerParams(url="http://127.0.0.1:1/mcp", auth=42)
    with pytest.raises(ValidationError, match="grant='client_credentials' needs client_id"):
        StreamableHttpServerParams(
            url="http://127.0.0.1:1/mcp", auth={"type": "OAuthSettings", "grant": "client_credentials"}
        )


def test_secret_from_environment_is_resolved_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = OAuthSettings(grant="client_credentials", client_id="c", client_secret_env="EXT_TEST_OAUTH_SECRET")
    monkeypatch.delenv("EXT_TEST_OAUTH_SECRET", raising=False)
    with pytest.raises(ConfigurationError, match="'EXT_TEST_OAUTH_SECRET' is not set"):
        settings.secret()
    monkeypatch.setenv("EXT_TEST_OAUTH_SECRET", SECRET)
    assert settings.secret() == SECRET


def test_secrets_stay_out_of_repr_and_dumps(tmp_path: Path) -> None:
    inline = OAuthSettings(client_id="c", client_secret=SECRET, scopes=["mcp"])
    assert SECRET not in repr(inline) and SECRET not in str(inline)
    assert SECRET not in inline.model_dump_json()
    params = StreamableHttpServerParams(url="http://127.0.0.1:1/mcp", auth=inline)
    assert SECRET not in repr(params)
    # A workbench whose dump would lose the inline secret refuses to dump, naming the way to keep it.
    with pytest.raises(Exception, match="client_secret_env"):
        McpWorkbench(params).dump_component()


def test_settings_by_name_dump_and_load_back(tmp_path: Path) -> None:
    settings = OAuthSettings(
        client_id="c",
        client_secret_env="MY_SECRET",
        scopes=["mcp", "extra"],
        callback_port=3030,
        token_dir=str(tmp_path),
        token_encryption_key_env="MY_KEY",
        issuer="https://auth.example.com",
    )
    bench = McpWorkbench(SseServerParams(url="http://127.0.0.1:1/sse", auth=settings))
    dumped = bench.dump_component()
    loaded = McpWorkbench.load_component(dumped)
    assert isinstance(loaded.server_params, SseServerParams)
    assert loaded.server_params.auth == settings


def test_readme_oauth_example_runs_as_written() -> None:
    """The README's OAuth example builds its settings (what it does before any network call) as written."""
    code = python_example(Path(__file__).parent.parent / "README.md", "OAuthSettings(scopes")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    params = namespace["m2m"]
    assert isinstance(params, StreamableHttpServerParams)
    assert params.oauth is not None and params.oauth.grant == "client_credentials"
    assert callable(namespace["first_use"])
