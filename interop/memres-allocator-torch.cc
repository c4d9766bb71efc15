/* memres - CUDA memory resources
 * memres-allocator-torch.cc: memres_torch_alloc() where a C++ compiler is found. torch calls
 * its pluggable allocator's alloc from C++ and does not check the pointer it gets back, but it
 * turns a C++ exception into a Python RuntimeError: a failure is thrown here, in C++, with the
 * GError's message (no exception crosses a C frame). */
#include "memres-allocator-private.h"

#include <stdexcept>

namespace
{
/* What memres_torch_alloc() throws: the message of the GError behind the failure. */
class AllocationError : public std::runtime_error
{
public:
  explicit AllocationError (const GError *error) : std::runtime_error (error->message)
  {
  }
};
} // namespace

/**
 * memres_torch_alloc:
 * @size: bytes (0 gives %NULL); torch passes a `size_t`, which this `ssize_t` (the type of
 *   torch's documented example) carries in the same register: a value below 0 is read back as
 *   that `size_t` (-5: 2^64 - 5 bytes), more than any memory
 * @device: the CUDA device ordinal
 * @stream: the `cudaStream_t`/`CUstream` the allocation is ordered on (%NULL: the legacy
 *   default stream)
 *
 * The allocation function of `torch.cuda.memory.CUDAPluggableAllocator`
 * (`void *alloc (ssize_t size, int device, cudaStream_t stream)`). Allocates from the device's
 * resource: the spec in `MEMRES_ALLOCATOR_RESOURCE_<device>`, else in
 * `MEMRES_ALLOCATOR_RESOURCE` (`{device}` in it is replaced by the ordinal; a spec or an
 * `@name`; either set empty counts as unset), else %MEMRES_ALLOCATOR_DEFAULT_SPEC; the resource is
 * made on the first allocation for the device (memres_allocator_get_resource()) and kept for the
 * life of the process.
 *
 * torch does not check the pointer it gets (torch 2.11 makes a tensor at address 0 from a
 * %NULL), so a failure (no resource for the device, out of memory, a stream capturing a CUDA
 * graph: %MEMRES_ERROR_NOT_SUPPORTED, docs/interop.md; a driver error) throws a
 * `std::runtime_error` whose what() is the GError's message
 * ("memres allocator: device 0: allocating N bytes: ..."); torch turns it into a Python
 * `RuntimeError`. The GError is also logged, with g_warning() the first time for each device
 * and with g_debug() afterwards. This is the build with a C++ compiler
 * (memres_torch_alloc_throws() returns %TRUE); without one the function returns %NULL on
 * failure instead. Only C++ callers (torch) may call it: an exception cannot cross C frames.
 * For a `torch.cuda.MemPool`, whose caching allocator checks the pointer and retries after
 * releasing its cached blocks, use memres_torch_pool_alloc(), which returns %NULL instead.
 *
 * Thread safety: may be called from any thread, concurrently with every function here.
 *
 * Returns: the pointer (a `CUdeviceptr` for device memory); %NULL only for a @size of 0
 */
extern "C" void *
memres_torch_alloc (ssize_t size, int device, void *stream)
{
  GError *error = NULL;
  void *ptr = _memres_allocator_torch_alloc (size, device, stream, &error);

  if (error != NULL)
    {
      AllocationError e (error);

      g_error_free (error);
      throw e;
    }
  return ptr;
}
