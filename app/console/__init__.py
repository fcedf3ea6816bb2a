"""What a person reads on a terminal while a query runs: progress lines, one writer on the screen."""
