"""Choosing and validating: validation schemes and the choice among nested candidates.

- ``validation``: schemes and folds (``Folds``, ``EndSplit``)
- ``selection``: nested candidates chosen by the held-out folds
- ``term_screening``: further drive terms tried one by one
- ``ridge_evidence``: the ridge toward the nominal of largest evidence (empirical Bayes)
"""
