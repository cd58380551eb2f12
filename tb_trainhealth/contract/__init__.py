"""The contract between the write side (callback) and the read side (rules, CLI, tab).

Like the `metadata.py` of TensorBoard's own plugins, one place says what is written
and how it is read back: `tags` (plugin names, tags, schema version), `series` (which
tag becomes which series the rules read), `events` and `run_info` (typed payloads of
the discrete records), `vocab` (check and loss names), `stall` and `preflight` (the thresholds
both the measuring and the judging use). Read-side safe: no TensorFlow.
"""
