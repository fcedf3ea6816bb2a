"""`python -m app [SPEC]`: what the driver pod runs; SPEC defaults to the mounted spec."""

import sys

from app.cli import main
from app.contract import SPEC_FILE_NAME, SPEC_MOUNT_DIR

if __name__ == "__main__":
    args = sys.argv[1:] or [f"{SPEC_MOUNT_DIR}/{SPEC_FILE_NAME}"]
    if args[0] not in ("run", "validate", "checkpoint", "--help"):
        args = ["run", *args]
    sys.argv = [sys.argv[0], *args]
    main()
