"""What is written, and when the step probe's rows come back to the host.

`recording` sends every record to the event file (`health_writer`, with rows serialized by
`summary_bytes`; a bucket through a local folder `bucket_mirror` uploads) and to the in-memory copy the online engine diagnoses; `read_back` decides
when rows are copied back from the device and `row_recorder` turns them into records. May
import: `callback.step`, `contract`, `signals`, `storage`.
"""
