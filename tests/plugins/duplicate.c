/* duplicate: registers its own kind, then one named "host", which the core's embedded kind
 * already took (MEMRES_ERROR_EXISTS). It ignores the failure and returns TRUE: the load must
 * fail anyway and discard both kinds. */
#include "common.h"

static const MemresKindInfo own_kind = TP_KIND_INFO ("duplicate");
static const MemresKindInfo host_kind = TP_KIND_INFO ("host");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  GError *local = NULL;

  if (!memres_plugin_register_kind (plugin, &own_kind, error))
    return FALSE;
  if (!memres_plugin_register_kind (plugin, &host_kind, &local))
    g_clear_error (&local);
  return TRUE;
}

MEMRES_PLUGIN_DEFINE (duplicate, "registers a kind name already taken", plugin_init)
