/* test-abi.c: the record of the plugin ABI.
 *
 * Every public struct of memres-plugin.h, memres-types.h, memres-registry.h, memres-ipc.h and
 * memres-cuda.h, with its size and the offset of every field as they are on x86_64 (LP64), the
 * signature of every ops slot, the values of every public enum and constant, and the order of
 * the driver table. These numbers are hard-coded on purpose: this test fails whenever someone
 * changes a layout, which would break every plugin already built.
 *
 * Updating it on an intentional ABI change:
 *  - A new minor (appending): add the new field, slot or driver entry to the record below
 *    (new offsets only; the old ones must not move), bump the expected MEMRES_PLUGIN_ABI_MINOR
 *    (and MEMRES_RESOURCE_OPS_VERSION for new slots) in /abi/version, and the struct sizes;
 *    the package version's MINOR in meson.build follows (/abi/package-version).
 *    Any other number changing means the change is not an append: make it one, or
 *  - a new major: rewrite the record from the new headers, bump the expected
 *    MEMRES_PLUGIN_ABI_MAJOR, and say so in the release notes (every plugin must be rebuilt).
 * The record is for x86_64 only; elsewhere the tests skip. */

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__x86_64__) && defined(__LP64__)
#define ABI_RECORDED 1
#else
#define ABI_RECORDED 0
#endif

#define SKIP_UNLESS_RECORDED()                                                                     \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (!ABI_RECORDED)                                                                             \
      {                                                                                            \
        g_test_skip ("the ABI record is for x86_64 only");                                         \
        return;                                                                                    \
      }                                                                                            \
  }                                                                                                \
  G_STMT_END

#define ASSERT_SIZE(type, n)          g_assert_cmpuint (sizeof (type), ==, (n))
#define ASSERT_OFFSET(type, field, n) g_assert_cmpuint (offsetof (type, field), ==, (n))
#define FIELD_TYPE(type, field)       __typeof__ (((type *) 0)->field)
#define ASSERT_FIELD_TYPE(type, field, expected)                                                   \
  g_assert_true (__builtin_types_compatible_p (FIELD_TYPE (type, field), expected))

static void
test_version (void)
{
  /* 2.0: the IPC slots in their own table (MemresIpcOps, MemresKindInfo.ipc) */
  g_assert_cmpint (MEMRES_PLUGIN_ABI_MAJOR, ==, 2);
  g_assert_cmpint (MEMRES_PLUGIN_ABI_MINOR, ==, 0);
  /* counted again from 1 in ABI 2; 2: at_fork appended; 3: explain_oom; 4: snapshot; 5: sleep
   * and wake */
  g_assert_cmpint (MEMRES_RESOURCE_OPS_VERSION, ==, 5);
  /* 2: the fabric chunk slots; 3: the fabric pool handle slots */
  g_assert_cmpint (MEMRES_IPC_OPS_VERSION, ==, 3);
}

/* The package version is MAJOR.MINOR.MICRO with MAJOR.MINOR the plugin ABI ("Versions" in
 * README.md), in the headers and in the library loaded at run time. */
static void
test_package_version (void)
{
  g_autofree char *prefix
      = g_strdup_printf ("%d.%d.", MEMRES_PLUGIN_ABI_MAJOR, MEMRES_PLUGIN_ABI_MINOR);

  g_assert_cmpint (MEMRES_MAJOR_VERSION, ==, MEMRES_PLUGIN_ABI_MAJOR);
  g_assert_cmpint (MEMRES_MINOR_VERSION, ==, MEMRES_PLUGIN_ABI_MINOR);
  g_assert_true (g_str_has_prefix (MEMRES_VERSION_STRING, prefix));
  g_assert_true (g_str_has_prefix (memres_get_version (), prefix));
}

static void
test_plugin_desc (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresPluginDesc, 40);
  ASSERT_OFFSET (MemresPluginDesc, abi_major, 0);
  ASSERT_OFFSET (MemresPluginDesc, abi_minor, 4);
  ASSERT_OFFSET (MemresPluginDesc, struct_size, 8);
  ASSERT_OFFSET (MemresPluginDesc, reserved, 12);
  ASSERT_OFFSET (MemresPluginDesc, name, 16);
  ASSERT_OFFSET (MemresPluginDesc, description, 24);
  ASSERT_OFFSET (MemresPluginDesc, init, 32);
  ASSERT_FIELD_TYPE (MemresPluginDesc, abi_major, guint32);
  ASSERT_FIELD_TYPE (MemresPluginDesc, abi_minor, guint32);
  ASSERT_FIELD_TYPE (MemresPluginDesc, struct_size, guint32);
  ASSERT_FIELD_TYPE (MemresPluginDesc, init, gboolean (*) (MemresPlugin *, GError **));
}

/* What MEMRES_PLUGIN_DEFINE() produces: the macro is part of the ABI as much as the struct. */
static gboolean
abi_record_init (MemresPlugin *plugin, GError **error)
{
  return TRUE;
}

MEMRES_PLUGIN_DEFINE (abirecord, "the ABI record's own descriptor", abi_record_init)

