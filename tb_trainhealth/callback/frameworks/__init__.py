"""What depends on which TensorFlow and Keras are installed: Keras 3 or tf_keras
(`which_keras`), and every use of a private attribute of either, one module per library
(`keras_private` for Keras 3 and tf_keras, `tf_private` for TensorFlow), so that a release
that moves one breaks one module, visibly (`tests/test_framework_adapters.py`). Imports
nothing of the project.
"""
