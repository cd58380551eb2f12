"""Where the first NaN/Inf came from.

`nan_replay` fires once per cause from inside the step (one conditional before the
update); `nan_origin` replays the offending batch layer by layer on the host. May import:
`callback.frameworks`, `callback.probe_variable`.
"""
