// The CUDA driver layer: the no-driver / no-device path (runs anywhere), and on a GPU: device
// queries, copies, the caching allocator, kernel launches, events, CUDA graphs, DeviceTensor,
// and a kernel's illegal address reported as a kiln::Error.
#if KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "ir/error.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda/stream.h"
#include "tests/runtime/cuda_test_env.h"

namespace kiln::runtime::cuda::testing {
namespace {

const char* kKernels =
    "extern \"C\" __global__ void add_one(float* x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] += 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void oob_write(float* x) {\n"
    "  x[(1L << 40) + threadIdx.x] = 1.0f;  // far outside any allocation\n"
    "}\n"
    "extern \"C\" __global__ void fill_shared(float* x, int n) {\n"
    "  extern __shared__ float s[];\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)i;\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = s[n - 1 - i];\n"
    "}\n";

Module load_kernels() {
  NvrtcOptions options;
  options.arch = arch_name(device_info(0));
  return Module(compile_cuda(kKernels, "driver_test_kernels", options).cubin, "driver_test_kernels");
}

TEST(CudaDriver, AvailabilityHasAReason) {
  std::string why;
  if (driver_available(&why)) {
    EXPECT_GT(device_count(), 0);
    return;
  }
  // No GPU here: the reason names the missing driver or device, and nothing crashes.
  EXPECT_TRUE(why.find("no CUDA device") != std::string::npos || why.find("no CUDA driver") != std::string::npos) << why;
  EXPECT_EQ(device_count(), 0);
  try {
    device_info(0);
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
  EXPECT_THROW(Stream stream, kiln::Error);
  EXPECT_THROW(device_alloc(1024), kiln::Error);
  EXPECT_THROW(device_alloc(1024), kiln::Error);  // the same answer every time
  EXPECT_NO_THROW(device_alloc(0));               // nothing to allocate
}

TEST(CudaDriver, ErrorStringsNameTheError) {
  std::string s = error_string(CUDA_ERROR_OUT_OF_MEMORY);
  // Named by the driver when it is loaded, by number otherwise.
  EXPECT_TRUE(s.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos || s.find("2") != std::string::npos) << s;
  try {
    check(CUDA_ERROR_INVALID_VALUE, "cuSomething(42)");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuSomething(42): "), std::string::npos);
  }
}

using CudaGpu = GpuTest;

TEST_F(CudaGpu, DeviceInfo) {
  const DeviceInfo& info = device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.sm_major, 7);
  EXPECT_EQ(info.warp_size, 32);
  EXPECT_GT(info.num_sms, 0);
  EXPECT_GE(info.max_threads_per_block, 1024);
  EXPECT_GT(info.total_memory, int64_t{1} << 30);
  EXPECT_GE(info.shared_memory_per_block_optin, info.shared_memory_per_block);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.driver_version, 11000);
  EXPECT_EQ(arch_name(info), "sm_" + std::to_string(info.sm_major) + std::to_string(info.sm_minor));
  EXPECT_THROW(device_info(device_count()), kiln::Error);
  std::printf("device: %s, %s, %d SMs, %.1f GiB, driver %s\n", info.name.c_str(), arch_name(info).c_str(),
              info.num_sms, info.total_memory / 1073741824.0, driver_version_string().c_str());
}

TEST_F(CudaGpu, CopyRoundTrip) {
  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), 0.5f);
  DeviceBuffer a = device_alloc(host.size() * sizeof(float));
  DeviceBuffer b = device_alloc(host.size() * sizeof(float));
  copy_host_to_device(a->data(), host.data(), a->size());
  copy_device_to_device(b->data(), a->data(), a->size());
  std::vector<float> back(host.size());
  copy_device_to_host(back.data(), b->data(), b->size());
  EXPECT_EQ(back, host);

  Stream stream;
  memset_async(b->data(), 0, b->size(), stream);
  copy_host_to_device_async(a->data(), back.data(), 16, stream);
  copy_device_to_device_async(b->data(), a->data(), 16, stream);
  std::vector<float> again(host.size(), -1.0f);
  copy_device_to_host_async(again.data(), b->data(), b->size(), stream);
  stream.synchronize();
  EXPECT_EQ(again[0], 0.5f);
  EXPECT_EQ(again[3], 3.5f);
  EXPECT_EQ(again[4], 0.0f);
  EXPECT_EQ(again[999], 0.0f);
}

