"""Checks of the set-up rather than of the step: the model (`model_lint`, `weight_init`),
the tf.data pipeline (`pipeline_lint`), the first batches' labels and input scale
(`data_lint`) and dead or saturated units (`activation_probe`), run by `fit_checks` once per
fit or at sampled epoch ends. They return plain events; the rules judge them. May import:
`callback.frameworks`, `callback.record`, `callback.step` (the batches the input probe
holds), the shared modules of `callback`, `contract`.
"""
