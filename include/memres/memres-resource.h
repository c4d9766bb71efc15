/* memres - CUDA memory resources
 * memres-resource.h: memory resources, created by name. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-resource
 * @title: Resources
 * @short_description: memory resources, created from spec strings, and what they report
 * @section_id: memres-memres-resource
 *
 * A #MemresResource is where buffers come from. memres_resource_new() makes one from a spec
 * string, `KIND[:KEY=VALUE,...]`, one layer per kind joined by `>` (an adaptor above the
 * resource it uses: `stats>dmr:device=0`), or `@NAME` for a resource named in the config file;
 * memres_resource_get_default() gives the device's default (its memory pool, or host memory
 * where there is no GPU). Start here:
 *
 * |[<!-- language="C" -->
 * g_autoptr (GError) error = NULL;
 * g_autoptr (MemresResource) mr = memres_resource_get_default (0, &error);
 * g_autoptr (MemresBuffer) buf = NULL;
 *
 * if (mr != NULL)
 *   buf = memres_resource_allocate (mr, 64 << 20, NULL, &error);  // 64 MiB, legacy stream
 * ]|
 *
 * A resource reports its kind, device and #MemresMemoryFlags, its statistics (#MemresStats,
 * memres_resource_get_stats()) and counters, and what it held when it last ran out of memory;
 * it sets the access of other devices to its memory and exports its pool to another process
 * (memres-ipc). Resources are reference counted (`g_autoptr` works) and thread-safe: any number
 * of threads may allocate from one resource at once. Each buffer holds a reference on its
 * resource.
 */

/* Creation and lifetime (memres_resource_get_default_spec(): Since: 1.2). Full documentation:
 * the reference (share/gtk-doc/html/memres), memres-resource. */
MemresResource *memres_resource_new (const char *spec, GError **error);
/* A spec's layers without creating anything (core/stack.c). Since: 2.0 */
GVariant *memres_spec_parse (const char *spec, GError **error);
MemresResource *memres_resource_get_default (gint device, GError **error);
char *memres_resource_get_default_spec (gint device, char **host_reason, GError **error);
MemresResource *memres_resource_ref (MemresResource *mr);
void memres_resource_unref (MemresResource *mr);

/* Properties */
const char *memres_resource_get_kind_name (MemresResource *mr);
MemresKind *memres_resource_get_kind (MemresResource *mr);
char *memres_resource_to_string (MemresResource *mr);
MemresResource *memres_resource_get_upstream (MemresResource *mr);
MemresResource *memres_resource_find_layer (MemresResource *mr, const char *kind_name,
                                            GError **error);
gint memres_resource_get_device (MemresResource *mr);
MemresMemoryFlags memres_resource_get_flags (MemresResource *mr);
gboolean memres_resource_is_device_accessible (MemresResource *mr);
gboolean memres_resource_is_host_accessible (MemresResource *mr);

/* Allocation */
MemresBuffer *memres_resource_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                        GError **error);

/* Statistics and pool management */
gboolean memres_resource_get_stats (MemresResource *mr, MemresStats *stats, GError **error);
gboolean memres_resource_reset_stats (MemresResource *mr, GError **error);
gboolean memres_resource_trim (MemresResource *mr, gsize bytes_to_keep, GError **error);
GVariant *memres_resource_get_counters (MemresResource *mr, GError **error);
/* The last out-of-memory error's report (core/oom-report.c). Since: 2.0 */
char *memres_resource_get_oom_report (MemresResource *mr);
char *memres_resource_get_oom_snapshot (MemresResource *mr);
char *memres_resource_snapshot (MemresResource *mr, GError **error);

/* Peer access */
gboolean memres_resource_set_access (MemresResource *mr, const MemresAccessDesc *descs,
                                     guint n_descs, GError **error);
gboolean memres_resource_get_access (MemresResource *mr, gint device, MemresAccess *access,
                                     GError **error);

/* Sharing between processes (see memres-ipc.h for the handle type and the transport) */
MemresIpcHandle *memres_resource_export_handle (MemresResource *mr, GError **error);
MemresResource *memres_resource_import_handle (const MemresIpcHandle *handle, GError **error);

/* Named resources: the config file of `@NAME` layers. Since: 1.2 */
GPtrArray *memres_config_list_resources (char **path, GError **error);
GPtrArray *memres_config_list_resources_full (char **path, GPtrArray **specs, GPtrArray **origins,
                                              GError **error);
char *memres_config_get_resource_spec (const char *name, char **origin, GError **error);
/* Since: 2.0 */
gboolean memres_config_get_resource_description (const char *name, char **description,
                                                 GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MemresResource, memres_resource_unref)

G_END_DECLS