TEST_F(CudaGpu, AllocatorReusesFreedBlocks) {
  empty_cache();
  MemoryStats s0 = memory_stats();
  void* first = nullptr;
  {
    DeviceBuffer a = device_alloc(1000);
    first = a->data();
    MemoryStats s1 = memory_stats();
    EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes + 1024) << "rounded to 512 bytes";
    EXPECT_EQ(s1.reserved_bytes, s0.reserved_bytes + (2 << 20)) << "one small segment";
    EXPECT_EQ(s1.num_device_mallocs, s0.num_device_mallocs + 1);
    EXPECT_EQ(s1.num_allocs, s0.num_allocs + 1);
  }
  MemoryStats s2 = memory_stats();
  EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
  EXPECT_EQ(s2.reserved_bytes, s0.reserved_bytes + (2 << 20)) << "kept in the cache";
  EXPECT_EQ(s2.num_frees, s0.num_frees + 1);
  {
    DeviceBuffer again = device_alloc(1000);
    EXPECT_EQ(again->data(), first) << "the freed block (merged back into its segment) is reused";
    DeviceBuffer other = device_alloc(700);  // from the same segment
    EXPECT_EQ(static_cast<char*>(other->data()), static_cast<char*>(first) + 1024);
    MemoryStats s3 = memory_stats();
    EXPECT_EQ(s3.num_device_mallocs, s0.num_device_mallocs + 1) << "no new cuMemAlloc";
    EXPECT_EQ(s3.num_cache_hits, s0.num_cache_hits + 2);
    EXPECT_EQ(s3.allocated_bytes, s0.allocated_bytes + 1024 + 1024);
  }

  // Large blocks: a segment of their own, rounded to 2 MB; a tail of 1 MB or less is not split
  // off (the whole 4 MB block is handed out and counted); peaks follow.
  reset_peak_stats();
  MemoryStats s4 = memory_stats();
  {
    DeviceBuffer big = device_alloc(3 << 20);
    MemoryStats s5 = memory_stats();
    EXPECT_EQ(s5.reserved_bytes, s4.reserved_bytes + (4 << 20));
    EXPECT_EQ(s5.allocated_bytes, s4.allocated_bytes + (4 << 20));
    EXPECT_EQ(s5.peak_allocated_bytes, s5.allocated_bytes);
  }
  {
    DeviceBuffer big_again = device_alloc((3 << 20) - 100);
    EXPECT_EQ(memory_stats().num_device_mallocs, s4.num_device_mallocs + 1);
  }
  MemoryStats s6 = memory_stats();
  EXPECT_EQ(s6.peak_allocated_bytes, s4.allocated_bytes + (4 << 20));
  EXPECT_EQ(s6.peak_reserved_bytes, s4.reserved_bytes + (4 << 20));
  empty_cache();
  EXPECT_EQ(memory_stats().reserved_bytes, s0.reserved_bytes) << "free segments returned to the driver";
  EXPECT_NE(memory_summary().find("cuda:0: allocated"), std::string::npos);
}

TEST_F(CudaGpu, OutOfMemoryIsAnError) {
  try {
    device_alloc(size_t{1} << 50);
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
}

TEST_F(CudaGpu, LaunchACompiledKernel) {
  Module module = load_kernels();
  CUfunction add_one = module.function("add_one");
  EXPECT_EQ(module.function("add_one"), add_one);
  try {
    module.function("missing_kernel");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel 'missing_kernel' in CUDA module 'driver_test_kernels'"),
              std::string::npos)
        << e.what();
  }
  int n = 1000;
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 0.0f);
  DeviceBuffer x = device_alloc(n * sizeof(float));
  copy_host_to_device(x->data(), host.data(), x->size());
  Stream stream;
  void* ptr = x->data();
  void* args[] = {&ptr, &n};
  Event start, stop;
  start.record(stream);
  launch(add_one, {static_cast<unsigned>((n + 255) / 256)}, {256}, 0, stream, args, "add_one");
  stop.record(stream);
  synchronize_and_check(stream, "add_one");
  EXPECT_GE(elapsed_ms(start, stop), 0.0f);
  std::vector<float> back(n);
  copy_device_to_host(back.data(), x->data(), x->size());
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], i + 1.0f) << i;

  // Too many threads per block: refused at launch, with the launch's shape in the message.
  try {
    launch(add_one, {1}, {4096}, 0, stream, args, "add_one");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("launching add_one (grid 1x1x1, block 4096x1x1"), std::string::npos) << e.what();
  }
}

