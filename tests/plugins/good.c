/* good: a well-formed plugin registering two kinds, "good" and "good_extra". */
#include "common.h"

static const MemresKindInfo kind = TP_KIND_INFO ("good");
static const MemresKindInfo extra = TP_KIND_INFO ("good_extra");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error)
         && memres_plugin_register_kind (plugin, &extra, error);
}

MEMRES_PLUGIN_DEFINE (good, "a plugin that loads", plugin_init)
