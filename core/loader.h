/* memres - CUDA memory resources
 * loader.h: plugins and kinds: the plugin and kind structures, the table of kinds
 * (registry.c), loading on demand (loader.c), a plugin's load (plugin.c), the checks of its file
 * (module-file.c), a kind's creation (kind.c). Included through memres-private.h. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "loader.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <gmodule.h>
#include <memres/memres-plugin.h>

G_BEGIN_DECLS

#define MEMRES_KIND_NAME_MAX 32 /* bytes including the terminating NUL */

/* plugin.c: a plugin that loaded lives as long as the process (loader.c keeps it) */
struct _MemresPlugin
{
  char *name;
  char *path; /* NULL for a plugin embedded in the core */
  GModule *module;
  const MemresPluginDesc *desc;
  GPtrArray *kinds;       /* MemresKind*, registered while init runs */
  GError *register_error; /* first error of memres_plugin_register_kind() during init */
};

struct _MemresKind
{
  gatomicrefcount ref;
  char *name;
  guint8 name_field[MEMRES_KIND_NAME_MAX]; /* the name NUL-padded, as descriptors carry it */
  char *description;
  MemresOptionSpec *options; /* copied array; strings point into the plugin */
  guint n_options;
  MemresResourceOps ops; /* copied; slots newer than the plugin's version are NULL */
  /* the IPC table, copied (core/ipc/ipc-ops.c) and read only by the IPC layer: all NULL, with
   * version 0, when the kind shares nothing (every adaptor) */
  MemresIpcOps ipc;
  gsize instance_size;
  MemresKindFlags flags;
  MemresPlugin *plugin; /* not a reference (plugins outlive kinds); NULL: the application's */
};

/* registry.c: the table of kinds (see there); it loads nothing */
gboolean _memres_registry_check_name (const char *name, GPtrArray *pending, GError **error);
gboolean _memres_registry_insert (GPtrArray *kinds, GError **error);
MemresKind *_memres_registry_find (const char *name);
GPtrArray *_memres_registry_list (void);
/* loader.c: the registered kind @name after the embedded kinds registered, or NULL; loads no
 * plugin file */
MemresKind *_memres_registry_lookup_loaded (const char *name);
/* plugin.c: a plugin's load (the caller holds loader.c's load token), and the free of one whose
 * load failed */
MemresPlugin *_memres_plugin_load (const char *name, const char *path, GError **error);
MemresPlugin *_memres_plugin_load_embedded (const MemresPluginDesc *desc, GError **error);
void _memres_plugin_free (MemresPlugin *plugin);

/* module-file.c: NULL when @path is a regular, readable file (or missing); else what it is, in a
 * new string
 * ("a FIFO", "a directory", "a dangling symbolic link", ...). Never blocks. */
char *_memres_module_file_problem (const char *path);
/* module-file.c: fills @note from the `.note.memres` section of the ELF file @path (TRUE), or
 * returns FALSE (not an ELF object of this machine, no note). Only reads the file. */
gboolean _memres_module_file_read_note (const char *path, MemresPluginNote *note);

/* kind.c: a new kind from @info, validated (name, ops, option schema); @plugin may be NULL. */
MemresKind *_memres_kind_new (MemresPlugin *plugin, const MemresKindInfo *info, GError **error);

G_END_DECLS
