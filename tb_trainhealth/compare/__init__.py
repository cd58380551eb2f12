"""Comparing a run with a known-good one: which settings changed, where the curves parted, whether
the run is worse than run-to-run noise allows, and which change most likely did it.

Read side only (numpy, no TensorFlow): `settings_diff` (what changed), `curves` (the metrics
judged and the parting step), `noise` (the verdict), `culprit` (the ranking and its reasons),
`comparison` (all of it, as the JSON contract of `tb-trainhealth compare`).
"""
