"""``python -m llama_index_docmemo.cli``: the ``docmemo`` command."""

import sys

from llama_index_docmemo.cli import main

sys.exit(main())
