"""What depends on which TensorFlow and Keras are installed: Keras 3 or tf_keras
(`which_keras`), and every use of a private attribute of either, so that a release that
moves one breaks one module, visibly. Imports nothing of the project.
"""
