"""The TensorBoard plugin (read side): no TensorFlow import anywhere below."""
