/* memres - CUDA memory resources
 * memres-registry.h: the registry of resource kinds and their option schemas. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-registry
 * @title: Kinds and the registry
 * @short_description: the resource kinds, found by name, and their option schemas
 * @section_id: memres-memres-registry
 *
 * A kind is a way of making memory (`host`, `dmr`, `vmm`, `pinned`, ...) or an adaptor layered
 * over another resource (`stats`, `track`, `cache`, ...), registered under its name by a plugin.
 * The registry finds a kind by name, loading its plugin from the search path on first use
 * (memres_registry_lookup(), memres_registry_get_search_path()), and lists every kind it can find
 * (memres_registry_list_kinds()); memres_resource_new() does the lookup for you.
 *
 * A #MemresKind describes itself: its name and description, the plugin it came from, its
 * #MemresKindFlags and its option schema, an array of #MemresOptionSpec that says which
 * `KEY=VALUE` options a spec string may give it and how each #MemresOptionType is written.
 *
 * |[<!-- language="C" -->
 * g_autoptr (MemresKind) kind = memres_registry_lookup ("dmr", &error);
 * guint n;
 * const MemresOptionSpec *opts = memres_kind_get_options (kind, &n);
 *
 * for (guint i = 0; i < n; i++)
 *   g_print ("%s: %s\n", opts[i].name, opts[i].doc);
 * ]|
 *
 * Kinds are reference counted and immutable once registered; every function here is
 * thread-safe (plugin loads are serialized).
 */

/**
 * MemresOptionType:
 * @MEMRES_OPTION_BOOL: `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`)
 * @MEMRES_OPTION_INT: a signed decimal integer within the option's @min..@max
 * @MEMRES_OPTION_SIZE: bytes, with an optional `B`, `KiB`, `MiB`, `GiB`, `TiB` or `PiB` suffix, or
 *   `max`
 * @MEMRES_OPTION_ENUM: one of the option's @choices
 * @MEMRES_OPTION_STRING: any text; in a spec string `\`, `,` and `>` are written `\\`, `\,`
 *   and `\>` (a backslash takes the next character literally, in any value)
 * @MEMRES_OPTION_INT_LIST: integers joined by `+` (for example `peers=1+2`), each within
 *   @min..@max; may be empty
 *
 * How the value of an option is written in a spec string and parsed; which
 * memres_options_get_*() getter reads it. The grammar of a spec is
 * `KIND[:KEY=VALUE[,KEY=VALUE]...]` per layer, layers joined by `>`; inside a value a backslash
 * takes the next character literally, so `path=/tmp/a\,b` is the value `/tmp/a,b`, and every
 * value of every type can be written. Values are appended only
 * (part of the plugin ABI).
 *
 * Since: 1.0
 */
typedef enum
{
  MEMRES_OPTION_BOOL,
  MEMRES_OPTION_INT,
  MEMRES_OPTION_SIZE,
  MEMRES_OPTION_ENUM,
  MEMRES_OPTION_STRING,
  MEMRES_OPTION_INT_LIST,
} MemresOptionType;

typedef struct _MemresOptionSpec MemresOptionSpec;

/**
 * MemresOptionSpec:
 * @name: the key, matching `[a-z][a-z0-9_]*`
 * @type: how the value is parsed
 * @default_value: the value used when the spec does not name the key, written as in a spec
 *   string (`"0"`, `"1GiB"`, `"true"`, one of @choices); it is validated when the kind is
 *   registered. %NULL means "unset" (memres_options_is_set() is %FALSE and getters return
 *   0/%NULL)
 * @doc: one line for `memres kinds` and for error messages
 * @choices: for %MEMRES_OPTION_ENUM, the %NULL-terminated list of accepted values; %NULL for
 *   other types
 * @min: for %MEMRES_OPTION_INT and %MEMRES_OPTION_INT_LIST, the smallest accepted value;
 *   ignored for other types
 * @max: for %MEMRES_OPTION_INT and %MEMRES_OPTION_INT_LIST, the largest accepted value;
 *   ignored for other types (a size limit is the kind's business: check it in init)
 *
 * One entry of a kind's option schema, an array that #MemresKindInfo points to; define it
 * `static const`. The core validates a spec against it before the init slot runs: an unknown
 * key or a bad value fails memres_resource_new() with %MEMRES_ERROR_INVALID_ARGUMENT naming the
 * key and what is valid, so init only reads values.
 *
 * Frozen layout: the core walks plugins' arrays with its own sizeof, so this struct cannot grow
 * within a major version (part of the plugin ABI).
 *
 * Since: 1.0
 */
struct _MemresOptionSpec
{
  const char *name;
  MemresOptionType type;
  const char *default_value;
  const char *doc;
  const char *const *choices;
  gint64 min;
  gint64 max;
};

