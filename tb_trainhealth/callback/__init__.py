"""Write side: the only code that imports TensorFlow or Keras (the read side never does).

`health_callback.py` wires Keras' hooks to a `FitSession` (`fit_session.py`: one fit's
probes and their state, made at train begin and dropped at its end) and the `RunRecord`
(`run_record.py`: the event file, step count, watchdog and diagnoses, across fits), which use
the parts below; `training.py` is `tb_trainhealth.fit` (OOM retries). Each sub-package owns one job:

- `step/`: values computed inside the compiled train step (gradient, weight and update
  norms, loss, input wait), its ring buffer and row layout, and step time and memory.
- `nan/`: where the first NaN/Inf came from: the in-step trigger and the layer-by-layer replay.
- `record/`: what is written (event file and the online engine's copy) and when rows are
  read back from the device.
- `lint/`: checks of the model, the tf.data pipeline, the first batches and the units'
  activations, once per fit or at sampled epoch ends.
- `watch/`: the stall watchdog (a step that never ends) and crash capture (the exception
  that ends training).
- `preflight/`: `tb_trainhealth.preflight`, the checks run on a clone before training.
- `frameworks/`: which Keras a model belongs to, and every use of a private TensorFlow or
  Keras attribute, one module per library.

The modules at this level are shared by several parts: `probe_guard` (an internal error
turns one part off), `probe_variable`, `time_budget`, `fit_context` (what the user's `fit`
does), `multi_worker` and `live_diagnosis` (the rules, run while training). `run_settings`
records once per fit what a comparison with another run needs (with `layer_settings`,
`data_settings`, `setting_values`).
"""
