"""`python -m tasks.cli ...`: the command line (tasks/cli/main.py)."""

import sys

from tasks.cli.main import main

sys.exit(main())
