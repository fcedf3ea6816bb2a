"""`streamq dev`: the fraud filter on a laptop, with a real broker on loopback."""
