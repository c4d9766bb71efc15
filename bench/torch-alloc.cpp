// torch-alloc: PyTorch's C++ caching allocator against memres's `cache>dmr` in one process, on
// the GPU machine. Built and run by bench/torch-bench.sh (against that machine's torch headers,
// libc10 and libc10_cuda, and memres's build tree); never part of the Meson build.
//
//   torch-alloc [--quick] [--spec SPEC] [--torch-version TEXT]
//
// (a) allocate+close pairs on one non-blocking stream at 256 B, 4 KiB, 64 KiB, 1 MiB, 16 MiB:
//     c10::cuda::CUDACachingAllocator::raw_alloc_with_stream + raw_delete against
//     memres_resource_allocate + memres_buffer_close + memres_buffer_unref on SPEC (default
//     cache>dmr:device=0); repetitions alternate (A B B A ...) and the ratio memres/torch is
//     taken per repetition (the median and quartiles of those ratios are reported).
// (b) the same pairs of 4 KiB on 1, 2, 4, 8, 16 threads at once, each on its own stream:
//     aggregate pairs per second of both.
// Prints one JSON document on stdout; progress on stderr.
#include <memres/memres-plugin.h> // the driver table (memres-cuda.h) too

#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace
{

using Clock = std::chrono::steady_clock;

const MemresCudaDriver *drv;
MemresResource *mr;

double
now_ns ()
{
  return std::chrono::duration<double, std::nano> (Clock::now ().time_since_epoch ()).count ();
}

void
die (const char *what, GError *error)
{
  std::fprintf (stderr, "torch-alloc: %s: %s\n", what, error ? error->message : "failed");
  std::exit (1);
}

void
check (CUresult r, const char *call)
{
  if (r != CUDA_SUCCESS)
    {
      std::fprintf (stderr, "torch-alloc: %s failed: %d\n", call, (int) r);
      std::exit (1);
    }
}

// N pairs of @size on @stream; the stream is synchronized at the end. Returns ns.
double
torch_pairs (size_t size, CUstream stream, unsigned long n)
{
  double t0 = now_ns ();

  for (unsigned long i = 0; i < n; i++)
    {
      void *p = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream (
          size, reinterpret_cast<cudaStream_t> (stream));
      c10::cuda::CUDACachingAllocator::raw_delete (p);
    }
  check (drv->cuStreamSynchronize (stream), "cuStreamSynchronize");
  return now_ns () - t0;
}

double
memres_pairs (size_t size, CUstream stream, unsigned long n)
{
  double t0 = now_ns ();

  for (unsigned long i = 0; i < n; i++)
    {
      GError *error = nullptr;
      MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

      if (buf == nullptr || !memres_buffer_close (buf, stream, &error))
        die ("memres pair", error);
      memres_buffer_unref (buf);
    }
  check (drv->cuStreamSynchronize (stream), "cuStreamSynchronize");
  return now_ns () - t0;
}

struct Summary
{
  double median, q1, q3;
};

Summary
summarize (std::vector<double> v)
{
  std::sort (v.begin (), v.end ());
  auto q = [&] (double f) {
    double pos = f * (v.size () - 1);
    size_t lo = (size_t) pos;
    return lo + 1 < v.size () ? v[lo] + (pos - lo) * (v[lo + 1] - v[lo]) : v.back ();
  };
  return { q (0.5), q (0.25), q (0.75) };
}

void
print_summary (const char *name, const Summary &s, const char *sep)
{
  std::printf ("\"%s\": {\"median\": %.4g, \"q1\": %.4g, \"q3\": %.4g}%s", name, s.median, s.q1,
               s.q3, sep);
}

// (a): paired repetitions of both loops at @size.
void
measure_pairs (size_t size, CUstream stream, unsigned reps, double target_ns, bool last)
{
  unsigned long n = 16;
  std::vector<double> torch_t, memres_t, ratios;

  torch_pairs (size, stream, 64); // warm-up: both caches hold a block of this size
  memres_pairs (size, stream, 64);
  while (n < (1ul << 30) && torch_pairs (size, stream, n) < target_ns)
    n *= 2;
  for (unsigned r = 0; r < reps; r++)
    {
      double t, m;

      if (r % 2 == 0)
        {
          t = torch_pairs (size, stream, n);
          m = memres_pairs (size, stream, n);
        }
      else
        {
          m = memres_pairs (size, stream, n);
          t = torch_pairs (size, stream, n);
        }
      torch_t.push_back (t / n);
      memres_t.push_back (m / n);
      ratios.push_back (m / t);
    }
  Summary ts = summarize (torch_t), ms = summarize (memres_t), rs = summarize (ratios);
  std::fprintf (stderr, "torch-alloc: pairs %zu B: torch %.1f ns, memres %.1f ns, ratio %.4f\n",
                size, ts.median, ms.median, rs.median);
  std::printf ("  {\"size\": %zu, \"iterations\": %lu, ", size, n);
  print_summary ("torch", ts, ", ");
  print_summary ("memres", ms, ", ");
  std::printf ("\"ratio\": %.5g, \"ratio_q1\": %.5g, \"ratio_q3\": %.5g}%s\n", rs.median, rs.q1,
               rs.q3, last ? "" : ",");
}

// (b): @threads threads, each N pairs on its own stream; returns aggregate pairs per second.
double
threads_round (bool use_torch, unsigned threads, const std::vector<CUstream> &streams,
               unsigned long n, CUcontext ctx)
{
  std::vector<std::thread> pool;
  std::atomic<unsigned> ready{ 0 };
  std::atomic<bool> go{ false };
  std::atomic<double> last{ 0 };
  double t0 = 0;

  for (unsigned t = 0; t < threads; t++)
    pool.emplace_back ([&, t] {
      check (drv->cuCtxSetCurrent (ctx), "cuCtxSetCurrent");
      // a thread's first pairs (its own caches) and its exit are not what is measured: a
      // warm-up before the start, and each thread's own end time
      if (use_torch)
        torch_pairs (4096, streams[t], 100);
      else
        memres_pairs (4096, streams[t], 100);
      ready++;
      while (!go.load ())
        ;
      if (use_torch)
        torch_pairs (4096, streams[t], n);
      else
        memres_pairs (4096, streams[t], n);
      double end = now_ns (), seen = last.load ();
      while (end > seen && !last.compare_exchange_weak (seen, end))
        ;
    });
  while (ready.load () < threads)
    ;
  t0 = now_ns ();
  go = true;
  for (auto &th : pool)
    th.join ();
  return threads * (double) n / ((last.load () - t0) * 1e-9);
}

} // namespace

