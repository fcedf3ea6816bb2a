"""Checkpoints read without Spark: the reader (the job's gate, the watchdog) and `streamq checkpoint inspect`."""
