"""``python -m tests.workers seed|leak SPEC_JSON``: what the report and the PostgreSQL tests run."""

import sys

from tests.workers.seeding import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
