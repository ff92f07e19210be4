"""``python -m devtools.workers seed|leak SPEC_JSON``: what the report and the PostgreSQL tests run."""

import sys

from devtools.workers.seeding import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
