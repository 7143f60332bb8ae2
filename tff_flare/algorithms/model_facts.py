"""What a process needs to know about its model, read once from one model.

A builder needs the trainable weights' shapes and names (to validate R against each tensor,
to pick the regularized ones), the composer their TFF types and the model's input spec, and
the round's metrics a model's metric finalizers. Building a Keras model takes long (seconds
for the FC or VGG), so `model_facts(model_fn)` builds one model in a `tf.Graph`, reads every
fact from it and keeps them (one per `model_fn`; a model function is a pure constructor).
"""

import functools
from collections.abc import Callable

import attrs
import tensorflow as tf
import tensorflow_federated as tff

ModelFn = Callable[[], tff.learning.models.VariableModel]


@attrs.frozen
class ModelFacts:
  """The facts of a model function (see the module docstring).

  Attributes:
    specs: the trainable weights' `tf.TensorSpec`s, in order.
    names: their variable names (e.g. 'dense/kernel:0').
    num_parameters: the total number of trainable entries.
    input_spec: the model's `input_spec` (one batch).
    weights_type: the TFF type of its `ModelWeights`.
    metrics_model: the model the facts were read from (built in a graph), whose metric
      finalizers the round's metrics use.
  """

  specs: tuple[tf.TensorSpec, ...]
  names: tuple[str, ...]
  num_parameters: int
  input_spec: object
  weights_type: object
  metrics_model: tff.learning.models.VariableModel


def check_model_fn(model_fn) -> None:
  """Raises `TypeError` in one line unless `model_fn` is a no-argument callable (not a
  `FunctionalModel`, a Keras model or a model object itself)."""
  if isinstance(model_fn, tff.learning.models.FunctionalModel):
    raise TypeError('This project\'s processes train a tff.learning.models.VariableModel: give '
                    'a model_fn that returns one (tff.learning.models.from_keras_model(...)); a '
                    'FunctionalModel is not supported (its local training is the Keras '
                    "model's own).")
  if isinstance(model_fn,
                (tf.keras.Model, tff.learning.models.VariableModel)) or not callable(model_fn):
    raise TypeError(f'model_fn must be a no-argument function returning a new '
                    f'tff.learning.models.VariableModel, got {type(model_fn).__name__}.')


def _built(model_fn):
  model = model_fn()
  if isinstance(model, tf.keras.Model):
    raise TypeError('model_fn returned a Keras model: wrap it, as TFF\'s builders expect: '
                    'tff.learning.models.from_keras_model(keras_model, loss=..., '
                    'input_spec=..., metrics=[...]).')
  if not isinstance(model, tff.learning.models.VariableModel):
    raise TypeError(f'model_fn must return a tff.learning.models.VariableModel, got '
                    f'{type(model).__name__}.')
  return model


@functools.lru_cache(maxsize=32)
def model_facts(model_fn: ModelFn) -> ModelFacts:
  """The facts of `model_fn`'s model, read from one model built in a `tf.Graph`.

  Raises:
    TypeError: `model_fn` is not a function returning a `tff.learning` `VariableModel`
      (`check_model_fn`), in one line.
  """
  check_model_fn(model_fn)
  with tf.Graph().as_default():
    model = _built(model_fn)
    variables = model.trainable_variables
    specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in variables)
    return ModelFacts(specs=specs,
                      names=tuple(v.name for v in variables),
                      num_parameters=sum(int(s.shape.num_elements()) for s in specs),
                      input_spec=model.input_spec,
                      weights_type=tff.learning.models.weights_type_from_model(model),
                      metrics_model=model)


def tensor_flags(model_fn: ModelFn, predicate: Callable[[str], bool] | None) -> list[bool]:
  """One bool per trainable tensor of `model_fn`'s model: `predicate(variable name)` (which
  tensors a penalty or a mask applies to); every tensor when `predicate` is None."""
  names = model_facts(model_fn).names
  if predicate is None:
    return [True] * len(names)
  return [bool(predicate(name)) for name in names]
