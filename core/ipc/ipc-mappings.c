/* memres - CUDA memory resources
 * ipc-mappings.c: the table of one resource's imported buffer mappings, keyed by the driver's
 * 64-byte export data. Every import and every close of an imported buffer goes through it, so
 * it is built for that:
 *  - open addressing with linear probing, no allocation per lookup; each slot holds the hash
 *    beside the record, so a probe reads a record only when the hashes are equal;
 *  - a mapping that is unmapped (its last buffer closed) is retired, not removed: its record
 *    stays in its slot with no users. The close touches the record only, never the slot array,
 *    and importing the same buffer again (a ring of buffers shared between two processes, say)
 *    revives the record in place. Retired records are dropped when the table is rebuilt, which
 *    happens when live and retired records together fill half the slots: it keeps the live
 *    ones only and doubles the slots when those alone fill a quarter, so the rebuild costs O(1)
 *    per insertion, amortized, and the table never shrinks;
 *  - records are 64-byte aligned (what a close touches is one cache line) and recycled through
 *    a free list.
 * (An index by mapped address as well, against forged export data that the driver maps to an
 * allocation mapped already, cost 17 ns per import + close once the working set left the
 * cache, measured with 4096 buffers in flight; forged export data can crash the driver anyway:
 * see docs/ipc.md.)
 *
 * Every function but init and clear is called with @t->lock held. */
#include <stdlib.h>
#include <string.h>

#include "ipc-private.h"

#define MIN_SLOTS 16

void
_memres_ipc_mappings_init (MemresIpcMappings *t)
{
  memset (t, 0, sizeof *t);
  g_mutex_init (&t->lock);
}

/* Called when the resource is finalized: every buffer (and so every live mapping) is gone. */
void
_memres_ipc_mappings_clear (MemresIpcMappings *t)
{
  g_warn_if_fail (t->n_mappings == 0);
  if (t->slots != NULL)
    for (gsize i = 0; i <= t->mask; i++)
      g_free (t->slots[i].mapping);
  while (t->free_list != NULL)
    {
      MemresIpcMapping *next = t->free_list->next_free;
      g_free (t->free_list);
      t->free_list = next;
    }
  g_free (t->slots);
  t->slots = NULL;
  g_mutex_clear (&t->lock);
}

/* A 64-bit hash of the export data: the eight words weighted by distinct odd constants
 * (independent multiplies, no chain through every word: this runs on every import), then
 * MurmurHash3's 64-bit finalizer, so that every input bit reaches the low bits the table
 * uses. A changed word always changes the sum (odd weights), and the finalizer is a bijection.
 * Only keys of allocations the driver did import are ever stored, so a peer cannot fill the
 * table with crafted collisions. */
guint64
_memres_ipc_mappings_hash (const guint8 key[MEMRES_EXPORT_DATA_SIZE])
{
  static const guint64 weights[MEMRES_EXPORT_DATA_SIZE / 8] = {
    G_GUINT64_CONSTANT (0x9e3779b97f4a7c15), G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9),
    G_GUINT64_CONSTANT (0x94d049bb133111eb), G_GUINT64_CONSTANT (0xd6e8feb86659fd93),
    G_GUINT64_CONSTANT (0xa0761d6478bd642f), G_GUINT64_CONSTANT (0xe7037ed1a0b428db),
    G_GUINT64_CONSTANT (0x8ebc6af09c88c6e3), G_GUINT64_CONSTANT (0x589965cc75374cc3),
  };
  guint64 h = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (weights); i++)
    {
      guint64 w;

      memcpy (&w, key + 8 * i, 8);
      h += w * weights[i];
    }
  h ^= h >> 33;
  h *= G_GUINT64_CONSTANT (0xff51afd7ed558ccd);
  h ^= h >> 33;
  h *= G_GUINT64_CONSTANT (0xc4ceb9fe1a85ec53);
  h ^= h >> 33;
  return h;
}

