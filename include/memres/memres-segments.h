/* memres - CUDA memory resources
 * memres-segments.h: segments, the ranges the driver mapped for a resource (a vmm buffer's mapped
 * part, a cache's chunk), their events (mapped, grown, about to be unmapped) and the lookup of
 * the segment, resource and offset of any address inside one. Full documentation: the reference
 * (share/gtk-doc/html/memres), memres-segments, and docs/segments.md. All Since: 2.0. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-segments
 * @title: Segments
 * @short_description: events for the address ranges a resource maps, and the lookup of any address
 * @section_id: memres-memres-segments
 *
 * A segment is a range of addresses that a resource mapped in one piece and that stays mapped
 * until the resource unmaps it (#MemresSegment): a `vmm` buffer, a `cache` chunk, an `arena`
 * granule. Kinds with %MEMRES_KIND_SEGMENTS raise an event for each segment mapped, grown or
 * about to be unmapped, which subscribers receive (memres_resource_subscribe_segments(), a
 * #MemresSegmentFunc); a communication library registers the segments of a resource that way
 * instead of each buffer. memres_lookup() finds the segment, resource and offset of any address
 * inside one.
 *
 * |[<!-- language="C" -->
 * MemresLookupInfo info;
 *
 * if (memres_lookup (ptr, &info))
 *   g_print ("%s + %" G_GUINT64_FORMAT "\n",
 *            memres_resource_get_kind_name (info.resource), info.offset);
 * ]|
 *
 * Subscribing, unsubscribing and lookups are thread-safe; callbacks run on the thread that
 * mapped or unmapped the memory. See also docs/segments.md in the source tree.
 */

typedef struct _MemresSegment MemresSegment;

/**
 * MemresSegment:
 * @base: the first address of the segment: a `CUdeviceptr`, or a host pointer as an integer
 * @length: its length in bytes (never 0)
 * @device: the device ordinal the memory belongs to, -1 for host memory (as
 *   memres_buffer_get_device() reports it)
 * @handle_types: the shareable handle types the physical memory was created with, a bitmask of
 *   `CUmemAllocationHandleType` values (`CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`,
 *   `CU_MEM_HANDLE_TYPE_FABRIC`); 0 when it has none or the kind does not know them (a cache's
 *   chunks)
 * @tag_id: the id of the tag the segment's memory serves (memres-tags.h; ids count from 1 in
 *   the order the names were first used), 0 for none: memory of untagged buffers, or memory that
 *   serves every tag (a cache's chunks and blocks over an upstream that cannot sleep)
 * @tag: that tag's name (interned, valid for the life of the process), %NULL for none. Which tag
 *   a kind reports: `vmm` the tag of the buffer the segment belongs to (under a `cache`, the tag
 *   of the cache's chunk or block of its own that the buffer is); `arena` the tag its
 *   granule serves (a granule holds one tag's buffers: docs/arena.md), the one it was mapped for
 *   (a granule left idle and taken by another tag without being unmapped keeps the tag of its
 *   event); `cache` the buffer's tag for a request of its own (above max_block, or tagged over an
 *   `arena`), and for a chunk or a block of its own the tag its blocks serve (in a stack that can
 *   sleep a chunk or block serves one tag's buffers, used or cached; none elsewhere)
 *
 * One segment: a range of addresses the driver mapped for a resource, in one piece, that stays
 * mapped (at this address) until the resource raises %MEMRES_SEGMENT_UNMAPPING for it. Which
 * ranges are segments is the kind's: a `vmm` buffer's mapped part, a `cache`'s chunk or block
 * taken from its upstream (whatever the upstream), an `arena`'s mapped granule. The
 * segments of one resource never overlap; those of two layers of one stack nest (a cache's
 * chunk lies inside its `vmm` upstream's buffer). Frozen layout (part of the ABI).
 *
 * Since: 2.0
 */
struct _MemresSegment
{
  guint64 base;
  guint64 length;
  gint device;
  guint32 handle_types;
  guint32 tag_id;
  const char *tag;
};

/**
 * MemresSegmentEvent:
 * @MEMRES_SEGMENT_MAPPED: the segment is mapped and usable; it is in the lookup index from before
 *   the event until after its %MEMRES_SEGMENT_UNMAPPING
 * @MEMRES_SEGMENT_GROWN: the segment grew in place: same base, @length is the new length, the
 *   callback's @previous_length the old one (the bytes after it are new)
 * @MEMRES_SEGMENT_UNMAPPING: the segment is about to be unmapped: every callback returns before
 *   the driver unmaps it (still mapped, still found by memres_lookup() while they run); no event
 *   follows for it
 *
 * What happened to a segment. A segment is told as mapped once, may grow any number of times,
 * and is told as about to be unmapped once, in that order. A shrink, or a move to another
 * address (a `vmm` buffer grown where the range after it is taken), is told as the old segment
 * about to be unmapped, then the new one mapped. A failed unmap that leaves the memory mapped is
 * told as the segment mapped again. Values are appended only.
 *
 * Since: 2.0
 */
typedef enum
{
  MEMRES_SEGMENT_MAPPED,
  MEMRES_SEGMENT_GROWN,
  MEMRES_SEGMENT_UNMAPPING,
} MemresSegmentEvent;

/**
 * MemresSegmentFunc:
 * @mr: the resource whose segment it is (transfer none): the layer that raised the event, which
 *   may be below the one subscribed to (memres_resource_subscribe_segments())
 * @event: what happened
 * @segment: the segment (transfer none, valid during the call; for %MEMRES_SEGMENT_GROWN with
 *   its new length)
 * @previous_length: for %MEMRES_SEGMENT_GROWN the length before, in bytes; 0 for the other
 *   events
 * @user_data: the data given to memres_resource_subscribe_segments()
 *
 * A subscriber's callback. It runs on the thread that mapped, grew or unmapped the segment
 * (inside the allocate, close, resize, trim or finalize that did), with no memres lock held: it
 * may call any memres function, including memres_lookup(), allocations from other resources,
 * and subscribing or unsubscribing. It must not allocate from or close buffers of the resource
 * whose event it is handling when that could map or unmap a segment of that same resource on
 * another thread that it then waits for. Keep it short: the allocation or close waits for it.
 * Events raised while @mr is being finalized (a cache giving its last chunks back) come with
 * its last reference gone: do not memres_resource_ref() it then.
 *
 * Since: 2.0
 */
typedef void (*MemresSegmentFunc) (MemresResource *mr, MemresSegmentEvent event,
                                   const MemresSegment *segment, guint64 previous_length,
                                   gpointer user_data);

typedef struct _MemresLookupInfo MemresLookupInfo;

/**
 * MemresLookupInfo:
 * @resource: the resource whose segment holds the address (transfer none: valid as long as
 *   the memory at the address stays allocated; memres_resource_ref() it to keep it longer)
 * @segment: a copy of the segment
 * @offset: the address's offset from the segment's base, in bytes
 *
 * What memres_lookup() found. Frozen layout (part of the ABI).
 *
 * Since: 2.0
 */
struct _MemresLookupInfo
{
  MemresResource *resource;
  MemresSegment segment;
  guint64 offset;
};

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-segments. */
guint memres_resource_subscribe_segments (MemresResource *mr, MemresSegmentFunc func,
                                          gpointer user_data, GDestroyNotify destroy,
                                          GError **error);
gboolean memres_resource_unsubscribe_segments (MemresResource *mr, guint id, GError **error);
gboolean memres_lookup (gconstpointer ptr, MemresLookupInfo *info);

G_END_DECLS
