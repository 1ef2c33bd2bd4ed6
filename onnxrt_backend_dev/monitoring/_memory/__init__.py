"""Memory: the spy worker, its probes, the series it returns and their plots.

Kept free of imports: the spy process imports its worker through this package."""
