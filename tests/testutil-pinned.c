/* testutil-pinned.c: what the pinned tests (test-pinned*.c) share: device attributes (read and
 * overridden on the fake), the pool mode's requirement, the fault sweep. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "testutil-pinned.h"

gboolean
host_pools_supported (void)
{
  return mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED)
         || (mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED)
             && mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID) >= 0);
}

/* Pool mode where the device has no host pools cannot be tested on that device. */
gboolean
require_pool_mode (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  if (host_pools_supported ())
    return TRUE;
  g_test_skip ("device 0 has no host memory pools");
  return FALSE;
}

/* Fault sweeps: every driver call of creation, allocation and close fails once in turn. */
void
sweep (const char *spec, gboolean expect_calls)
{
  /* A failing free cannot be undone: the memory stays allocated. */
  static const char *const frees[] = { "cuMemFreeAsync", "cuMemFreeHost", NULL };
  g_autofree char *what = NULL;
  MtSweepData d = { .spec = spec, .size = 2 * MiB };
  int n;

  /* Warm up once: first-use work of the core (loading the plugin, retaining the primary
   * context) happens once per process and is not the operation under test. */
  g_assert_true (mt_op_new (&d, NULL));
  g_assert_true (mt_op_allocate_close (&d, NULL));
  mt_undo_new (&d);

  what = g_strdup_printf ("create %s", spec);
  n = mt_fault_sweep (what, mt_op_new, mt_undo_new, &d, CUDA_ERROR_NOT_PERMITTED, NULL);
  if (expect_calls)
    g_assert_cmpint (n, >, 0);

  d.mr = mt_new_ok (spec);
  g_free (what);
  what = g_strdup_printf ("allocate %s", spec);
  n = mt_fault_sweep (what, mt_op_allocate, mt_undo_allocate, &d, CUDA_ERROR_NOT_PERMITTED, NULL);
  g_assert_cmpint (n, >, 0);
  g_free (what);
  what = g_strdup_printf ("allocate+close %s", spec);
  n = mt_fault_sweep (what, mt_op_allocate_close, NULL, &d, CUDA_ERROR_NOT_PERMITTED, frees);
  g_assert_cmpint (n, >, 0);
  mt_undo_new (&d);
}
