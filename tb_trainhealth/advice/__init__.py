"""What the user should do about a run: one plan (`plan.py`), ordered by what trials measured."""
