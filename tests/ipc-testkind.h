/* ipc-testkind.h: an IPC-enabled kind on host memory, registered from inside a test program, for
 * tests of the core's descriptor and import paths without a driver.
 *
 * An exporter allocates host memory; its export data is the allocation's address (8 bytes) and
 * size (8 bytes), then zeros. An importer checks export data as a driver would (the zeros, and a
 * live allocation of that size) and "maps" the whole allocation at its own address. Mappings
 * follow the driver's rules for pool pointers: importing an allocation that is already mapped
 * returns the same address (one mapping, however many imports), and the first unmap ends the
 * mapping. The kind counts its slot calls (mt_ipc_kind), so that a test sees exactly when the
 * core reaches plugin code. */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

/* Counts of the kind's slot calls since the program started; read them with g_atomic_int_get(). */
typedef struct
{
  gint pools;             /* init: resources made, exporters and importers */
  gint handle_imports;    /* import_handle */
  gint maps;              /* import_buffer calls that succeeded: mappings made */
  gint unmaps;            /* deallocate on an importer: mappings ended */
  gint finalized_imports; /* finalize of an importer */
  gint violations;        /* unmaps of what was not mapped or is still held (mt_ipc_kind_hold) */
} MtIpcKindCounts;

extern MtIpcKindCounts mt_ipc_kind;

/* Registers the kind as @name, its pools on the device of UUID @uuid (in handles and
 * descriptors). Once per program. */
void mt_ipc_kind_register (const char *name, const guint8 uuid[MEMRES_IPC_ID_SIZE]);

/* The test holds one more (@delta 1) or one fewer (-1) open import of the allocation at
 * @address (an exporter's, still allocated). Holding one when it is not mapped is a violation;
 * so is an unmap of it while the test holds any. */
void mt_ipc_kind_hold (guint64 address, gint delta);

G_END_DECLS
