"""Centralized evaluation of a global model on a test set (`docs/faithfulness.md` R10).

The model is a fresh model of the task's architecture with the given weights, run with
`training=False` (dropout off) over every batch of the test set; the result is the model's
own metrics (TFF's `report_local_unfinalized_metrics` and `metric_finalizers`): the
example-weighted mean loss and the accuracy. This is the arithmetic of TFF's
`tff.learning.algorithms.build_fed_eval` with the test set as one client (a test compares
the two), run in this process in every execution mode: evaluation is not part of the
federated algorithm, and so no test set is serialized into TFF's runtime.
A stateful model (the GRU) starts every evaluation from a zero state and carries it from
batch to batch, as the authors' Keras `evaluate` does. The test set is read into tensors at
every evaluation (a shuffling test stream, the GRU's, reshuffles as before) and the batches
run in a `tf.while_loop` (`algorithms.batches`).
"""

import collections
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import batches
from tff_flare.algorithms import model_facts
from tff_flare.execution import inprocess

# The model's accuracy metric, by the names Keras gives it, reported as `accuracy`.
_ACCURACIES = ('sparse_categorical_accuracy', 'accuracy', 'categorical_accuracy', 'binary_accuracy')


def build_evaluate_fn(
    model_fn: model_facts.ModelFn,
    test_dataset: tf.data.Dataset) -> Callable[[tff.learning.models.ModelWeights], dict]:
  """Returns `evaluate(model_weights) -> {'loss': float, 'accuracy': float, 'num_examples':
  int, <the model's other scalar metrics>}` (`accuracy`: the model's accuracy metric, where it
  has one).

  Args:
    model_fn: the task's `model_fn` (its loss and a `sparse_categorical_accuracy` metric).
    test_dataset: batches in the model's input format.
  """
  built: dict[str, Any] = {}

  def build():
    # Built at the first evaluation: a Keras model built in eager mode is invalidated by any
    # model later built inside a `tf.Graph` (as TFF builds its computations).
    resettable = inprocess.ResettableModel(model_fn)
    model = resettable.model
    weights = tff.learning.models.ModelWeights.from_model(model)

    @tf.function
    def unfinalized_metrics(model_weights):
      resettable.reset()
      tf.nest.map_structure(lambda v, t: v.assign(t), weights, model_weights)
      # Read into tensors, then a while loop over the batches: no step inside tf.data.
      test_batches = batches.as_batches(test_dataset)

      def evaluate_batch(index):
        model.forward_pass(batches.batch_at(test_batches, index), training=False)
        return index + 1

      tf.while_loop(lambda index: index < test_batches.num_steps,
                    evaluate_batch, (tf.constant(0, tf.int32),),
                    parallel_iterations=1)
      return model.report_local_unfinalized_metrics()

    built.update(model=model, unfinalized_metrics=unfinalized_metrics)

  def evaluate(model_weights) -> dict:
    if not built:
      build()
    model_weights = tff.learning.models.ModelWeights(trainable=list(model_weights.trainable),
                                                     non_trainable=list(
                                                         model_weights.non_trainable))
    values = built['unfinalized_metrics'](tf.nest.map_structure(tf.convert_to_tensor,
                                                                model_weights))
    # TFF's finalizers are `tf.function`s that build a Keras metric; run their Python bodies.
    metrics = collections.OrderedDict(
        (name, getattr(finalize, 'python_function', finalize)(values[name]))
        for name, finalize in built['model'].metric_finalizers().items())
    result = {'loss': float(metrics['loss'])}
    accuracy = next((name for name in _ACCURACIES if name in metrics), None)
    if accuracy is not None:
      result['accuracy'] = float(metrics[accuracy])
    result['num_examples'] = int(metrics['num_examples'])
    for name, value in metrics.items():  # A model's other metrics, under their own names.
      if name not in result and name != accuracy and np.size(value) == 1:
        result[name] = float(np.asarray(value).reshape(()))
    return result

  return evaluate
