"""Preflight: the checks practitioners run by hand before a long training, in seconds.

`run.preflight` is the entry point (exported as `tb_trainhealth.preflight`). It works on a
clone of the model with a fresh copy of the optimizer, on one small batch: the initial loss
(`initial_loss`), overfitting the batch and the zeroed-input control (`small_batch`), a
gradient for every trainable variable (`gradients`), and the existing first-batch lint.
Each check returns plain measurements in one `PreflightEvent`; the read-side rules
(`tb_trainhealth/rules/preflight.py`) judge them, as they judge every other event.
"""
