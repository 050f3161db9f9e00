"""Imported only when a test names it in JOBQUEUE["DISCOVER_MODULES"]."""
