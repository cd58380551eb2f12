"""The in-step probe: values computed inside the real, compiled training step.

Owns the optimizer hooks that compute gradient norms per layer (`step_probe`, and
`tf_keras_step_probe` for legacy Keras; the ops they add to the step in `gradient_row`), the
ring buffer the step writes its rows into (`row_buffer`, `row_layout`), weight and update
norms between steps (`weight_norms`),
the input wait (`input_probe`, `concrete_call`), step time and memory (`step_clock`,
`memory`), and building a model's variables before its step is traced
(`build_before_trace`). May import: `callback.frameworks`, `callback.nan`,
`callback.probe_variable`, `contract`. Nothing here writes an event file.
"""
