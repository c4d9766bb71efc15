/* missing_symbol: calls a function that no library defines (linked without -z defs). Bound at
 * load time, the load fails with MEMRES_PLUGIN_ERROR_MODULE naming the symbol and the file,
 * instead of the process dying with "symbol lookup error" at the first allocation. */
#include "common.h"

void memres_test_function_that_does_not_exist (void);

static gboolean
ms_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  memres_test_function_that_does_not_exist ();
  return tp_allocate (mr, size, stream, alloc, error);
}

static const MemresResourceOps ms_ops = {
  .version = 1,
  .init = tp_init,
  .finalize = tp_finalize,
  .allocate = ms_allocate,
  .deallocate = tp_deallocate,
  .query = tp_query,
};

static const MemresKindInfo kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "missing_symbol",
  .description = "calls a function nobody defines",
  .ops = &ms_ops,
};

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_DEFINE (missing_symbol, "a plugin with an unresolved symbol", plugin_init)
