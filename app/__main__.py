"""`python -m app [SPEC]`: what the driver pod runs; SPEC defaults to the mounted spec."""

import sys

from app.cli.commands import main
from contract import SPEC_FILE_NAME, SPEC_MOUNT_DIR

if __name__ == "__main__":
    args = sys.argv[1:] or [f"{SPEC_MOUNT_DIR}/{SPEC_FILE_NAME}"]
    if args[0] not in ("run", "validate", "checkpoint", "--help", "--version"):
        args = ["run", *args]
    sys.argv = [sys.argv[0], *args]
    try:
        main()
    except Exception as exc:  # a crash before the job could say why: the operator still learns it
        from app.driver.run import RunOptions, write_termination_log
        from app.pipeline.failures import one_line
        from contract import ExitCode

        write_termination_log(RunOptions.from_env().termination_log, f"{ExitCode.QUERY_FAILED.name}: {one_line(str(exc))}")
        raise
