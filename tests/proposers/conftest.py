import sys
from pathlib import Path

# proposer_toys.py sits next to the tests; make it importable however pytest was started.
sys.path.insert(0, str(Path(__file__).parent))
