"""What the tests and the benchmarks share, as an installed package of the project (pyproject.toml
lists it; ``pip install -e .`` maps it to the checkout): real server processes and big synthetic
data (``devtools.workers``), realistic helpdesk dialogues in English and Chinese
(``devtools.dialogues``, ``devtools.chinese``), the hostile-upload corpus (``devtools.hostile_corpus``),
small encoder model files (``devtools.e5files``) and the independent reference implementations the
tests and speed benchmarks compare with (``devtools.reference``). Not named ``tests``: a dependency
installs a top-level package of that name, so benchmarks could not import the project's tests as
a package; nothing here imports pytest or ``tests``."""
