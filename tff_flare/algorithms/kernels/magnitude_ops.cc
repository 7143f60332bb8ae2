// Memory-speed kernels for FLARE's per-tensor selections (see ../selection.py).
//
// MagnitudeOrderStatistic(x, index): the index-th smallest |x| (0-based, duplicates counted),
//   NthElement's value, by a two-level radix select on the float bits of |x|: one counting pass
//   over the top 15 bits, one over the low 16 bits of the entries in the bucket found.
// MagnitudeMask(x, threshold): 1.0 where |x| > threshold, else 0.0.
// SplitByMagnitude(x, threshold): (x where |x| > threshold else 0, the rest, how many kept).
// MaskedSignPull(w, s, a, threshold, tau): tau * (1[|a| > threshold] * sign(w - (s + a))),
//   FLARE's pull gradient in one pass, with neither the mask nor the target s + a made.
//
// Each is exact: it returns the very values the TensorFlow ops of selection.py return.
// Work is split over TensorFlow's CPU thread pool.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tff_flare {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::errors::InvalidArgument;
using ::tensorflow::shape_inference::InferenceContext;

namespace {

constexpr int kHighBits = 15;  // |x| has 31 significant bits: 15 high, 16 low.
constexpr int kLowBits = 16;
constexpr int64_t kMinShard = 1 << 18;

inline uint32_t MagnitudeBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits & 0x7fffffffu;
}

inline float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Runs fn(shard, begin, end) over [0, n) in shards on TensorFlow's CPU threads.
template <typename Fn>
int64_t ForShards(OpKernelContext* context, int64_t n, Fn fn) {
  auto* pool = context->device()->tensorflow_cpu_worker_threads()->workers;
  const int64_t shards = std::max<int64_t>(
      1, std::min<int64_t>(pool->NumThreads(), n / kMinShard));
  const int64_t size = (n + shards - 1) / shards;
  pool->ParallelFor(shards, size * 4, [&](int64_t first, int64_t last) {
    for (int64_t shard = first; shard < last; ++shard) {
      fn(shard, shard * size, std::min(n, (shard + 1) * size));
    }
  });
  return shards;
}

// The bucket of histogram `counts` holding the entry of rank `rank`; `rank` becomes the rank
// within that bucket.
int64_t FindBucket(const std::vector<int64_t>& counts, int64_t* rank) {
  for (int64_t bucket = 0; bucket < static_cast<int64_t>(counts.size()); ++bucket) {
    if (*rank < counts[bucket]) return bucket;
    *rank -= counts[bucket];
  }
  return static_cast<int64_t>(counts.size()) - 1;
}

std::vector<int64_t> Histogram(OpKernelContext* context, const float* x, int64_t n,
                               int bits, uint32_t match, bool low_level) {
  const int64_t buckets = int64_t{1} << bits;
  std::vector<std::vector<int64_t>> partial(
      std::max<int64_t>(1, context->device()->tensorflow_cpu_worker_threads()
                               ->workers->NumThreads()));
  const int64_t shards = ForShards(context, n, [&](int64_t shard, int64_t begin,
                                                   int64_t end) {
    std::vector<int64_t>& counts = partial[shard];
    counts.assign(buckets, 0);
    if (low_level) {
      for (int64_t i = begin; i < end; ++i) {
        const uint32_t bits_i = MagnitudeBits(x[i]);
        if ((bits_i >> kLowBits) == match) ++counts[bits_i & 0xffffu];
      }
    } else {
      for (int64_t i = begin; i < end; ++i) ++counts[MagnitudeBits(x[i]) >> kLowBits];
    }
  });
  std::vector<int64_t> total(buckets, 0);
  for (int64_t shard = 0; shard < shards; ++shard) {
    for (int64_t b = 0; b < buckets; ++b) total[b] += partial[shard][b];
  }
  return total;
}

class MagnitudeOrderStatisticOp : public OpKernel {
 public:
  explicit MagnitudeOrderStatisticOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const int64_t n = input.NumElements();
    const int64_t index = context->input(1).scalar<int32_t>()();
    OP_REQUIRES(context, 0 <= index && index < n,
                InvalidArgument("index ", index, " is outside [0, ", n, ")."));
    const float* x = input.flat<float>().data();
    int64_t rank = index;
    const uint32_t high = static_cast<uint32_t>(
        FindBucket(Histogram(context, x, n, kHighBits, 0, false), &rank));
    const uint32_t low = static_cast<uint32_t>(
        FindBucket(Histogram(context, x, n, kLowBits, high, true), &rank));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &output));
    output->scalar<float>()() = FromBits((high << kLowBits) | low);
  }
};