/**
 * MemresKindFlags:
 * @MEMRES_KIND_ADAPTOR: the kind is an adaptor: it appears in a stack above another layer
 *   (`stats>host`), never last, and every instance has an upstream
 *   (memres_resource_get_upstream()) that the core created from the rest of the stack
 * @MEMRES_KIND_PASSES_ALLOCATIONS: (adaptors only) the adaptor hands the upstream's allocation
 *   records through unchanged: its allocate fills the buffer's record with
 *   memres_upstream_allocate() and its deallocate passes the same record down. Only such
 *   adaptors let the per-buffer slots they leave %NULL (export_buffer, export_chunks, resize)
 *   and export_handle pass through to the upstream; for the others those fail with
 *   %MEMRES_ERROR_NOT_SUPPORTED
 * @MEMRES_KIND_OWN_USAGE: the kind's get_stats slot sets used_current and used_high itself
 *   from what only it or its driver knows, so the core does not count the bytes of its
 *   buffers on the allocate/close hot path (it still counts the buffers). For kinds whose
 *   used bytes are not the sizes handed out: the driver pools' used memory (dmr, ipc, pinned,
 *   managed), graph memory allocated by launches (graph), a cache's blocks in use, the stats
 *   adaptor's exact counts. Without it (the usual case: host, vmm) the core counts them and
 *   the get_stats slot receives them in its #MemresStats: keep no used-byte counter of your
 *   own. Since: 1.2
 * @MEMRES_KIND_SEGMENTS: the kind raises segment events for the ranges it maps
 *   (memres_resource_raise_segment_event(), memres-segments.h) and its memory is found by
 *   memres_lookup(): `vmm`, `arena`, `cache`. Without it, memres_resource_subscribe_segments()
 *   fails with %MEMRES_ERROR_NOT_SUPPORTED (unless it passes allocations to a layer that has
 *   them) and memres_lookup() does not find its memory. Since: 2.0
 * @MEMRES_KIND_COUNTED: the core counts what each instance's allocate slot hands out and its
 *   deallocate slot takes back: bytes and allocations, current, peak and total, and allocations by
 *   size class, on per-thread stripes (no lock, no locked instruction), read with
 *   memres_resource_get_counts() and reset with memres_resource_reset_counts(). The kind keeps
 *   no counter of its own. An adaptor with this flag and %MEMRES_KIND_PASSES_ALLOCATIONS may leave
 *   both its allocate and deallocate slots %NULL: the core then passes each call to the upstream
 *   itself, as memres_upstream_allocate() and memres_upstream_deallocate() would (the `stats`
 *   adaptor is that and nothing else). The core clears %MEMRES_MEMORY_RESIZABLE of such an instance
 *   (a resize would change sizes behind the counts). Since: 2.0
 * @MEMRES_KIND_TAGGED: the kind's allocate and deallocate slots read the tag of the buffer they
 *   serve with memres_allocation_get_tag() (the `log` adaptor writes it): the core marks a tagged
 *   buffer's record for its slot calls through the layer, as it does for a counted one (an
 *   untagged buffer costs nothing more). Since: 2.0
 *
 * What a kind is, in #MemresKindInfo.flags. Values are appended only (part of the plugin
 * ABI).
 *
 * Since: 1.2
 */
typedef enum
{
  MEMRES_KIND_ADAPTOR = 1 << 0,
  MEMRES_KIND_PASSES_ALLOCATIONS = 1 << 1,
  MEMRES_KIND_OWN_USAGE = 1 << 2,
  MEMRES_KIND_SEGMENTS = 1 << 3,
  MEMRES_KIND_COUNTED = 1 << 4,
  MEMRES_KIND_TAGGED = 1 << 5,
} MemresKindFlags;

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-registry. */
GPtrArray *memres_registry_list_kinds (GError **error);
GPtrArray *memres_registry_list_kinds_full (GHashTable **failures, GError **error);
MemresKind *memres_registry_lookup (const char *name, GError **error);
gchar **memres_registry_get_search_path (void);
/* Since: 2.0 */
void memres_registry_set_plugin_dir (const char *dir);

MemresKind *memres_kind_ref (MemresKind *kind);
void memres_kind_unref (MemresKind *kind);
const char *memres_kind_get_name (MemresKind *kind);
const char *memres_kind_get_description (MemresKind *kind);
const char *memres_kind_get_plugin_name (MemresKind *kind);
const char *memres_kind_get_plugin_path (MemresKind *kind);
const MemresOptionSpec *memres_kind_get_options (MemresKind *kind, guint *n_options);
MemresKindFlags memres_kind_get_flags (MemresKind *kind);
const char *memres_option_type_to_string (MemresOptionType type);
gboolean memres_parse_size (const char *text, guint64 *bytes, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MemresKind, memres_kind_unref)

G_END_DECLS
