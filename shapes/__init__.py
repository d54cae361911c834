"""Load shapes (concurrency sweep, length sweep, rate sweep) and the stage they put every request in."""
