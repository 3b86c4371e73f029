"""`python -m agent` runs the hwagent CLI (the same as the console script)."""

import sys

from agent.cli import main

sys.exit(main())
