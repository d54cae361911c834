"""Entry point of ``python -m tokenizer_checks`` (see :mod:`tokenizer_checks.cli`)."""

import sys

from tokenizer_checks.cli import main

sys.exit(main())