static void
test_plugin_define (void)
{
  const MemresPluginDesc *desc = memres_plugin_abirecord_get_desc ();

  g_assert_nonnull (desc);
  g_assert_true (desc == memres_plugin_abirecord_get_desc ());
  g_assert_cmpuint (desc->abi_major, ==, MEMRES_PLUGIN_ABI_MAJOR);
  g_assert_cmpuint (desc->abi_minor, ==, MEMRES_PLUGIN_ABI_MINOR);
  g_assert_cmpuint (desc->struct_size, ==, sizeof (MemresPluginDesc));
  g_assert_cmpuint (desc->reserved, ==, 0);
  g_assert_cmpstr (desc->name, ==, "abirecord");
  g_assert_cmpstr (desc->description, ==, "the ABI record's own descriptor");
  g_assert_true (desc->init == abi_record_init);
}

/* Since 1.2: the ELF note of MEMRES_PLUGIN_DEFINE, read by the loader before it opens a file. */
static void
test_plugin_note (void)
{
  ASSERT_SIZE (MemresPluginNote, 60);
  ASSERT_OFFSET (MemresPluginNote, namesz, 0);
  ASSERT_OFFSET (MemresPluginNote, descsz, 4);
  ASSERT_OFFSET (MemresPluginNote, type, 8);
  ASSERT_OFFSET (MemresPluginNote, owner, 12);
  ASSERT_OFFSET (MemresPluginNote, abi_major, 20);
  ASSERT_OFFSET (MemresPluginNote, abi_minor, 24);
  ASSERT_OFFSET (MemresPluginNote, name, 28);
  g_assert_cmpint (MEMRES_PLUGIN_NOTE_TYPE, ==, 1);
  g_assert_cmpuint (memres_plugin_note_abirecord_.namesz, ==, 7);
  g_assert_cmpuint (memres_plugin_note_abirecord_.descsz, ==, 40);
  g_assert_cmpstr (memres_plugin_note_abirecord_.owner, ==, "memres");
  g_assert_cmpuint (memres_plugin_note_abirecord_.abi_major, ==, MEMRES_PLUGIN_ABI_MAJOR);
  g_assert_cmpuint (memres_plugin_note_abirecord_.abi_minor, ==, MEMRES_PLUGIN_ABI_MINOR);
  g_assert_cmpstr (memres_plugin_note_abirecord_.name, ==, "abirecord");
}

static void
test_allocation (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresAllocation, 24);
  ASSERT_OFFSET (MemresAllocation, address, 0);
  ASSERT_OFFSET (MemresAllocation, size, 8);
  ASSERT_OFFSET (MemresAllocation, plugin_data, 16);
  ASSERT_FIELD_TYPE (MemresAllocation, address, guint64);
  ASSERT_FIELD_TYPE (MemresAllocation, size, gsize);
}

static void
test_resource_info (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresResourceInfo, 8);
  ASSERT_OFFSET (MemresResourceInfo, device, 0);
  ASSERT_OFFSET (MemresResourceInfo, flags, 4);
}

static void
test_buffer_export (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresBufferExport, 112);
  ASSERT_OFFSET (MemresBufferExport, pool_id, 0);
  ASSERT_OFFSET (MemresBufferExport, device_uuid, 16);
  ASSERT_OFFSET (MemresBufferExport, offset, 32);
  ASSERT_OFFSET (MemresBufferExport, size, 40);
  ASSERT_OFFSET (MemresBufferExport, export_data, 48);
  g_assert_cmpuint (sizeof (((MemresBufferExport *) 0)->export_data), ==, 64);
}

/* Since 1.1. */
static void
test_buffer_chunks (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresBufferChunks, 816);
  ASSERT_OFFSET (MemresBufferChunks, device_uuid, 0);
  ASSERT_OFFSET (MemresBufferChunks, handle_type, 16);
  ASSERT_OFFSET (MemresBufferChunks, location_type, 20);
  ASSERT_OFFSET (MemresBufferChunks, granularity, 24);
  ASSERT_OFFSET (MemresBufferChunks, size, 32);
  ASSERT_OFFSET (MemresBufferChunks, n_chunks, 40);
  ASSERT_OFFSET (MemresBufferChunks, reserved, 44);
  ASSERT_OFFSET (MemresBufferChunks, chunk_sizes, 48);
  ASSERT_OFFSET (MemresBufferChunks, fds, 560);
  ASSERT_FIELD_TYPE (MemresBufferChunks, handle_type, guint32);
  ASSERT_FIELD_TYPE (MemresBufferChunks, granularity, guint64);
  ASSERT_FIELD_TYPE (MemresBufferChunks, chunk_sizes, guint64[64]);
  ASSERT_FIELD_TYPE (MemresBufferChunks, fds, gint[64]);
}

