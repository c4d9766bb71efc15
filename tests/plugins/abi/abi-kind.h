/* abi-kind.h: the one working kind each ABI test plugin registers (named after the plugin), so
 * that a plugin the loader wrongly accepts shows up as a kind that works. Hidden in each
 * module (the modules are built with -fvisibility=hidden). */
#pragma once

#include <memres/memres-plugin.h>

/* Registers the kind @name (a static string) for @plugin: host memory from g_malloc. */
gboolean abi_kind_register (MemresPlugin *plugin, const char *name, GError **error);
