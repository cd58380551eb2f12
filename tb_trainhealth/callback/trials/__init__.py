"""Trials: before a failing fit's plan is told, its candidate changes are tried on a clone of the
model, from the run's starting weights, on a sample of its own data (`runner.py`); what they
measured is recorded (`contract.trial_events.TrialsEvent`) and orders the plan (advice/plan.py).

- `sample.py`: the rows the trials train and judge on, from a new pass over the fit's data;
- `candidates.py`: which changes can be tried mechanically on this model and data;
- `task_error.py`: one yardstick for every trial, whatever it changed (the loss included);
- `runner.py`: training each candidate within the time budget, and the verdicts.
"""
