"""The server halves of the task kinds that have server features of their own (pages, jobs,
models, admin, commands), one Django app each, beside their maths in ``scoring/kinds/<kind>/``.

The generic apps (``tasks``, ``leaderboard``) never import them: a kind's app adds itself through
hooks (``tasks.hooks``: organiser links; views declare their own body limits) and the project
includes its URLs (``evalserver/urls.py``). A kind without server features has no app here.
"""
