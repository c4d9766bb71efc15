/* test-allocator-throw.cc: libmemres-allocator's memres_torch_alloc() as torch calls it, from
 * C++: built with a C++ compiler it throws a std::runtime_error carrying the GError's message
 * on failure (torch does not check a NULL pointer; it turns the exception into a Python
 * RuntimeError), and returns the pointer on success. The library is loaded with dlopen() as
 * torch does. Suite core: MEMRES_ALLOCATOR_RESOURCE=hostdev (tests/hostdev-kind.h); suite fake: the
 * default (dmr) over the fake driver. */
#include <memres/memres.h>
#include <memres/memres-plugin.h> /* memres_cuda_get_driver() */

#include "hostdev-kind.h"

#include <dlfcn.h>
#include <stdexcept>
#include <string>
#include <sys/types.h>

namespace
{
struct Shim
{
  void *(*alloc) (ssize_t size, int device, void *stream);
  void (*free) (void *ptr, ssize_t size, int device, void *stream);
  gboolean (*throws) (void);
  guint64 (*count_buffers) (int device);
};

Shim shim;
guint n_warnings;

/* The allocator logs each kind of failure once with g_warning(), fatal in a test: count them. */
GLogWriterOutput
count_warnings (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer)
{
  if (level & (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL))
    {
      n_warnings++;
      return G_LOG_WRITER_HANDLED;
    }
  return g_log_writer_default (level, fields, n_fields, NULL);
}

void
load_shim (void)
{
  const char *path = g_getenv ("MEMRES_ALLOCATOR_LIB");
  void *handle;

  g_assert_nonnull (path);
  handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    g_error ("dlopen %s: %s", path, dlerror ());
  *(void **) &shim.alloc = dlsym (handle, "memres_torch_alloc");
  *(void **) &shim.free = dlsym (handle, "memres_torch_free");
  *(void **) &shim.throws = dlsym (handle, "memres_torch_alloc_throws");
  *(void **) &shim.count_buffers = dlsym (handle, "memres_allocator_count_buffers");
  g_assert_nonnull (shim.alloc);
  g_assert_nonnull (shim.free);
  g_assert_nonnull (shim.throws);
  g_assert_nonnull (shim.count_buffers);
}

/* Calls memres_torch_alloc(), which must throw: returns what() of the exception. */
std::string
alloc_must_throw (ssize_t size, int device, void *stream = NULL)
{
  try
    {
      void *p = shim.alloc (size, device, stream);

      g_error ("memres_torch_alloc (%" G_GSSIZE_FORMAT ", %d) returned %p instead of throwing",
               (gssize) size, device, p);
    }
  catch (const std::runtime_error &e)
    {
      return e.what ();
    }
  return "";
}

void
assert_contains (const std::string &message, const char *part)
{
  if (message.find (part) == std::string::npos)
    g_error ("'%s' does not contain '%s'", message.c_str (), part);
}

bool
require_throwing_build (void)
{
  if (shim.throws ())
    return true;
  g_test_skip ("libmemres-allocator was built without a C++ compiler: memres_torch_alloc "
               "returns NULL on failure");
  return false;
}

/* Success still returns the pointer (bytes written and read back), and size 0 is NULL without
 * an exception. */
void
test_success (void)
{
  if (!require_throwing_build ())
    return;
  void *p = shim.alloc (4096, 0, NULL);
  g_assert_nonnull (p);
  g_assert_cmpuint (shim.count_buffers (0), ==, 1);
  shim.free (p, 4096, 0, NULL);
  g_assert_cmpuint (shim.count_buffers (0), ==, 0);
  g_assert_null (shim.alloc (0, 0, NULL));
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

/* Each failure throws with the GError's message; nothing is left allocated. */
void
test_failures (void)
{
  if (!require_throwing_build ())
    return;
  /* torch passes a size_t: 2^64 - 5 bytes, not "a negative size" */
  assert_contains (alloc_must_throw (-5, 0),
                   "memres allocator: device 0: allocating 18446744073709551611 bytes");
  assert_contains (alloc_must_throw (4096, 64), "device 64 is not served");
  assert_contains (alloc_must_throw (4096, -1), "device -1 is not served");
  /* a size no memory has, from dmr (suite fake; the host kind would hand it to malloc, which
   * a sanitizer aborts on: test-allocator checks the host case through sizes memres refuses,
   * which ssize_t cannot carry) */
  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") == NULL)
    {
      std::string m = alloc_must_throw (G_MAXSSIZE, 0);

      assert_contains (m, "memres allocator: device 0: allocating");
      /* a second failure throws too (the log is once only, the exception every time) */
      assert_contains (alloc_must_throw (G_MAXSSIZE, 0), "memres allocator: device 0: allocating");
    }
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (n_warnings, >=, 1); /* the device warning, at least */
  /* the library still works after the failures */
  void *p = shim.alloc (100, 0, NULL);
  g_assert_nonnull (p);
  shim.free (p, 100, 0, NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

/* A resource that cannot be made: every call throws with the first failure's message. */
void
test_bad_spec (void)
{
  if (!g_test_subprocess ())
    {
      if (!require_throwing_build ())
        return;
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "no_such_kind:device={device}", TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE_0", "", TRUE);
  assert_contains (alloc_must_throw (4096, 0), "device 0: no resource");
  assert_contains (alloc_must_throw (4096, 0), "no_such_kind");
  g_assert_cmpuint (n_warnings, ==, 1); /* logged once */
}
/* torch.cuda.graph allocates on its capturing stream: refused with an exception naming the
 * capture (torch raises RuntimeError and the capture fails), not a block handed to the graph.
 * Suite fake (the driver's streams). */
void
test_capture (void)
{
  GError *error = NULL;
  const MemresCudaDriver *drv;
  CUstream s = NULL;
  CUgraph graph = NULL;

  if (!require_throwing_build ())
    return;
  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
    {
      g_test_skip ("needs the driver (suite fake)");
      return;
    }
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (drv->cuStreamCreate (&s, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamBeginCapture (s, CU_STREAM_CAPTURE_MODE_GLOBAL), ==, CUDA_SUCCESS);
  assert_contains (alloc_must_throw (4096, 0, s), "is capturing a CUDA graph");
  g_assert_cmpint (drv->cuStreamEndCapture (s, &graph), ==, CUDA_SUCCESS);
  if (graph != NULL)
    g_assert_cmpint (drv->cuGraphDestroy (graph), ==, CUDA_SUCCESS);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  void *p = shim.alloc (4096, 0, s);
  g_assert_nonnull (p);
  shim.free (p, 4096, 0, s);
  g_assert_cmpint (drv->cuStreamSynchronize (s), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamDestroy (s), ==, CUDA_SUCCESS);
}
} // namespace

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  hostdev_register ();
  g_log_set_writer_func (count_warnings, NULL, NULL);
  load_shim ();
  g_test_add_func ("/allocator-throw/success", test_success);
  g_test_add_func ("/allocator-throw/failures", test_failures);
  g_test_add_func ("/allocator-throw/bad-spec", test_bad_spec);
  g_test_add_func ("/allocator-throw/capture", test_capture);
  return g_test_run ();
}