static void
test_resource_ops (void)
{
  SKIP_UNLESS_RECORDED ();
  /* version 1 (ABI 2.0) */
  ASSERT_SIZE (MemresResourceOps, 144);
  ASSERT_OFFSET (MemresResourceOps, version, 0);
  ASSERT_OFFSET (MemresResourceOps, init, 8);
  ASSERT_OFFSET (MemresResourceOps, finalize, 16);
  ASSERT_OFFSET (MemresResourceOps, allocate, 24);
  ASSERT_OFFSET (MemresResourceOps, deallocate, 32);
  ASSERT_OFFSET (MemresResourceOps, query, 40);
  ASSERT_OFFSET (MemresResourceOps, get_stats, 48);
  ASSERT_OFFSET (MemresResourceOps, reset_stats, 56);
  ASSERT_OFFSET (MemresResourceOps, trim, 64);
  ASSERT_OFFSET (MemresResourceOps, set_access, 72);
  ASSERT_OFFSET (MemresResourceOps, get_access, 80);
  ASSERT_OFFSET (MemresResourceOps, resize, 88);
  ASSERT_OFFSET (MemresResourceOps, get_counters, 96);
  ASSERT_OFFSET (MemresResourceOps, at_fork, 104);     /* ops version 2 */
  ASSERT_OFFSET (MemresResourceOps, explain_oom, 112); /* ops version 3 */
  ASSERT_OFFSET (MemresResourceOps, snapshot, 120);    /* ops version 4 */
  ASSERT_OFFSET (MemresResourceOps, sleep, 128);       /* ops version 5 */
  ASSERT_OFFSET (MemresResourceOps, wake, 136);
}

/* What the explain_oom slot fills (appended only, within struct_size). */
static void
test_oom_figures (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresOomFigures, 80);
  ASSERT_OFFSET (MemresOomFigures, struct_size, 0);
  ASSERT_OFFSET (MemresOomFigures, request, 8);
  ASSERT_OFFSET (MemresOomFigures, cached, 16);
  ASSERT_OFFSET (MemresOomFigures, largest_free, 24);
  ASSERT_OFFSET (MemresOomFigures, limit, 32);
  ASSERT_OFFSET (MemresOomFigures, limit_used, 40);
  ASSERT_OFFSET (MemresOomFigures, refused, 48);
  ASSERT_OFFSET (MemresOomFigures, figures, 56);
  ASSERT_OFFSET (MemresOomFigures, remedy, 64);
  ASSERT_OFFSET (MemresOomFigures, verdict, 72);
  g_assert_cmpuint (MEMRES_OOM_UNKNOWN, ==, G_MAXUINT64);
}

