"""Centralized evaluation of a global model on a test set (spec §5.4).

Uses TFF's own evaluation process (`tff.learning.algorithms.build_fed_eval`) with the whole
test set as one client: a fresh model of the same architecture, `training=False` (dropout
off), the example-weighted mean loss and accuracy. Building the model inside TFF also avoids
mixing eagerly built Keras models with the graph-built ones of the training processes.
"""

from collections.abc import Callable

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import stateful_process


def build_evaluate_fn(model_fn: stateful_process.ModelFn, test_dataset: tf.data.Dataset
                      ) -> Callable[[tff.learning.models.ModelWeights], dict]:
  """Returns `evaluate(model_weights) -> {'loss': float, 'accuracy': float, 'num_examples'}`.

  Args:
    model_fn: the task's `model_fn` (its loss and a `sparse_categorical_accuracy` metric).
    test_dataset: batches in the model's input format.
  """
  process = tff.learning.algorithms.build_fed_eval(model_fn)
  initial_state = process.initialize()

  def evaluate(model_weights) -> dict:
    state = process.set_model_weights(initial_state, model_weights)
    output = process.next(state, [test_dataset])
    metrics = output.metrics['client_work']['eval']['current_round_metrics']
    return {'loss': float(metrics['loss']),
            'accuracy': float(metrics['sparse_categorical_accuracy']),
            'num_examples': int(metrics['num_examples'])}

  return evaluate
