"""What a run writes and reports: its directory's files (config, metrics.csv, plots, summary),
metric trackers, the run's warnings, and the statistics a result file states.
Layer: infrastructure (beside store, envs, media, runstate)."""
