import sys
from pathlib import Path

# a2a_peers: the loopback A2A servers the tests share.
sys.path.insert(0, str(Path(__file__).resolve().parent))
