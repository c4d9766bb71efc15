/* reentrant: its init lists the kinds and looks up its own kind and the host kind, as the SDK
 * allows: the listing must not load this plugin again, the lookup of its own kind must fail
 * with MEMRES_ERROR_NOT_FOUND (not recurse), the host kind must be found. Init fails with the
 * reason when one of these does not hold. */
#include "common.h"

#include <string.h>

static const MemresKindInfo kind = TP_KIND_INFO ("reentrant");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  g_autoptr (MemresKind) own = NULL;
  g_autoptr (MemresKind) host = NULL;
  guint i;

  kinds = memres_registry_list_kinds (&local);
  if (kinds == NULL)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "listing from init: ");
      return FALSE;
    }
  for (i = 0; i < kinds->len; i++)
    if (strcmp (memres_kind_get_name (g_ptr_array_index (kinds, i)), "reentrant") == 0)
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "listed its own kind from init");
        return FALSE;
      }
  own = memres_registry_lookup ("reentrant", &local);
  if (own != NULL || !g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND)
      || strstr (local->message, "still initializing") == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "looking up its own kind from init: %s",
                   local != NULL ? local->message : "found");
      return FALSE;
    }
  g_clear_error (&local);
  host = memres_registry_lookup ("host", &local);
  if (host == NULL)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "host from init: ");
      return FALSE;
    }
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_DEFINE (reentrant, "a plugin whose init uses the registry", plugin_init)
