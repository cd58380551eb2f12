"""Loading a logdir into `RunSignals`, without TensorFlow: finding runs and event files
(`logdir`, `event_files`), reading them (`reader`), and loading many runs at a time through
TensorBoard's data server (`load_batches`, `data_server`). Used by the CLI; the plugin reads
through TensorBoard's own data provider instead.
"""
