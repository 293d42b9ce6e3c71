import sys
from pathlib import Path

# a2a_hosting_support: the loopback serving helper and the server process the tests start.
sys.path.insert(0, str(Path(__file__).resolve().parent))
