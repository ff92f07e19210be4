"""Framework-free scoring: every number the server shows is computed here, never in Django.

- ``scoring.kinds``: the task kinds behind one interface (``kinds/base.py``) and a registry; each
  kind's package holds the same files (``kind.py`` its adapter, ``formats.py`` its files, ...):
  ``stc3`` (DQ/ND distributions), ``response`` (response generation), ``metric`` (metrics track);
- ``scoring.validation``: the toolkit every kind's formats share (errors with JSON paths,
  bounded parsing, the id and text rules);
- ``scoring.stats``: significance tests and intervals over per-item scores, for every kind;
- ``scoring.exports``, ``scoring.report``, ``scoring.cli``: what the statistics and the offline
  ``score`` command write.

Everything here imports NumPy, SciPy and the kinds' own libraries only, never Django: the
server, the offline commands, the tests and the benchmarks compute through it.
"""
