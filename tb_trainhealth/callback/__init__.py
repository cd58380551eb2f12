"""Write side: the only code that imports TensorFlow or Keras (the read side never does)."""
