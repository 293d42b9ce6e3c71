"""ext.testing.llama_server fails clearly and promptly, before or while starting the server, never hanging.

The real server is exercised by the suites that use it (ext-models-openai's and tests-integration's real-server
conformance tests); these cases need neither llama-cpp-python nor a model.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ext.testing import llama_server
from ext.testing.llama_server import INSTALL_HINT, start_llama_server


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-python"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"model_path '.*absent\.gguf' is not a file"):
        start_llama_server(tmp_path / "absent.gguf")


def test_missing_server_modules_are_named_with_the_install_command(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_server, "SERVER_MODULES", ("pytest", "ext_no_such_module_for_the_server"))
    with pytest.raises(ModuleNotFoundError, match="needs ext_no_such_module_for_the_server, which is not") as info:
        start_llama_server(model)
    assert str(info.value).endswith(f"install it with: {INSTALL_HINT}")  # only the missing one is named


def test_a_server_that_exits_is_reported_with_its_log(model: Path, tmp_path: Path) -> None:
    python = _script(tmp_path, 'echo "error: cannot load model $4" >&2; exit 3')
    with pytest.raises(RuntimeError, match=r"exited with code 3 before answering") as info:
        start_llama_server(model, python=python)
    assert f"error: cannot load model {model}" in str(info.value)  # the log's tail, with the arguments it got


def test_a_server_that_never_answers_times_out(model: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    python = _script(tmp_path, f'echo $$ > {pid_file}; echo "loading"; exec sleep 60')
    with pytest.raises(RuntimeError, match=r"did not answer http://127\.0\.0\.1:\d+/v1/models within 0\.5 s"):
        start_llama_server(model, python=python, ready_timeout=0.5)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # stopped, not left running
        os.kill(pid, 0)
