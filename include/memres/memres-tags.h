/* memres - CUDA memory resources
 * memres-tags.h: tags, short names that say which part of a program an allocation is for: a
 * thread-local scope stack of them, the tag a device or a stream gives the allocations made on it
 * when the thread has none, the tag of a buffer, and the counts of each tag in the layers that
 * count (MEMRES_KIND_COUNTED: `stats`). Full documentation: the reference
 * (share/gtk-doc/html/memres), memres-tags, and docs/tags.md. All Since: 2.0. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-tags
 * @title: Tags
 * @short_description: which part of a program an allocation is for, and counts per tag
 * @section_id: memres-memres-tags
 *
 * A tag is a short name (`"kv-cache"`, `"weights"`) that an allocation carries. The calling
 * thread's scope stack gives it (memres_tag_push(), memres_tag_pop(), or a #MemresTagScope that
 * closes itself); when the thread has none, the default of the stream or of the device does
 * (memres_tag_set_stream_default(), memres_tag_set_device_default()). A buffer keeps the tag it
 * was allocated under (memres_buffer_get_tag()); layers that count (%MEMRES_KIND_COUNTED: the
 * `stats` adaptor) count each tag's bytes and allocations (#MemresTagCounts,
 * memres_resource_get_tag_counts()), and memres-sleep puts all buffers of a tag to sleep.
 *
 * |[<!-- language="C" -->
 * {
 *   g_autoptr (MemresTagScope) scope = memres_tag_scope_begin ("kv-cache", &error);
 *
 *   buf = memres_resource_allocate (mr, size, stream, &error);  // tagged "kv-cache"
 * }  // the scope ends here
 * ]|
 *
 * The scope stack is per thread (no lock); every function is thread-safe. Errors are in the
 * %MEMRES_TAG_ERROR domain. See also docs/tags.md in the source tree.
 */

/**
 * MEMRES_TAG_NAME_MAX:
 *
 * The most bytes of a tag's name (without the terminating NUL).
 *
 * Since: 2.0
 */
#define MEMRES_TAG_NAME_MAX 63

/**
 * MEMRES_TAGS_MAX:
 *
 * How many distinct tags a process can have: each distinct name is interned once, at its first
 * use, and kept for the life of the process with its own counters in every counted layer. The
 * name after the last is refused with %MEMRES_TAG_ERROR_TOO_MANY (nothing is counted under a
 * tag that could not be had).
 *
 * Since: 2.0
 */
#define MEMRES_TAGS_MAX 63

/**
 * MEMRES_TAG_DEPTH_MAX:
 *
 * How deep one thread's scope stack can go; memres_tag_push() past it fails with
 * %MEMRES_TAG_ERROR_TOO_DEEP.
 *
 * Since: 2.0
 */
#define MEMRES_TAG_DEPTH_MAX 64

/**
 * MEMRES_TAG_ERROR:
 *
 * Error domain of tags. Codes are #MemresTagError values.
 *
 * Since: 2.0
 */
#define MEMRES_TAG_ERROR (memres_tag_error_quark ())

/**
 * MemresTagError:
 * @MEMRES_TAG_ERROR_INVALID: a name that cannot be a tag: empty, longer than
 *   %MEMRES_TAG_NAME_MAX bytes, not valid UTF-8, or with a control character
 * @MEMRES_TAG_ERROR_TOO_MANY: %MEMRES_TAGS_MAX distinct tags exist already
 * @MEMRES_TAG_ERROR_TOO_DEEP: the thread's scope stack holds %MEMRES_TAG_DEPTH_MAX tags already
 * @MEMRES_TAG_ERROR_EMPTY: a pop on a thread whose scope stack is empty
 * @MEMRES_TAG_ERROR_MISMATCH: a pop naming another tag than the innermost one (the stack is
 *   left as it was)
 * @MEMRES_TAG_ERROR_UNKNOWN: a name that was never used as a tag (it has no counts)
 *
 * The codes of the %MEMRES_TAG_ERROR domain: a bad tag name, and the misuse of a thread's scope
 * stack. Values are only appended.
 *
 * Since: 2.0
 */
typedef enum
{
  MEMRES_TAG_ERROR_INVALID,
  MEMRES_TAG_ERROR_TOO_MANY,
  MEMRES_TAG_ERROR_TOO_DEEP,
  MEMRES_TAG_ERROR_EMPTY,
  MEMRES_TAG_ERROR_MISMATCH,
  MEMRES_TAG_ERROR_UNKNOWN,
} MemresTagError;

GQuark memres_tag_error_quark (void);

typedef struct _MemresTagCounts MemresTagCounts;

/**
 * MemresTagCounts:
 * @bytes_current: bytes of the tag's buffers open now
 * @bytes_peak: the most bytes open at once since the layer's creation or the tag's last reset
 *   (memres_resource_reset_tag_peak(), memres_resource_reset_counts())
 * @bytes_total: bytes of the tag's allocations since then
 * @count_current: the tag's buffers open now
 * @count_peak: the most of them open at once
 * @count_total: the tag's allocations since then
 *
 * What a counted layer counted for one tag (memres_resource_get_tag_counts()).
 *
 * Since: 2.0
 */
struct _MemresTagCounts
{
  guint64 bytes_current;
  guint64 bytes_peak;
  guint64 bytes_total;
  guint64 count_current;
  guint64 count_peak;
  guint64 count_total;
};

/* The scope stack of the calling thread */
gboolean memres_tag_push (const char *tag, GError **error);
gboolean memres_tag_pop (const char *tag, GError **error);
const char *memres_tag_get_current (void);
gboolean memres_tag_check_name (const char *tag, GError **error);
GStrv memres_tag_list (void);

/**
 * MemresTagScope:
 *
 * A scope opened by memres_tag_scope_begin(), closed by memres_tag_scope_end(): declared
 * `g_autoptr (MemresTagScope)`, it is closed when the variable goes out of scope.
 *
 * Since: 2.0
 */
typedef struct _MemresTagScope MemresTagScope;

MemresTagScope *memres_tag_scope_begin (const char *tag, GError **error);
void memres_tag_scope_end (MemresTagScope *scope);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MemresTagScope, memres_tag_scope_end)

/* Defaults: the tag of allocations whose thread has no scope */
gboolean memres_tag_set_device_default (gint device, const char *tag, GError **error);
gboolean memres_tag_set_stream_default (MemresStream stream, const char *tag, GError **error);

/* A buffer's tag (a kind's slot: memres_allocation_get_tag(), memres-plugin.h) */
const char *memres_buffer_get_tag (MemresBuffer *buf);

/* Counts per tag of a counted layer (MEMRES_KIND_COUNTED) */
gboolean memres_resource_get_tag_counts (MemresResource *mr, const char *tag,
                                         MemresTagCounts *counts, GError **error);
GStrv memres_resource_list_tags (MemresResource *mr, GError **error);
gboolean memres_resource_reset_tag_peak (MemresResource *mr, const char *tag, GError **error);

G_END_DECLS