int
main (int argc, char **argv)
{
  bool quick = false;
  std::string spec = "cache>dmr:device=0", torch_version = "unknown";
  GError *error = nullptr;
  CUstream stream;
  CUcontext ctx;

  for (int i = 1; i < argc; i++)
    {
      if (!std::strcmp (argv[i], "--quick"))
        quick = true;
      else if (!std::strcmp (argv[i], "--spec") && i + 1 < argc)
        spec = argv[++i];
      else if (!std::strcmp (argv[i], "--torch-version") && i + 1 < argc)
        torch_version = argv[++i];
      else
        {
          std::fprintf (stderr, "usage: torch-alloc [--quick] [--spec SPEC] [--torch-version V]\n");
          return 2;
        }
    }
  drv = memres_cuda_get_driver (&error);
  if (drv == nullptr)
    die ("driver", error);
  if (!memres_cuda_ensure_context (0, &error))
    die ("context", error);
  check (drv->cuCtxGetCurrent (&ctx), "cuCtxGetCurrent");
  mr = memres_resource_new (spec.c_str (), &error);
  if (mr == nullptr)
    die (spec.c_str (), error);
  c10::cuda::CUDACachingAllocator::init (1);
  check (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  const size_t sizes[] = { 256, 4096, 65536, 1 << 20, 16 << 20 };
  unsigned reps = quick ? 3 : 15;
  double target_ns = quick ? 2e6 : 20e6;
  char *resource = memres_resource_to_string (mr);

  std::printf ("{\"torch_version\": \"%s\", \"memres_spec\": \"%s\", \"repetitions\": %u, "
               "\"quick\": %s,\n\"pairs\": [\n",
               torch_version.c_str (), resource, reps, quick ? "true" : "false");
  g_free (resource);
  for (size_t i = 0; i < G_N_ELEMENTS (sizes); i++)
    measure_pairs (sizes[i], stream, reps, target_ns, i + 1 == G_N_ELEMENTS (sizes));
  std::printf ("],\n\"threads\": [\n");

  const unsigned counts[] = { 1, 2, 4, 8, 16 };
  std::vector<CUstream> streams (16);
  for (auto &s : streams)
    check (drv->cuStreamCreate (&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  unsigned long n = quick ? 2000 : 200000;
  for (size_t i = 0; i < G_N_ELEMENTS (counts); i++)
    {
      std::vector<double> t_rate, m_rate;

      for (unsigned r = 0; r < (quick ? 1u : 5u); r++)
        {
          t_rate.push_back (threads_round (true, counts[i], streams, n, ctx));
          m_rate.push_back (threads_round (false, counts[i], streams, n, ctx));
        }
      Summary ts = summarize (t_rate), ms = summarize (m_rate);
      std::fprintf (stderr, "torch-alloc: %u threads: torch %.3g, memres %.3g pairs/s\n", counts[i],
                    ts.median, ms.median);
      std::printf ("  {\"threads\": %u, \"pairs_per_thread\": %lu, ", counts[i], n);
      print_summary ("torch_pairs_per_s", ts, ", ");
      print_summary ("memres_pairs_per_s", ms, "}");
      std::printf ("%s\n", i + 1 == G_N_ELEMENTS (counts) ? "" : ",");
    }
  std::printf ("]}\n");
  for (auto &s : streams)
    drv->cuStreamDestroy (s);
  drv->cuStreamDestroy (stream);
  memres_resource_unref (mr);
  return 0;
}
