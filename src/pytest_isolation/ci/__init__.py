"""CI features: quarantine (:mod:`.quarantine`), sharding (:mod:`.sharding`,
the split itself in :mod:`.split`), the run report (:mod:`.runreport`) and
merging shards' reports (:mod:`.merge`).  Retries are file mode's
(:mod:`pytest_isolation.filemode.parent.retry`)."""
