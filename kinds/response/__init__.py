"""The response kind on the server: vBLEU's dialogue pools and pool jobs (models, pages, admin,
Celery tasks, the ``build_vbleu`` and ``load_vectors`` commands) and the word-vector tables
organisers upload. Its maths is ``scoring.kinds.response``."""
