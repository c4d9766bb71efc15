/* memres - CUDA memory resources
 * memres-managed.h: advice, prefetch and discard for buffers of managed (unified) memory, the
 * buffers whose flags hold %MEMRES_MEMORY_MANAGED (the `managed` kind, or foreign
 * cuMemAllocManaged memory wrapped with that flag). Full documentation:
 * the reference (share/gtk-doc/html/memres), memres-managed. All Since: 1.2. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-managed
 * @title: Managed memory
 * @short_description: advice, prefetch and discard for buffers of managed (unified) memory
 * @section_id: memres-memres-managed
 *
 * Managed memory (the `managed` kind, or `cuMemAllocManaged()` memory wrapped with
 * %MEMRES_MEMORY_MANAGED) is reachable from the host and from every device, and the driver
 * migrates its pages on demand. The functions here apply to the buffers of such memory
 * (memres_buffer_is_managed()): advice about where the memory should live and who reads it
 * (memres_buffer_set_read_mostly(), memres_buffer_set_preferred_location(),
 * memres_buffer_add_accessed_by(), `cuMemAdvise()`) and what the driver reports of it, and
 * stream-ordered migration (memres_buffer_prefetch(), memres_buffers_prefetch()) and discard
 * (memres_buffer_discard()). A place is a #MemresLocation: a device, host memory or a host NUMA
 * node.
 *
 * |[<!-- language="C" -->
 * MemresLocation gpu = { MEMRES_LOCATION_DEVICE, 0 };
 *
 * if (!memres_buffer_set_preferred_location (buf, &gpu, &error)
 *     || !memres_buffer_prefetch (buf, &gpu, stream, &error))
 *   return FALSE;
 * ]|
 *
 * A buffer of other memory gets %MEMRES_ERROR_NOT_SUPPORTED. Everything here is thread-safe.
 */

/**
 * MemresLocationType:
 * @MEMRES_LOCATION_NONE: no location (an unset preferred location, a range never prefetched)
 * @MEMRES_LOCATION_DEVICE: a device; the id is its ordinal
 * @MEMRES_LOCATION_HOST: host memory; the id is ignored (reported as 0)
 * @MEMRES_LOCATION_HOST_NUMA: host memory on one NUMA node; the id is the node
 * @MEMRES_LOCATION_HOST_NUMA_CURRENT: host memory on the NUMA node of the calling thread; the
 *   id is ignored (prefetch and preferred location only)
 *
 * Where managed memory is advised to live or is prefetched to. The values equal the driver's
 * `CUmemLocationType`.
 *
 * Since: 1.2
 */
typedef enum
{
  MEMRES_LOCATION_NONE = 0,
  MEMRES_LOCATION_DEVICE = 1,
  MEMRES_LOCATION_HOST = 2,
  MEMRES_LOCATION_HOST_NUMA = 3,
  MEMRES_LOCATION_HOST_NUMA_CURRENT = 4,
} MemresLocationType;

typedef struct _MemresLocation MemresLocation;

/**
 * MemresLocation:
 * @type: the kind of location
 * @id: the device ordinal (%MEMRES_LOCATION_DEVICE) or the NUMA node
 *   (%MEMRES_LOCATION_HOST_NUMA); 0 otherwise
 *
 * A location of managed memory (the driver's `CUmemLocation`, without cuda.h).
 *
 * Since: 1.2
 */
struct _MemresLocation
{
  MemresLocationType type;
  gint id;
};

gboolean memres_buffer_is_managed (MemresBuffer *buf);

/* Advice (cuMemAdvise) and what the driver reports of it (cuMemRangeGetAttribute) */
gboolean memres_buffer_set_read_mostly (MemresBuffer *buf, gboolean read_mostly, GError **error);
gboolean memres_buffer_get_read_mostly (MemresBuffer *buf, gboolean *read_mostly, GError **error);
gboolean memres_buffer_set_preferred_location (MemresBuffer *buf, const MemresLocation *location,
                                               GError **error);
gboolean memres_buffer_get_preferred_location (MemresBuffer *buf, MemresLocation *location,
                                               GError **error);
gboolean memres_buffer_add_accessed_by (MemresBuffer *buf, const MemresLocation *location,
                                        GError **error);
gboolean memres_buffer_remove_accessed_by (MemresBuffer *buf, const MemresLocation *location,
                                           GError **error);
gboolean memres_buffer_get_accessed_by (MemresBuffer *buf, MemresLocation **locations,
                                        guint *n_locations, GError **error);

/* Migration, stream-ordered */
gboolean memres_buffer_prefetch (MemresBuffer *buf, const MemresLocation *location,
                                 MemresStream stream, GError **error);
gboolean memres_buffer_get_last_prefetch_location (MemresBuffer *buf, MemresLocation *location,
                                                   GError **error);
gboolean memres_buffers_prefetch (MemresBuffer *const *bufs, guint n_buffers,
                                  const MemresLocation *locations, guint n_locations,
                                  MemresStream stream, GError **error);
gboolean memres_buffer_discard (MemresBuffer *buf, MemresStream stream, GError **error);
gboolean memres_buffer_discard_and_prefetch (MemresBuffer *buf, const MemresLocation *location,
                                             MemresStream stream, GError **error);

G_END_DECLS