/* The record of @key, live (n_users > 0) or retired (n_users == 0), or NULL. */
MemresIpcMapping *
_memres_ipc_mappings_lookup (const MemresIpcMappings *t, const guint8 key[MEMRES_EXPORT_DATA_SIZE],
                             guint64 hash)
{
  if (t->slots == NULL)
    return NULL;
  for (gsize i = hash & t->mask;; i = (i + 1) & t->mask)
    {
      const MemresIpcSlot *slot = &t->slots[i];

      if (slot->mapping == NULL)
        return NULL;
      if (slot->hash == hash
          && memcmp (slot->mapping->export_data, key, MEMRES_EXPORT_DATA_SIZE) == 0)
        return slot->mapping;
    }
}

static void
place (MemresIpcSlot *slots, gsize mask, guint64 hash, MemresIpcMapping *m)
{
  gsize i = hash & mask;

  while (slots[i].mapping != NULL)
    i = (i + 1) & mask;
  slots[i].hash = hash;
  slots[i].mapping = m;
}

/* Makes room for one more record: a new slot array with the live records only (the retired
 * ones go to the free list), twice as large when they fill a quarter of the current one. */
static void
rebuild (MemresIpcMappings *t)
{
  gsize n_slots = t->slots == NULL ? MIN_SLOTS : t->mask + 1;
  MemresIpcSlot *slots;

  while (4 * (t->n_mappings + 1) > n_slots)
    n_slots *= 2;
  slots = g_new0 (MemresIpcSlot, n_slots);
  if (t->slots != NULL)
    for (gsize i = 0; i <= t->mask; i++)
      {
        MemresIpcMapping *m = t->slots[i].mapping;

        if (m == NULL)
          continue;
        if (m->n_users > 0)
          place (slots, n_slots - 1, t->slots[i].hash, m);
        else
          {
            m->next_free = t->free_list;
            t->free_list = m;
          }
      }
  g_free (t->slots);
  t->slots = slots;
  t->mask = n_slots - 1;
  t->n_retired = 0;
}

static void
count_live (MemresIpcMappings *t, const MemresAllocation *alloc)
{
  t->n_mappings++;
  t->mapped_bytes += alloc->size;
  t->mapped_high = MAX (t->mapped_high, t->mapped_bytes);
}

/* Adds a live mapping of @exported (its export data is the key, which must not be in @t yet,
 * live or retired) that maps @alloc, with one user. */
MemresIpcMapping *
_memres_ipc_mappings_add (MemresIpcMappings *t, guint64 hash, const MemresBufferExport *exported,
                          const MemresAllocation *alloc)
{
  MemresIpcMapping *m;

  if (t->slots == NULL || 2 * (t->n_mappings + t->n_retired + 1) > t->mask + 1)
    rebuild (t);
  m = t->free_list;
  if (m != NULL)
    t->free_list = m->next_free;
  else if (posix_memalign ((gpointer *) &m, 64, sizeof *m) != 0)
    g_error ("out of memory: an IPC mapping record of %" G_GSIZE_FORMAT " bytes", sizeof *m);
  m->alloc = *alloc;
  m->n_users = 1;
  m->next_free = NULL;
  m->waits = NULL;
  memcpy (m->export_data, exported->export_data, MEMRES_EXPORT_DATA_SIZE);
  place (t->slots, t->mask, hash, m);
  count_live (t, alloc);
  return m;
}

/* @m (live in @t, its last user gone, its waits gone) was unmapped: it stays in its slot,
 * retired, until the same export data is imported again or the table is rebuilt. */
void
_memres_ipc_mappings_retire (MemresIpcMappings *t, MemresIpcMapping *m)
{
  g_warn_if_fail (m->n_users == 0 && m->waits == NULL);
  t->n_mappings--;
  t->n_retired++;
  t->mapped_bytes -= m->alloc.size;
}

/* Retired @m (found by _memres_ipc_mappings_lookup()) maps its export data again, at @alloc,
 * with one user. */
void
_memres_ipc_mappings_revive (MemresIpcMappings *t, MemresIpcMapping *m,
                             const MemresAllocation *alloc)
{
  g_warn_if_fail (m->n_users == 0);
  m->alloc = *alloc;
  m->n_users = 1;
  t->n_retired--;
  count_live (t, alloc);
}
