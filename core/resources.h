/* memres - CUDA memory resources
 * resources.h: resource.c's calls besides the hot path (hot-path.h): a resource's creation,
 * its references, the buffers its stripes count; resource-slots.c's: the layers that serve a
 * slot, the check of a slot's result, a counted layer's slot pointers; and the end of its
 * segment subscriptions (segments.c). Included through memres-private.h. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "resources.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include "hot-path.h"

G_BEGIN_DECLS

/* resource.c: references held by buffers (see MemresResource.refs) */
#define MEMRES_RESOURCE_APP_REF ((gint64) 1 << 32)
void _memres_resource_add_buffer (MemresResource *mr);

void _memres_resource_remove_buffer (MemresResource *mr);
gboolean _memres_resource_try_ref (MemresResource *mr);

/* Buffers counted on the stripes now (exact when no allocate or close runs). */
gint64 _memres_resource_count_allocated (MemresResource *mr);

/* resource.c: create an instance of @kind through @setup (called as the init slot would be,
 * with @data; its failures are reported as those of the slot @setup_name) instead of the init
 * slot: the IPC layer's import of a pool handle (the kind's import_handle slot). */
typedef gboolean (*MemresResourceSetupFunc) (MemresResource *mr, gconstpointer data,
                                             GError **error);
MemresResource *_memres_resource_new_imported (MemresKind *kind, MemresResourceSetupFunc setup,
                                               const char *setup_name, gconstpointer data,
                                               const char *spec, GError **error);

/* resource.c: an instance of @kind over @upstream (an adaptor's layer below; the new instance
 * takes over the caller's reference on success, the caller keeps it on failure), through the
 * init slot. */
MemresResource *_memres_resource_new_layer (MemresKind *kind, const MemresOptions *options,
                                            MemresResource *upstream, const char *spec,
                                            GError **error);

/* resource-slots.c: the layer that serves @mr's optional slot at @slot_offset (an offset in
 * MemresResourceOps): @mr when it implements it, else down the stack through adaptors that
 * leave it NULL (only through MEMRES_KIND_PASSES_ALLOCATIONS adaptors when
 * @allocation_level); the last layer looked at when none does (its slot is then NULL). */
MemresResource *_memres_resource_slot_owner (MemresResource *mr, gsize slot_offset,
                                             gboolean allocation_level);
#define MEMRES_SLOT_OFFSET(slot) G_STRUCT_OFFSET (MemresResourceOps, slot)

/* resource-slots.c: the layer whose IPC table (MemresKind.ipc) serves @mr: @mr when its kind has
 * one, else down the stack through MEMRES_KIND_PASSES_ALLOCATIONS adaptors (which have none) to
 * the first layer with one; the last layer looked at when none has (its table is then empty). */
MemresResource *_memres_resource_ipc_owner (MemresResource *mr);

/* resource-slots.c: MEMRES_ERROR_NOT_SUPPORTED: "resources of kind ... do not support @what";
 * FALSE. */
gboolean _memres_resource_not_supported (MemresResource *mr, const char *what, GError **error);
/* resource-slots.c: checks the result of a call of @mr's @slot: FALSE must come with an error
 * (one is made up when the plugin set none), TRUE without one (dropped with a warning); moves
 * *@local into @error on failure. Returns @ok. */
gboolean _memres_resource_slot_result (MemresResource *mr, const char *slot, gboolean ok,
                                       GError **local, GError **error);
/* resource-slots.c: the slot pointers of @mr, a counted layer being made over @upstream (NULL for
 * a base kind): the core's counted calls (counting.h) for its MemresCountedMode. */
void _memres_resource_set_counted_slots (MemresResource *mr, MemresResource *upstream);

/* segments.c: @mr is being freed, after its finalize slot: its subscriptions end, the index
 * forgets what it still has. */
void _memres_segments_forget (MemresResource *mr);
/* segments.c, for snapshot.c: the segments of @mr (MemresSegment, address order; transfer full) */
GArray *_memres_segments_copy (MemresResource *mr);
void _memres_registry_fork (MemresResource *unused, MemresForkPhase phase);

G_END_DECLS
