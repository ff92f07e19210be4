"""Framework-free maths of the response-generation task kind (RESPONSE-SPEC.md, seeds 000, 001, 004).

- ``bleu``: BLEU and deltaBLEU from per-item sufficient statistics (corpus scores of any subset exact);
- ``nlp``: the spaCy pipeline and word-vector tables (loaded once per process, never downloaded);
- ``posscore``: POSSCORE with references prepared once per gold version;
- ``nuggets``: nugget-level scores NS(T, n) on top of any per-item response measure;
- ``formats``: validation of response gold files and runs;
- ``vbleu``: vBLEU's references: a dialogue pool, BM25 retrieval, the automatic rater, the extended gold.

Django never computes a number: the task-kind adapter calls these functions.
"""
