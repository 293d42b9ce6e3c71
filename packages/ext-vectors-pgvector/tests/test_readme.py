"""The README's example runs as written, in a fresh interpreter, against the test PostgreSQL (DATABASE_URL without
the password, the password in PGPASSWORD, as the README advises)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ext.testing.postgres import PASSWORD, PostgresServer

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(postgres: PostgresServer, tmp_path: Path) -> None:
    [example] = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    script = tmp_path / "example.py"
    script.write_text(example, encoding="utf-8")
    env = {**os.environ, "DATABASE_URL": postgres.url_without_password, "PGPASSWORD": PASSWORD}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "a 0.995 alpha"
