/* test-nccl-gpu.c: memres-nccl.h against the real NCCL on one GPU, one rank (suite gpu; skips
 * without a device, without NCCL, and on the fake driver). NCCL is the file MEMRES_NCCL_LIBRARY
 * names (torch's wheel carries one: site-packages/nvidia/nccl/lib/libnccl.so.2), opened here
 * with dlopen() as memres opens it: the communicator and the all-reduce come from it directly.
 * Plain registration: a registrar over `vmm`, `cache>dmr` and `arena` resources (skipped while
 * arena raises no segment events) counts one registration per segment, not per buffer, and an all-reduce between registered buffers moves the right bytes.
 * Windows: a symmetric window over a `vmm` buffer and over an `arena` buffer, an all-reduce in
 * place through it, its bytes checked. Pool memory (`dmr`): what NCCL answers, reported. */
#include "testutil.h"

#include <memres/memres.h>

#include <dlfcn.h>
#include <string.h>

#define N_FLOATS (1u << 20) /* 4 MiB */

typedef struct
{
  char internal[128];
} NcclUniqueId;

static struct
{
  int (*CommInitAll) (gpointer *comms, int ndev, const int *devlist);
  int (*CommDestroy) (gpointer comm);
  int (*AllReduce) (gconstpointer send, gpointer recv, gsize count, int datatype, int op,
                    gpointer comm, gpointer stream);
  const char *(*GetErrorString) (int r);
} nccl;

enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

static gpointer comm;

/* The communicator of one rank on device 0; FALSE (skipped) without a device or NCCL. */
static gboolean
require_nccl (void)
{
  const char *path = g_getenv ("MEMRES_NCCL_LIBRARY");
  g_autoptr (GError) error = NULL;
  gpointer h;
  int dev = 0, r;

  if (comm != NULL)
    return TRUE;
  if (!mt_require_devices (1))
    return FALSE;
  if (mt_driver_is_fake ())
    {
      g_test_skip ("NCCL needs the real driver");
      return FALSE;
    }
  if (!memres_nccl_is_available (&error))
    {
      g_test_skip_printf ("%s", error->message);
      return FALSE;
    }
  h = dlopen (path != NULL && path[0] != '\0' ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  g_assert_nonnull (h); /* memres opened it */
  *(gpointer *) &nccl.CommInitAll = dlsym (h, "ncclCommInitAll");
  *(gpointer *) &nccl.CommDestroy = dlsym (h, "ncclCommDestroy");
  *(gpointer *) &nccl.AllReduce = dlsym (h, "ncclAllReduce");
  *(gpointer *) &nccl.GetErrorString = dlsym (h, "ncclGetErrorString");
  g_assert_nonnull (nccl.CommInitAll);
  g_assert_nonnull (nccl.AllReduce);
  r = nccl.CommInitAll (&comm, 1, &dev);
  if (r != 0)
    g_error ("ncclCommInitAll: %s (%d)", nccl.GetErrorString (r), r);
  return TRUE;
}

static void
fill (MemresBuffer *buf, guint32 seed)
{
  g_autofree float *data = g_new (float, N_FLOATS);
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < N_FLOATS; i++)
    data[i] = (float) ((i * 2654435761u + seed) % 100003u) * 0.5f;
  MT_CHECK (memres_buffer_write (buf, 0, data, N_FLOATS * sizeof (float), NULL, &error));
  MT_CHECK (memres_stream_synchronize (NULL, &error));
}

/* With one rank, a sum is the input: @buf holds the pattern of @seed. */
static void
assert_filled (MemresBuffer *buf, guint32 seed)
{
  g_autofree float *data = g_new (float, N_FLOATS);
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_buffer_read (buf, 0, data, N_FLOATS * sizeof (float), NULL, &error));
  MT_CHECK (memres_stream_synchronize (NULL, &error));
  for (guint i = 0; i < N_FLOATS; i++)
    if (data[i] != (float) ((i * 2654435761u + seed) % 100003u) * 0.5f)
      g_error ("float %u: %g, expected %g", i, data[i],
               (float) ((i * 2654435761u + seed) % 100003u) * 0.5f);
}

static void
all_reduce (MemresBuffer *send, MemresBuffer *recv)
{
  g_autoptr (GError) error = NULL;
  int r = nccl.AllReduce (memres_buffer_get_pointer (send), memres_buffer_get_pointer (recv),
                          N_FLOATS, NCCL_FLOAT32, NCCL_SUM, comm, NULL);

  if (r != 0)
    g_error ("ncclAllReduce: %s (%d)", nccl.GetErrorString (r), r);
  MT_CHECK (memres_stream_synchronize (NULL, &error));
}

