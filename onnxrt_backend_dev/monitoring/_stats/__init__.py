"""The statistics every comparison shares, standard library only (nothing heavy is
imported): one implementation for ``time --compare``, ``compare`` and the pytest gate.

* :mod:`.distributions`: Student's t (tail and quantile, through the incomplete beta
  function) and the normal distribution;
* :mod:`.ranks`: Mann-Whitney's U test, the exact Hodges-Lehmann estimate and interval
  (selected without building the ``n m`` differences), the one-sort small-sample
  version;
* :mod:`.welch`: Welch's t-test from summaries and on log figures, and the *moderated*
  test of log figures (a variance borrowed from a prior, as limma does) with a margin of
  negligible change;
* :mod:`.multiple`: Holm's (weighted) step-down correction, weighted medians;
* :mod:`.counts`: the test of two sampled counts (Poisson, with extra variance);
* :mod:`.power`: how many runs would decide a change.
"""
