"""A run's story, as both surfaces tell it: `diagnose` (text and --json) and the Health tab's routes
render one `RunReport` per run (`run_report.py`): its status, its findings in the order shown (the
lead first), whether nothing of it could be read and why, the chart of its worst problem
(`lead_chart.py`) and its timeline (`timeline.py`). Read side: no TensorFlow, and it imports
neither `cli` nor `plugin` (they import it).
"""