TEST_F(CudaGpu, DynamicSharedMemoryAbove48KB) {
  const DeviceInfo& info = device_info(0);
  if (info.shared_memory_per_block_optin <= 48 * 1024) GTEST_SKIP() << "no opt-in shared memory on this device";
  Module module = load_kernels();
  int n = 20000;  // 80 KB of floats
  DeviceBuffer x = device_alloc(n * sizeof(float));
  Stream stream;
  void* ptr = x->data();
  void* args[] = {&ptr, &n};
  launch(module.function("fill_shared"), {1}, {256}, n * sizeof(float), stream, args, "fill_shared");
  synchronize_and_check(stream, "fill_shared");
  std::vector<float> back(n);
  copy_device_to_host(back.data(), x->data(), x->size());
  EXPECT_EQ(back[0], n - 1.0f);
  EXPECT_EQ(back[n - 1], 0.0f);
}

TEST_F(CudaGpu, GraphCaptureAndReplay) {
  Module module = load_kernels();
  CUfunction add_one = module.function("add_one");
  int n = 4096;
  DeviceBuffer x = device_alloc(n * sizeof(float));
  Stream stream;
  memset_async(x->data(), 0, x->size(), stream);
  stream.synchronize();
  void* ptr = x->data();
  void* args[] = {&ptr, &n};
  GraphCapture graph(stream);
  launch(add_one, {static_cast<unsigned>(n / 256)}, {256}, 0, stream, args, "add_one");
  launch(add_one, {static_cast<unsigned>(n / 256)}, {256}, 0, stream, args, "add_one");
  graph.end();
  EXPECT_EQ(graph.num_nodes(), 2u);
  std::vector<float> back(n, -1.0f);
  copy_device_to_host(back.data(), x->data(), x->size());
  EXPECT_EQ(back[0], 0.0f) << "capturing runs nothing";
  graph.replay(stream);
  graph.replay(stream);
  synchronize_and_check(stream, "graph replay");
  copy_device_to_host(back.data(), x->data(), x->size());
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], 4.0f) << i;
}

TEST_F(CudaGpu, DeviceTensorRoundTrip) {
  HostTensor host = random_tensor(TensorMeta(DType::F32, {3, 5}), 7);
  DeviceTensor dev = DeviceTensor::from_host(host);
  EXPECT_EQ(dev.meta().str(), "f32[3,5]@cuda:0");
  EXPECT_TRUE(dev.is_contiguous());
  EXPECT_EQ(dev.numel(), 15);
  EXPECT_EQ(dev.to_host().to_doubles(), host.to_doubles());

  // A transposed view of the same storage: copied as its extent, laid out on the host.
  DeviceTensor transposed(dev.storage(), TensorMeta(DType::F32, {5, 3}, {1, 5}, Device::cuda(0)));
  HostTensor expected = host.view(TensorMeta(DType::F32, {5, 3}, {1, 5}), 0).contiguous();
  EXPECT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(transposed.to_host().to_doubles(), expected.to_doubles());
  // A view at an offset: row 1, columns 2..4.
  DeviceTensor part(dev.storage(), TensorMeta(DType::F32, {3}, {1}, Device::cuda(0)), (5 + 2) * 4);
  EXPECT_EQ(part.to_host().to_doubles(), (std::vector<double>{host.get(7), host.get(8), host.get(9)}));

  DeviceTensor empty = DeviceTensor::empty(TensorMeta(DType::F16, {0, 4}, Device::cuda(0)));
  EXPECT_EQ(empty.to_host().numel(), 0);
  EXPECT_THROW(DeviceTensor::empty(TensorMeta(DType::F32, {2})), kiln::Error) << "a CPU meta";
}

// An illegal address poisons the device's context for the rest of the process, so this runs in a
// child process of its own (a death test, "threadsafe" style: the child re-executes this test
// alone, with a fresh CUDA context) and exits 0 after printing the error it caught.
TEST_F(CudaGpu, IllegalAddressIsReportedNamingTheKernel) {
#ifdef GTEST_FLAG_SET
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#else
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
#endif
  EXPECT_EXIT(
      {
        try {
          Module module = load_kernels();
          DeviceBuffer x = device_alloc(1024);
          Stream stream;
          void* ptr = x->data();
          void* args[] = {&ptr};
          launch(module.function("oob_write"), {1}, {32}, 0, stream, args, "oob_write");
          synchronize_and_check(stream, "kernel oob_write");
          std::fprintf(stderr, "no error reported\n");
          std::exit(1);
        } catch (const kiln::Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(0);
        }
      },
      ::testing::ExitedWithCode(0), "kernel oob_write failed on cuda:0: CUDA_ERROR_ILLEGAL_ADDRESS");
}

}  // namespace
}  // namespace kiln::runtime::cuda::testing
#endif
