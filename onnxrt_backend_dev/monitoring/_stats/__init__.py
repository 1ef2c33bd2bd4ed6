"""The statistics every comparison shares, standard library only: one implementation for
``time --compare``, ``compare`` and the pytest gate. Student's t and the normal
distribution (:mod:`.distributions`), Mann-Whitney and Hodges-Lehmann (:mod:`.ranks`),
Welch's test, moderated by a prior as limma does (:mod:`.welch`), Holm's correction
(:mod:`.multiple`), the test of sampled counts (:mod:`.counts`), the biweight location
(:mod:`.robust`) and the runs that would decide a change (:mod:`.power`).
"""
