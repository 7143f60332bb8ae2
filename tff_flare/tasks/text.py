"""Shakespeare next-character data for the GRU (`docs/faithfulness.md` R11).

Per client: the snippets are read as bytes, each byte mapped to its id in the 86-symbol
vocabulary (bytes outside it map to id 0), all snippets concatenated without a separator,
cut into chunks of 101 (the remainder dropped), shuffled with a buffer of 100 (reshuffled each
iteration: each epoch, and each evaluation of the test stream), batched by 8 (remainder
dropped), and split into `x` = the first 100 and `y` = the last 100 ids (int64 [8, 100]).
A training round's shuffle is seeded with `task.round_seed(seed, round)`: a new permutation every
round, the same one in every run.

The byte-to-id map is a 256-entry constant gathered by byte value, so the pipeline holds no
lookup-table resource and serializes into TFF computations as a plain dataset.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# Spec §5.3, in id order (id 0 is 'd'); 86 symbols with the newline and the carriage return.
VOCAB = ('dhlptx@DHLPTX $(,048cgkoswCGKOSW[_#\'/37;?bfjnrvzBFJNRVZ"&*.26:' + '\n' +
         'aeimquyAEIMQUY]!%)-159' + '\r')
SEQUENCE_LENGTH = 100
SHUFFLE_BUFFER = 100
BATCH_SIZE = 8
AUTHORS_EVALUATION_BATCHES = 2  # The authors' `evaluate(steps=2)`: 1,600 characters.


def _byte_to_id() -> np.ndarray:
  table = np.zeros(256, np.int64)
  for i, char in enumerate(VOCAB):
    table[ord(char)] = i
  return table


BYTE_TO_ID = _byte_to_id()


def to_ids(snippet: tf.Tensor) -> tf.Tensor:
  """int64 [len] ids of a scalar string's bytes."""
  byte_values = tf.cast(tf.io.decode_raw(snippet, tf.uint8), tf.int32)
  return tf.gather(tf.constant(BYTE_TO_ID), byte_values)


def character_batches(dataset: tf.data.Dataset,
                      seed: int | None = None,
                      batch_size: int = BATCH_SIZE,
                      reshuffle: bool = True) -> tf.data.Dataset:
  """A client's `snippets` dataset as batches of `OrderedDict(x=int64[8,100], y=...)`;
  `reshuffle`: a new order (and so another dropped remainder) at every pass, else the same."""
  ids = dataset.map(lambda e: to_ids(e['snippets'])).unbatch()
  chunks = ids.batch(SEQUENCE_LENGTH + 1, drop_remainder=True)
  chunks = chunks.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=reshuffle)
  return chunks.batch(
      batch_size,
      drop_remainder=True).map(lambda c: collections.OrderedDict(x=c[:, :-1], y=c[:, 1:]))


def count_batches(dataset: tf.data.Dataset) -> int:
  return int(dataset.reduce(np.int64(0), lambda n, _: n + 1))


def select_clients(train: tff.simulation.datasets.ClientData,
                   num_clients: int,
                   min_batches: int = 30) -> list[str]:
  """The first `num_clients` client ids, in sorted order, with more than `min_batches`."""
  chosen = []
  for cid in sorted(train.client_ids):
    if count_batches(character_batches(train.create_tf_dataset_for_client(cid))) > min_batches:
      chosen.append(cid)
      if len(chosen) == num_clients:
        break
  return chosen


def test_stream(test: tff.simulation.datasets.ClientData,
                max_batches_per_client: int = 200,
                seed: int | None = None,
                reshuffle: bool = True) -> tf.data.Dataset:
  """Every test client's batches (up to `max_batches_per_client`), in sorted client order;
  `reshuffle=False`: the same batches at every pass (`character_batches`)."""
  streams = [
      character_batches(test.create_tf_dataset_for_client(cid), seed,
                        reshuffle=reshuffle).take(max_batches_per_client)
      for cid in sorted(test.client_ids)
  ]
  stream = streams[0]
  for s in streams[1:]:
    stream = stream.concatenate(s)
  return stream
