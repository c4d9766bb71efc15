/* init_fails: registers a kind, then fails (MEMRES_PLUGIN_ERROR_INIT_FAILED); the kind it
 * registered must be discarded. */
#include "common.h"

static const MemresKindInfo kind = TP_KIND_INFO ("init_fails");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  if (!memres_plugin_register_kind (plugin, &kind, error))
    return FALSE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "init_fails fails on purpose");
  return FALSE;
}

MEMRES_PLUGIN_DEFINE (init_fails, "a plugin whose init fails", plugin_init)
