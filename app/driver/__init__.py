"""The driver's life: start, the standby's Lease and warm-up, in-place restarts, resuming, stopping."""
