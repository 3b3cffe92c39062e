"""Keras (TensorFlow) source models with seeded weights and `weights=None` (no download).

The TensorFlow lineage of the catalogue: `resnet50-tf` and `tiny-cnn-tf` start here, so SavedModel is a real
source format. Keras is channels-last (NHWC), so these specs' image inputs are [-1, H, W, C].
"""

from __future__ import annotations


def build_resnet50(seed: int, classes: int = 1000, size: int = 224):
    """keras.applications.ResNet50 with random seeded weights, returning logits."""
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((size, size, 3), name="input")
    net = keras.applications.ResNet50(weights=None, include_top=True, input_tensor=inputs, classes=classes,
                                      classifier_activation=None)
    return keras.Model(inputs, net.output, name="resnet50")


def build_tiny_cnn(seed: int, channels: int = 3, size: int = 32, width: int = 8, classes: int = 10):
    """The Keras twin of the torch tiny-cnn: two conv blocks with batch norm, pooling and a linear head."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((size, size, channels), name="input")
    x = layers.Conv2D(width, 3, padding="same", use_bias=False)(inputs)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    x = layers.Conv2D(2 * width, 3, strides=2, padding="same", use_bias=False)(x)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(classes, name="logits")(x)
    return keras.Model(inputs, outputs, name="tiny_cnn")
