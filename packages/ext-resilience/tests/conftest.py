from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tests' support modules

# --- rate limits and budgets (issue 36, limits) ---
from ext_resilience_limits_support import limits_redis, limits_server  # noqa: F401 - fixtures
