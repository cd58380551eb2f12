"""Write side: everything here imports TensorFlow."""