/* Plain registration over @spec: 16 buffers, the segments registered, an all-reduce. */
static void
registrar_case (gconstpointer data)
{
  const char *spec = data;
  MemresResource *mr;
  MemresNcclRegistrar *reg;
  MemresBuffer *bufs[16];
  g_autoptr (GHashTable) segs = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  g_autoptr (GError) error = NULL;
  MemresNcclCounts c;

  if (!require_nccl ())
    return;
  mr = mt_new_ok (spec);
  bufs[0] = mt_alloc_ok (mr, N_FLOATS * sizeof (float), NULL); /* before: at creation */
  reg = memres_nccl_registrar_new (mr, comm, &error);
  if (g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
    {
      /* a kind without segment events yet (arena on main): its windows still work */
      g_test_skip_printf ("%s: %s", spec, error->message);
      mt_close_ok (bufs[0], NULL);
      memres_resource_unref (mr);
      return;
    }
  g_assert_no_error (error);
  for (guint i = 1; i < G_N_ELEMENTS (bufs); i++) /* after: in events */
    bufs[i] = mt_alloc_ok (mr, N_FLOATS * sizeof (float), NULL);
  /* every segment a buffer covers (an arena buffer may span several granules, each a segment) */
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      guint64 at = (guint64) (guintptr) memres_buffer_get_pointer (bufs[i]);
      guint64 end = at + memres_buffer_get_size (bufs[i]);

      while (at < end)
        {
          MemresLookupInfo info;

          g_assert_true (memres_lookup ((gpointer) (guintptr) at, &info));
          if (!g_hash_table_contains (segs, &info.segment.base))
            g_hash_table_add (segs, g_memdup2 (&info.segment.base, sizeof (guint64)));
          at = info.segment.base + info.segment.length;
        }
    }
  c = (memres_nccl_registrar_get_counts (reg, &c), c);
  g_test_message ("%s: %u buffers, %u segments, %" G_GUINT64_FORMAT " registered (%" G_GUINT64_FORMAT
                  " bytes), %" G_GUINT64_FORMAT " failures",
                  spec, (guint) G_N_ELEMENTS (bufs), g_hash_table_size (segs), c.registered,
                  c.registered_bytes, c.failures);
  g_assert_true (memres_nccl_registrar_check (reg, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.registered, ==, g_hash_table_size (segs));

  fill (bufs[3], 37);
  fill (bufs[9], 1);
  all_reduce (bufs[3], bufs[9]);
  assert_filled (bufs[9], 37);

  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  /* a kind that holds nothing after the closes (vmm unmaps at each close) has no trim */
  if (!memres_resource_trim (mr, 0, &error))
    {
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
    }
  memres_nccl_registrar_get_counts (reg, &c);
  g_test_message ("%s after the trim: %" G_GUINT64_FORMAT " registered, %" G_GUINT64_FORMAT
                  " registrations, %" G_GUINT64_FORMAT " deregistrations",
                  spec, c.registered, c.registrations, c.deregistrations);
  g_assert_cmpuint (c.failures, ==, 0);
  MT_CHECK (memres_nccl_registrar_free (reg, &error));
  memres_resource_unref (mr);
}

/* A symmetric window over a buffer of @spec, an all-reduce in place through it. */
static void
window_case (gconstpointer data)
{
  const char *spec = data;
  MemresResource *mr;
  MemresBuffer *buf;
  MemresNcclWindow *win;
  g_autoptr (GError) error = NULL;

  if (!require_nccl ())
    return;
  mr = mt_new_ok (spec);
  buf = mt_alloc_ok (mr, N_FLOATS * sizeof (float), NULL);
  fill (buf, 5);
  win = memres_nccl_window_register (buf, comm, MEMRES_NCCL_WINDOW_SYMMETRIC, &error);
  g_assert_no_error (error);
  g_assert_nonnull (memres_nccl_window_get_handle (win));
  all_reduce (buf, buf);
  assert_filled (buf, 5);
  MT_CHECK (memres_nccl_window_deregister (win, &error));
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
}

/* Pool memory: NCCL 2.28 refuses a window there (ncclUnhandledCudaError): reported, either way. */
static void
window_pool (void)
{
  MemresResource *mr;
  MemresBuffer *buf;
  MemresNcclWindow *win;
  g_autoptr (GError) error = NULL;

  if (!require_nccl ())
    return;
  mr = mt_new_ok ("dmr:device=0");
  buf = mt_alloc_ok (mr, N_FLOATS * sizeof (float), NULL);
  win = memres_nccl_window_register (buf, comm, 0, &error);
  if (win == NULL)
    {
      g_assert_error (error, MEMRES_NCCL_ERROR, error->code);
      g_test_message ("a window over dmr memory: %s", error->message);
    }
  else
    {
      g_test_message ("a window over dmr memory: registered");
      MT_CHECK (memres_nccl_window_deregister (win, &error));
    }
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
}

int
main (int argc, char **argv)
{
  int status;

  mt_init (&argc, &argv);
  g_test_add_data_func ("/nccl-gpu/registrar/vmm", "vmm:device=0", registrar_case);
  g_test_add_data_func ("/nccl-gpu/registrar/arena", "arena:device=0", registrar_case);
  g_test_add_data_func ("/nccl-gpu/registrar/cache-dmr", "cache>dmr:device=0", registrar_case);
  g_test_add_data_func ("/nccl-gpu/window/vmm", "vmm:device=0,handle_type=posix_fd",
                        window_case);
  g_test_add_data_func ("/nccl-gpu/window/arena", "arena:device=0", window_case);
  g_test_add_func ("/nccl-gpu/window/dmr", window_pool);
  status = g_test_run ();
  if (comm != NULL)
    nccl.CommDestroy (comm);
  return status;
}
