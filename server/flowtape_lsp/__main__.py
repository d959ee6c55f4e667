"""`python -m flowtape_lsp`: the language server over stdio, as `flowtape lsp`."""

import sys

from .server import main

sys.exit(main())
