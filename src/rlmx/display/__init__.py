"""What a person watching a run sees: `progress.py`, the CLI's live displays built from the run's events."""
