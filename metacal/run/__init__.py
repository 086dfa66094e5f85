"""A run directory's files, as the trainer writes them and everything after it reads them: the layout and the typed
reader (``layout``), what the run trained (``method``), ``predictor.json`` (``predictor_info``), the fitted post-hoc
calibrators under ``calibration/`` (``calibration``) and the config keys that moved since older runs were saved
(``renamed_keys``). Nothing here imports the trainer, which writes through these modules."""