class MagnitudeMaskOp : public OpKernel {
 public:
  explicit MagnitudeMaskOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const float threshold = context->input(1).scalar<float>()();
    Tensor* mask = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &mask));
    const float* x = input.flat<float>().data();
    float* m = mask->flat<float>().data();
    ForShards(context, input.NumElements(), [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) m[i] = std::fabs(x[i]) > threshold ? 1.0f : 0.0f;
    });
  }
};

class SplitByMagnitudeOp : public OpKernel {
 public:
  explicit SplitByMagnitudeOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const float threshold = context->input(1).scalar<float>()();
    Tensor* above = nullptr;
    Tensor* rest = nullptr;
    Tensor* count = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &above));
    OP_REQUIRES_OK(context, context->allocate_output(1, input.shape(), &rest));
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({}), &count));
    const float* x = input.flat<float>().data();
    float* kept = above->flat<float>().data();
    float* left = rest->flat<float>().data();
    std::vector<int64_t> counts(
        context->device()->tensorflow_cpu_worker_threads()->workers->NumThreads() + 1, 0);
    ForShards(context, input.NumElements(), [&](int64_t shard, int64_t begin, int64_t end) {
      int64_t local = 0;
      for (int64_t i = begin; i < end; ++i) {
        const bool keep = std::fabs(x[i]) > threshold;
        kept[i] = keep ? x[i] : 0.0f;
        left[i] = keep ? 0.0f : x[i];
        local += keep;
      }
      counts[shard] = local;
    });
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    count->scalar<int64_t>()() = total;
  }
};

class MaskedSignPullOp : public OpKernel {
 public:
  explicit MaskedSignPullOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& weights = context->input(0);
    const Tensor& server = context->input(1);
    const Tensor& accumulator = context->input(2);
    OP_REQUIRES(context,
                weights.shape() == server.shape() && weights.shape() == accumulator.shape(),
                InvalidArgument("w, s and a must have one shape."));
    const float threshold = context->input(3).scalar<float>()();
    const float tau = context->input(4).scalar<float>()();
    Tensor* pull = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, weights.shape(), &pull));
    const float* w = weights.flat<float>().data();
    const float* s = server.flat<float>().data();
    const float* a = accumulator.flat<float>().data();
    float* out = pull->flat<float>().data();
    ForShards(context, weights.NumElements(), [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        // The TensorFlow ops' values exactly: the mask as 0/1, sign as tf.sign (NaN stays
        // NaN, so 0 * NaN is NaN as there), the products in the same order.
        const float mask = std::fabs(a[i]) > threshold ? 1.0f : 0.0f;
        const float d = w[i] - (s[i] + a[i]);
        const float sign = std::isnan(d) ? d : static_cast<float>((d > 0.0f) - (d < 0.0f));
        out[i] = tau * (mask * sign);
      }
    });
  }
};

}  // namespace

REGISTER_OP("MagnitudeOrderStatistic")
    .Input("x: float")
    .Input("index: int32")
    .Output("value: float")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return ::tensorflow::OkStatus();
    });

REGISTER_OP("MagnitudeMask")
    .Input("x: float")
    .Input("threshold: float")
    .Output("mask: float")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      return ::tensorflow::OkStatus();
    });

REGISTER_OP("SplitByMagnitude")
    .Input("x: float")
    .Input("threshold: float")
    .Output("above: float")
    .Output("rest: float")
    .Output("count: int64")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      c->set_output(2, c->Scalar());
      return ::tensorflow::OkStatus();
    });

REGISTER_OP("MaskedSignPull")
    .Input("w: float")
    .Input("s: float")
    .Input("a: float")
    .Input("threshold: float")
    .Input("tau: float")
    .Output("pull: float")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      return ::tensorflow::OkStatus();
    });

REGISTER_KERNEL_BUILDER(Name("MagnitudeOrderStatistic").Device(DEVICE_CPU),
                        MagnitudeOrderStatisticOp);
REGISTER_KERNEL_BUILDER(Name("MagnitudeMask").Device(DEVICE_CPU), MagnitudeMaskOp);
REGISTER_KERNEL_BUILDER(Name("SplitByMagnitude").Device(DEVICE_CPU), SplitByMagnitudeOp);
REGISTER_KERNEL_BUILDER(Name("MaskedSignPull").Device(DEVICE_CPU), MaskedSignPullOp);

}  // namespace tff_flare