/* The signatures of the slots: changing one breaks plugins as surely as moving it. */
static void
test_resource_ops_signatures (void)
{
  ASSERT_FIELD_TYPE (MemresResourceOps, version, guint32);
  ASSERT_FIELD_TYPE (MemresResourceOps, init,
                     gboolean (*) (MemresResource *, const MemresOptions *, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, finalize, void (*) (MemresResource *));
  ASSERT_FIELD_TYPE (
      MemresResourceOps, allocate,
      gboolean (*) (MemresResource *, gsize, MemresStream, MemresAllocation *, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, deallocate,
                     gboolean (*) (MemresResource *, MemresAllocation *, MemresStream, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, query, void (*) (MemresResource *, MemresResourceInfo *));
  ASSERT_FIELD_TYPE (MemresResourceOps, get_stats,
                     gboolean (*) (MemresResource *, MemresStats *, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, reset_stats, gboolean (*) (MemresResource *, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, trim, gboolean (*) (MemresResource *, gsize, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, set_access,
                     gboolean (*) (MemresResource *, const MemresAccessDesc *, guint, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, get_access,
                     gboolean (*) (MemresResource *, gint, MemresAccess *, GError **));
  ASSERT_FIELD_TYPE (
      MemresResourceOps, resize,
      gboolean (*) (MemresResource *, MemresAllocation *, gsize, MemresStream, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, get_counters,
                     gboolean (*) (MemresResource *, GVariantDict *, GError **));
  ASSERT_FIELD_TYPE (MemresResourceOps, at_fork, void (*) (MemresResource *, MemresForkPhase));
  ASSERT_FIELD_TYPE (MemresResourceOps, explain_oom,
                     void (*) (MemresResource *, MemresOomFigures *));
  ASSERT_FIELD_TYPE (MemresResourceOps, snapshot,
                     void (*) (MemresResource *, MemresSnapshotLayer *));
}

static void
test_ipc_ops (void)
{
  SKIP_UNLESS_RECORDED ();
  /* version 1 (ABI 2.0) */
  ASSERT_SIZE (MemresIpcOps, 88);
  ASSERT_OFFSET (MemresIpcOps, version, 0);
  ASSERT_OFFSET (MemresIpcOps, export_handle, 8);
  ASSERT_OFFSET (MemresIpcOps, import_handle, 16);
  ASSERT_OFFSET (MemresIpcOps, export_buffer, 24);
  ASSERT_OFFSET (MemresIpcOps, import_buffer, 32);
  ASSERT_OFFSET (MemresIpcOps, export_chunks, 40);
  ASSERT_OFFSET (MemresIpcOps, import_chunks, 48);
  ASSERT_OFFSET (MemresIpcOps, export_fabric_chunks, 56);
  ASSERT_OFFSET (MemresIpcOps, import_fabric_chunks, 64);
  ASSERT_OFFSET (MemresIpcOps, export_fabric_handle, 72);
  ASSERT_OFFSET (MemresIpcOps, import_fabric_handle, 80);
  ASSERT_SIZE (MemresFabricHandle, MEMRES_FABRIC_HANDLE_SIZE);
  G_STATIC_ASSERT (sizeof (MemresFabricHandle) == sizeof (CUmemFabricHandle));
}

static void
test_ipc_ops_signatures (void)
{
  ASSERT_FIELD_TYPE (MemresIpcOps, version, guint32);
  ASSERT_FIELD_TYPE (MemresIpcOps, export_handle,
                     gboolean (*) (MemresResource *, MemresIpcHandle **, GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, import_handle,
                     gboolean (*) (MemresResource *, const MemresIpcHandle *, GError **));
  ASSERT_FIELD_TYPE (
      MemresIpcOps, export_buffer,
      gboolean (*) (MemresResource *, const MemresAllocation *, MemresBufferExport *, GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, import_buffer,
                     gboolean (*) (MemresResource *, const MemresBufferExport *, MemresStream,
                                   MemresAllocation *, GError **));
  ASSERT_FIELD_TYPE (
      MemresIpcOps, export_chunks,
      gboolean (*) (MemresResource *, const MemresAllocation *, MemresBufferChunks *, GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, import_chunks,
                     gboolean (*) (MemresResource *, const MemresBufferChunks *, MemresStream,
                                   MemresAllocation *, GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, export_fabric_chunks,
                     gboolean (*) (MemresResource *, const MemresAllocation *, MemresBufferChunks *,
                                   MemresFabricHandle *, GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, import_fabric_chunks,
                     gboolean (*) (MemresResource *, const MemresBufferChunks *,
                                   const MemresFabricHandle *, MemresStream, MemresAllocation *,
                                   GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, export_fabric_handle,
                     gboolean (*) (MemresResource *, MemresFabricHandle *, GError **));
  ASSERT_FIELD_TYPE (MemresIpcOps, import_fabric_handle,
                     gboolean (*) (MemresResource *, const MemresIpcHandle *,
                                   const MemresFabricHandle *, GError **));
}

static void
test_kind_info (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresKindInfo, 72);
  ASSERT_OFFSET (MemresKindInfo, struct_size, 0);
  ASSERT_OFFSET (MemresKindInfo, name, 8);
  ASSERT_OFFSET (MemresKindInfo, description, 16);
  ASSERT_OFFSET (MemresKindInfo, options, 24);
  ASSERT_OFFSET (MemresKindInfo, n_options, 32);
  ASSERT_OFFSET (MemresKindInfo, ops, 40);
  ASSERT_OFFSET (MemresKindInfo, ipc, 48); /* 2.0 */
  ASSERT_OFFSET (MemresKindInfo, instance_size, 56);
  ASSERT_OFFSET (MemresKindInfo, flags, 64);
  ASSERT_FIELD_TYPE (MemresKindInfo, flags, MemresKindFlags);
  ASSERT_FIELD_TYPE (MemresKindInfo, ops, const MemresResourceOps *);
  ASSERT_FIELD_TYPE (MemresKindInfo, ipc, const MemresIpcOps *);
  ASSERT_FIELD_TYPE (MemresKindInfo, struct_size, gsize);
  ASSERT_FIELD_TYPE (MemresKindInfo, n_options, guint);
  ASSERT_FIELD_TYPE (MemresKindInfo, instance_size, gsize);
}

static void
test_option_spec (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresOptionSpec, 56);
  ASSERT_OFFSET (MemresOptionSpec, name, 0);
  ASSERT_OFFSET (MemresOptionSpec, type, 8);
  ASSERT_OFFSET (MemresOptionSpec, default_value, 16);
  ASSERT_OFFSET (MemresOptionSpec, doc, 24);
  ASSERT_OFFSET (MemresOptionSpec, choices, 32);
  ASSERT_OFFSET (MemresOptionSpec, min, 40);
  ASSERT_OFFSET (MemresOptionSpec, max, 48);
  ASSERT_FIELD_TYPE (MemresOptionSpec, choices, const char *const *);
  ASSERT_FIELD_TYPE (MemresOptionSpec, min, gint64);
  ASSERT_FIELD_TYPE (MemresOptionSpec, max, gint64);
}

static void
test_types (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresAccessDesc, 8);
  ASSERT_OFFSET (MemresAccessDesc, device, 0);
  ASSERT_OFFSET (MemresAccessDesc, access, 4);

  ASSERT_SIZE (MemresStats, 40);
  ASSERT_OFFSET (MemresStats, reserved_current, 0);
  ASSERT_OFFSET (MemresStats, reserved_high, 8);
  ASSERT_OFFSET (MemresStats, used_current, 16);
  ASSERT_OFFSET (MemresStats, used_high, 24);
  ASSERT_OFFSET (MemresStats, n_buffers, 32);

  ASSERT_SIZE (MemresBufferDescriptor, 160);
  ASSERT_OFFSET (MemresBufferDescriptor, bytes, 0);
  g_assert_cmpuint (G_ALIGNOF (MemresBufferDescriptor), ==, 1);

  /* since 2.0 */
  ASSERT_SIZE (MemresSegment, 40);
  ASSERT_OFFSET (MemresSegment, base, 0);
  ASSERT_OFFSET (MemresSegment, length, 8);
  ASSERT_OFFSET (MemresSegment, device, 16);
  ASSERT_OFFSET (MemresSegment, handle_types, 20);
  ASSERT_OFFSET (MemresSegment, tag_id, 24);
  ASSERT_OFFSET (MemresSegment, tag, 32);
  ASSERT_SIZE (MemresLookupInfo, 56);
  ASSERT_OFFSET (MemresLookupInfo, resource, 0);
  ASSERT_OFFSET (MemresLookupInfo, segment, 8);
  ASSERT_OFFSET (MemresLookupInfo, offset, 48);

  /* MemresStream is the driver's CUstream. */
  g_assert_true (__builtin_types_compatible_p (MemresStream, CUstream));
}

static void
test_constants (void)
{
  g_assert_cmpint (MEMRES_IPC_ID_SIZE, ==, 16);
  g_assert_cmpint (MEMRES_IPC_MAX_CHUNKS, ==, 64); /* since 1.1 */
  g_assert_cmpint (MEMRES_BUFFER_DESCRIPTOR_SIZE, ==, 160);
  g_assert_true (MEMRES_STREAM_LEGACY == (MemresStream) 0x1);
  g_assert_true (MEMRES_STREAM_LEGACY == CU_STREAM_LEGACY);
  g_assert_cmpint (MEMRES_FORK_PREPARE, ==, 0); /* since 2.0 */
  g_assert_cmpint (MEMRES_FORK_PARENT, ==, 1);
  g_assert_cmpint (MEMRES_FORK_CHILD, ==, 2);
}

static void
test_enums (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_SIZE (MemresMemoryFlags, 4);
  ASSERT_SIZE (MemresAccess, 4);
  ASSERT_SIZE (MemresOptionType, 4);
  ASSERT_SIZE (MemresError, 4);
  ASSERT_SIZE (MemresPluginError, 4);
  ASSERT_SIZE (MemresIpcFlags, 4);
  ASSERT_SIZE (MemresKindFlags, 4);

  g_assert_cmpint (MEMRES_MEMORY_DEVICE_ACCESSIBLE, ==, 1);
  g_assert_cmpint (MEMRES_MEMORY_HOST_ACCESSIBLE, ==, 2);
  g_assert_cmpint (MEMRES_MEMORY_IPC_ENABLED, ==, 4);
  g_assert_cmpint (MEMRES_MEMORY_IMPORTED, ==, 8);
  g_assert_cmpint (MEMRES_MEMORY_RESIZABLE, ==, 16);
  g_assert_cmpint (MEMRES_MEMORY_STREAM_ORDERED, ==, 32);
  g_assert_cmpint (MEMRES_MEMORY_MANAGED, ==, 64);         /* appended in ABI 1.2 */
  g_assert_cmpint (MEMRES_MEMORY_GRAPH, ==, 128);          /* appended in ABI 2.0 */
  g_assert_cmpint (MEMRES_MEMORY_FABRIC_HANDLES, ==, 256); /* appended in ABI 2.0 */

  g_assert_cmpint (MEMRES_CLOSE_DEFAULT, ==, 0);
  g_assert_cmpint (MEMRES_CLOSE_CALLER_ORDERED, ==, 1);

  /* Equal to the driver's values by design. */
  g_assert_cmpint (MEMRES_ACCESS_NONE, ==, 0);
  g_assert_cmpint (MEMRES_ACCESS_READ, ==, 1);
  g_assert_cmpint (MEMRES_ACCESS_READWRITE, ==, 3);
  g_assert_cmpint (MEMRES_ACCESS_NONE, ==, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  g_assert_cmpint (MEMRES_ACCESS_READ, ==, CU_MEM_ACCESS_FLAGS_PROT_READ);
  g_assert_cmpint (MEMRES_ACCESS_READWRITE, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  g_assert_cmpint (MEMRES_OPTION_BOOL, ==, 0);
  g_assert_cmpint (MEMRES_OPTION_INT, ==, 1);
  g_assert_cmpint (MEMRES_OPTION_SIZE, ==, 2);
  g_assert_cmpint (MEMRES_OPTION_ENUM, ==, 3);
  g_assert_cmpint (MEMRES_OPTION_STRING, ==, 4);
  g_assert_cmpint (MEMRES_OPTION_INT_LIST, ==, 5);

  g_assert_cmpint (MEMRES_KIND_ADAPTOR, ==, 1);            /* since 1.2 */
  g_assert_cmpint (MEMRES_KIND_PASSES_ALLOCATIONS, ==, 2); /* since 1.2 */
  g_assert_cmpint (MEMRES_KIND_OWN_USAGE, ==, 4);          /* since 1.2 */
  g_assert_cmpint (MEMRES_KIND_SEGMENTS, ==, 8);           /* since 2.0 */
  g_assert_cmpint (MEMRES_KIND_COUNTED, ==, 16);           /* since 2.0 */
  g_assert_cmpint (MEMRES_KIND_TAGGED, ==, 32);            /* since 2.0 */

  g_assert_cmpint (MEMRES_SEGMENT_MAPPED, ==, 0); /* since 2.0 */
  g_assert_cmpint (MEMRES_SEGMENT_GROWN, ==, 1);
  g_assert_cmpint (MEMRES_SEGMENT_UNMAPPING, ==, 2);
  g_assert_cmpint (MEMRES_BLOCK_USED, ==, 0);
  g_assert_cmpint (MEMRES_BLOCK_FREE, ==, 1);
  g_assert_cmpint (MEMRES_BLOCK_PENDING, ==, 2);
  g_assert_cmpint (MEMRES_BLOCK_WITHHELD, ==, 3);
  g_assert_cmpint (MEMRES_BLOCK_UNUSED, ==, 4);

  g_assert_cmpint (MEMRES_ERROR_FAILED, ==, 0);
  g_assert_cmpint (MEMRES_ERROR_INVALID_ARGUMENT, ==, 1);
  g_assert_cmpint (MEMRES_ERROR_NOT_FOUND, ==, 2);
  g_assert_cmpint (MEMRES_ERROR_EXISTS, ==, 3);
  g_assert_cmpint (MEMRES_ERROR_NOT_SUPPORTED, ==, 4);
  g_assert_cmpint (MEMRES_ERROR_OUT_OF_MEMORY, ==, 5);
  g_assert_cmpint (MEMRES_ERROR_CLOSED, ==, 6);
  g_assert_cmpint (MEMRES_ERROR_NO_DRIVER, ==, 7);
  g_assert_cmpint (MEMRES_ERROR_NO_DEVICE, ==, 8);
  g_assert_cmpint (MEMRES_ERROR_WRONG_DEVICE, ==, 9);
  g_assert_cmpint (MEMRES_ERROR_INVALID_DESCRIPTOR, ==, 10);
  g_assert_cmpint (MEMRES_ERROR_PERMISSION_DENIED, ==, 11);
  g_assert_cmpint (MEMRES_ERROR_FORKED, ==, 12); /* Since: 1.2 */

  g_assert_cmpint (MEMRES_PLUGIN_ERROR_MODULE, ==, 0);
  g_assert_cmpint (MEMRES_PLUGIN_ERROR_SYMBOL, ==, 1);
  g_assert_cmpint (MEMRES_PLUGIN_ERROR_ABI_MISMATCH, ==, 2);
  g_assert_cmpint (MEMRES_PLUGIN_ERROR_NAME_MISMATCH, ==, 3);
  g_assert_cmpint (MEMRES_PLUGIN_ERROR_INIT_FAILED, ==, 4);

  g_assert_cmpint (MEMRES_IPC_NONE, ==, 0);
  g_assert_cmpint (MEMRES_IPC_ALLOW_ANY_UID, ==, 1);
}

/* The driver table, in order: entries are only ever appended. */
static const char *const recorded_entries[] = {
  "cuInit",
  "cuDriverGetVersion",
  "cuGetErrorName",
  "cuGetErrorString",
  "cuDeviceGet",
  "cuDeviceGetCount",
  "cuDeviceGetName",
  "cuDeviceGetUuid",
  "cuDeviceGetAttribute",
  "cuDeviceTotalMem",
  "cuDeviceCanAccessPeer",
  "cuDevicePrimaryCtxRetain",
  "cuDevicePrimaryCtxRelease",
  "cuCtxGetCurrent",
  "cuCtxSetCurrent",
  "cuCtxPushCurrent",
  "cuCtxPopCurrent",
  "cuCtxGetDevice",
  "cuCtxSynchronize",
  "cuStreamCreate",
  "cuStreamDestroy",
  "cuStreamSynchronize",
  "cuStreamQuery",
  "cuStreamWaitEvent",
  "cuStreamIsCapturing",
  "cuStreamBeginCapture",
  "cuStreamEndCapture",
  "cuGraphDestroy",
  "cuEventCreate",
  "cuEventRecord",
  "cuEventSynchronize",
  "cuEventElapsedTime",
  "cuEventDestroy",
  "cuMemGetInfo",
  "cuMemAlloc",
  "cuMemFree",
  "cuMemHostAlloc",
  "cuMemFreeHost",
  "cuMemHostGetDevicePointer",
  "cuMemcpy",
  "cuMemcpyAsync",
  "cuMemcpyHtoDAsync",
  "cuMemcpyDtoHAsync",
  "cuMemsetD8Async",
  "cuMemsetD16Async",
  "cuMemsetD32Async",
  "cuPointerGetAttribute",
  "cuPointerGetAttributes",
  "cuDeviceGetDefaultMemPool",
  "cuDeviceGetMemPool",
  "cuMemGetMemPool",
  "cuMemPoolCreate",
  "cuMemPoolDestroy",
  "cuMemPoolGetAttribute",
  "cuMemPoolSetAttribute",
  "cuMemPoolTrimTo",
  "cuMemPoolSetAccess",
  "cuMemPoolGetAccess",
  "cuMemAllocFromPoolAsync",
  "cuMemAllocAsync",
  "cuMemFreeAsync",
  "cuMemPoolExportToShareableHandle",
  "cuMemPoolImportFromShareableHandle",
  "cuMemPoolExportPointer",
  "cuMemPoolImportPointer",
  "cuMemGetAllocationGranularity",
  "cuMemCreate",
  "cuMemRelease",
  "cuMemAddressReserve",
  "cuMemAddressFree",
  "cuMemMap",
  "cuMemUnmap",
  "cuMemSetAccess",
  "cuMemGetAccess",
  "cuMemExportToShareableHandle",
  "cuMemImportFromShareableHandle",
  "cuMemRetainAllocationHandle",
  "cuMemGetAllocationPropertiesFromHandle",
  "cuStreamGetCtx",              /* appended in ABI 1.1 */
  "cuGraphInstantiateWithFlags", /* appended in ABI 1.2 (graph) */
  "cuGraphLaunch",
  "cuGraphExecDestroy",
  "cuDeviceGraphMemTrim",
  "cuDeviceGetGraphMemAttribute",
  "cuDeviceSetGraphMemAttribute",
  /* appended in ABI 1.2 (managed memory) */
  "cuMemAllocManaged",
  "cuMemAdvise",
  "cuMemPrefetchAsync",
  "cuMemRangeGetAttribute",
  "cuMemPrefetchBatchAsync",
  "cuMemDiscardBatchAsync",
  "cuMemDiscardAndPrefetchBatchAsync",
  /* appended in ABI 2.0 */
  "cuEventQuery",
};

typedef struct
{
  const char *name;
  gsize offset;
} Entry;

#define ENTRY_OF_(name) { #name, offsetof (MemresCudaDriver, name) },
static const Entry table_entries[] = { MEMRES_CUDA_FOREACH_ENTRY (ENTRY_OF_) };
#undef ENTRY_OF_

static void
test_cuda_driver (void)
{
  SKIP_UNLESS_RECORDED ();
  ASSERT_OFFSET (MemresCudaDriver, struct_size, 0);
  ASSERT_OFFSET (MemresCudaDriver, driver_version, 4);
  ASSERT_OFFSET (MemresCudaDriver, path, 8);
  ASSERT_FIELD_TYPE (MemresCudaDriver, struct_size, guint32);
  ASSERT_FIELD_TYPE (MemresCudaDriver, driver_version, gint);

  g_assert_cmpuint (G_N_ELEMENTS (table_entries), ==, G_N_ELEMENTS (recorded_entries));
  for (gsize i = 0; i < G_N_ELEMENTS (recorded_entries); i++)
    {
      g_assert_cmpstr (table_entries[i].name, ==, recorded_entries[i]);
      g_assert_cmpuint (table_entries[i].offset, ==, 16 + 8 * i);
    }
  ASSERT_SIZE (MemresCudaDriver, 16 + 8 * G_N_ELEMENTS (recorded_entries));
  ASSERT_SIZE (MemresCudaDriver, 760);
}

/* The entries a driver must have: a longer list would refuse drivers that used to load. */
static void
test_cuda_driver_required (void)
{
  static const char *const recorded[] = {
    "cuInit",          "cuDriverGetVersion", "cuGetErrorName",       "cuGetErrorString",
    "cuDeviceGet",     "cuDeviceGetCount",   "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
    "cuCtxGetCurrent", "cuCtxSetCurrent",
  };
#define NAME_OF_(name) #name,
  static const char *const required[] = { MEMRES_CUDA_FOREACH_REQUIRED_ENTRY (NAME_OF_) };
#undef NAME_OF_

  g_assert_cmpuint (G_N_ELEMENTS (required), ==, G_N_ELEMENTS (recorded));
  for (gsize i = 0; i < G_N_ELEMENTS (recorded); i++)
    g_assert_cmpstr (required[i], ==, recorded[i]);
}

/* Loading plugins built for other ABI versions (tests/plugins/abi/). */

static gboolean
abi_plugins_available (void)
{
  if (g_getenv ("MEMRES_TEST_PLUGIN_DIR") == NULL)
    {
      g_test_skip ("MEMRES_TEST_PLUGIN_DIR is not set (run through meson test)");
      return FALSE;
    }
  return TRUE;
}

static gboolean
kind_is_listed (const char *name)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) kinds = memres_registry_list_kinds (&error);

  g_assert_no_error (error);
  for (guint i = 0; i < kinds->len; i++)
    if (g_strcmp0 (memres_kind_get_name (g_ptr_array_index (kinds, i)), name) == 0)
      return TRUE;
  return FALSE;
}

/* @name is refused with ABI_MISMATCH, by lookup and by resource creation, and never registers
 * its kind (its init, which would register it, does not run). */
static void
assert_refused (const char *name)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = NULL;
  g_autoptr (MemresResource) mr = NULL;

  kind = memres_registry_lookup (name, &error);
  g_assert_null (kind);
  g_assert_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH);
  g_assert_nonnull (strstr (error->message, name));
  g_clear_error (&error);

  /* Refused again on a second try: a failed load leaves nothing behind. */
  mr = memres_resource_new (name, &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH);

  g_assert_false (kind_is_listed (name));
}

static void
test_load_newer_minor (void)
{
  if (!abi_plugins_available ())
    return;
  assert_refused ("abinewer");
}

static void
test_load_newer_major (void)
{
  if (!abi_plugins_available ())
    return;
  assert_refused ("abimajor");
}

/* A plugin built for ABI 1.2 (the IPC slots in its ops table, which this core would read as
 * other slots) is refused from its note, before the module is opened. */
static void
test_load_older_major (void)
{
  if (!abi_plugins_available ())
    return;
  assert_refused ("abione");
  g_assert_null (g_getenv ("MEMRES_TEST_CONSTRUCTOR_RAN"));
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (MemresKind) kind = memres_registry_lookup ("abione", &error);

    g_assert_null (kind);
    g_assert_error (error, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH);
    g_assert_nonnull (strstr (error->message, "plugin ABI 1.2"));
  }
}

static void
test_load_older_minor (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  guint8 *p;

  if (!abi_plugins_available ())
    return;

  mr = mt_new_ok ("abiolder");
  g_assert_nonnull (mr);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "abiolder");
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  g_assert_true (memres_resource_is_host_accessible (mr));
  g_assert_true (kind_is_listed ("abiolder"));
  {
    g_autoptr (MemresKind) kind = memres_registry_lookup ("abiolder", &error);
    g_assert_no_error (error);
    g_assert_cmpstr (memres_kind_get_plugin_name (kind), ==, "abiolder");
    g_assert_true (g_str_has_suffix (memres_kind_get_plugin_path (kind), "libmemres-abiolder.so"));
  }

  buf = mt_alloc_ok (mr, 4096, NULL);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 4096);
  p = memres_buffer_get_pointer (buf);
  g_assert_nonnull (p);
  mt_fill_pattern (p, 4096, 7);
  mt_assert_pattern (p, 4096, 7);
  /* A kind without an IPC table has no chunk slots: the core treats them as missing. */
  {
    int sv[2];

    g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    close (sv[0]);
    close (sv[1]);
  }
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  const char *test_plugins = g_getenv ("MEMRES_TEST_PLUGIN_DIR");

  /* Before any memres call: the ABI test plugins live in tests/plugins/abi of the build tree. */
  if (test_plugins != NULL)
    {
      g_autofree char *abi_dir = g_build_filename (test_plugins, "abi", NULL);
      const char *path = g_getenv ("MEMRES_PLUGIN_PATH");
      g_autofree char *joined = path != NULL && path[0] != '\0'
                                    ? g_strjoin (G_SEARCHPATH_SEPARATOR_S, abi_dir, path, NULL)
                                    : g_strdup (abi_dir);
      g_setenv ("MEMRES_PLUGIN_PATH", joined, TRUE);
    }
  mt_init (&argc, &argv);

  g_test_add_func ("/abi/version", test_version);
  g_test_add_func ("/abi/package-version", test_package_version);
  g_test_add_func ("/abi/plugin-note", test_plugin_note);
  g_test_add_func ("/abi/plugin-desc/layout", test_plugin_desc);
  g_test_add_func ("/abi/plugin-desc/define", test_plugin_define);
  g_test_add_func ("/abi/allocation", test_allocation);
  g_test_add_func ("/abi/resource-info", test_resource_info);
  g_test_add_func ("/abi/buffer-export", test_buffer_export);
  g_test_add_func ("/abi/buffer-chunks", test_buffer_chunks);
  g_test_add_func ("/abi/resource-ops/layout", test_resource_ops);
  g_test_add_func ("/abi/resource-ops/signatures", test_resource_ops_signatures);
  g_test_add_func ("/abi/oom-figures/layout", test_oom_figures);
  g_test_add_func ("/abi/ipc-ops/layout", test_ipc_ops);
  g_test_add_func ("/abi/ipc-ops/signatures", test_ipc_ops_signatures);
  g_test_add_func ("/abi/kind-info", test_kind_info);
  g_test_add_func ("/abi/option-spec", test_option_spec);
  g_test_add_func ("/abi/types", test_types);
  g_test_add_func ("/abi/constants", test_constants);
  g_test_add_func ("/abi/enums", test_enums);
  g_test_add_func ("/abi/cuda-driver/layout", test_cuda_driver);
  g_test_add_func ("/abi/cuda-driver/required", test_cuda_driver_required);
  g_test_add_func ("/abi/load/newer-minor", test_load_newer_minor);
  g_test_add_func ("/abi/load/newer-major", test_load_newer_major);
  g_test_add_func ("/abi/load/older-major", test_load_older_major);
  g_test_add_func ("/abi/load/older-minor", test_load_older_minor);

  return g_test_run ();
}
