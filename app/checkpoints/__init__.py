"""Checkpoints read without Spark (reader.py): the job's checkpoint gate, the watchdog, `streamq checkpoint inspect`."""
