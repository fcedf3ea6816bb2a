"""The contract between the job and the operator: everything both sides must agree on.

No Spark in here (a unit test imports every module with pyspark blocked). The
operator imports nothing from ``app`` but this package.

    names       API group and kind, labels, paths in the driver pod, exit codes
    modes       the trigger modes and what each one allows
    spec        the StreamingQuery spec model (the CRD schema is generated from it)
    rules       cross-field rules, each with its CEL twin for the CRD
    policy      what a query may ask of the cluster: the platform's policy (chart values)
    load        reading and validating a spec or a whole resource
    problems    how a spec is found wrong: problems at paths the user can find
    checkpoint  what a checkpoint holds; offsets in Spark's JSON form
    compat      which spec changes a checkpoint survives
    resume      offsets kept outside the checkpoint, for a lost one
    progress    the progress record the job prints and the operator reads
    failpoints  named faults the tests switch on (STREAMQ_FAILPOINT); off unless set
    cli_help    how every command line (the job's streamq, the operator's) shows its parameters in --help
"""

from contract.names import *  # noqa: F403  (the names are the contract's vocabulary)
