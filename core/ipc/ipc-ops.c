/* memres - CUDA memory resources
 * ipc-ops.c: a kind's IPC table (MemresIpcOps) checked and copied when the kind is registered
 * (kind.c calls this, so that only the layer knows the table's slots). */
#include <stddef.h>
#include <string.h>

#include "memres-private.h"

/* The size of each version of MemresIpcOps: version 1 ends after import_chunks, version 2
 * after import_fabric_chunks, version 3 after import_fabric_handle (all ABI 2.0). */
static const gsize ipc_ops_sizes[] = {
  0,
  offsetof (MemresIpcOps, import_chunks) + sizeof (gpointer),
  offsetof (MemresIpcOps, import_fabric_chunks) + sizeof (gpointer),
  offsetof (MemresIpcOps, import_fabric_handle) + sizeof (gpointer),
};
G_STATIC_ASSERT (G_N_ELEMENTS (ipc_ops_sizes) == MEMRES_IPC_OPS_VERSION + 1);
G_STATIC_ASSERT (offsetof (MemresIpcOps, import_fabric_handle) + sizeof (gpointer)
                 == sizeof (MemresIpcOps));

/* One pair of slots that go together: a table has both or neither. */
static gboolean
check_pair (const char *kind, gconstpointer a, const char *a_name, gconstpointer b,
            const char *b_name, GError **error)
{
  if ((a == NULL) == (b == NULL))
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "kind \"%s\": its IPC table has %s without %s (the two go together)", kind,
               a != NULL ? a_name : b_name, a != NULL ? b_name : a_name);
  return FALSE;
}

#define CHECK_PAIR(kind, ops, a, b, error)                                                         \
  check_pair ((kind), (gconstpointer) (ops)->a, #a, (gconstpointer) (ops)->b, #b, (error))

gboolean
_memres_ipc_ops_copy (const char *kind, const MemresIpcOps *ipc, gboolean adaptor,
                      MemresIpcOps *out, GError **error)
{
  MemresIpcOps copy = { 0 };

  memset (out, 0, sizeof *out);
  if (ipc == NULL)
    return TRUE;
  if (adaptor)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"%s\" is an adaptor and has an IPC table: only base kinds share "
                   "(a buffer shared through an adaptor is its base kind's)",
                   kind);
      return FALSE;
    }
  if (ipc->version < 1 || ipc->version > MEMRES_IPC_OPS_VERSION)
    {
      g_set_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                   "kind \"%s\": IPC table version %u is not one this memres knows (1 to %d: set "
                   "version to MEMRES_IPC_OPS_VERSION of the headers you build with)",
                   kind, ipc->version, MEMRES_IPC_OPS_VERSION);
      return FALSE;
    }
  /* only the slots of the plugin's version */
  memcpy (&copy, ipc, ipc_ops_sizes[ipc->version]);
  if (!CHECK_PAIR (kind, &copy, export_handle, import_handle, error)
      || !CHECK_PAIR (kind, &copy, export_buffer, import_buffer, error)
      || !CHECK_PAIR (kind, &copy, export_chunks, import_chunks, error)
      || !CHECK_PAIR (kind, &copy, export_fabric_chunks, import_fabric_chunks, error)
      || !CHECK_PAIR (kind, &copy, export_fabric_handle, import_fabric_handle, error))
    return FALSE;
  *out = copy;
  return TRUE;
}
