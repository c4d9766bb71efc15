/* test-ipc-mappings.c: the table of imported buffer mappings (core/ipc/ipc-mappings.c), against a
 * plain array as the model. Hashes are chosen by the test so that keys collide, probe runs
 * wrap around the end of the slot array, and rebuilds have to drop retired records from long
 * runs. */
#include <string.h>

#include "ipc/ipc-private.h"

#define N_KEYS 200

typedef struct
{
  MemresIpcMappings table;
  /* the model: key i has the record present[i] in the table (NULL: none), live when its
   * n_users is 1, retired when 0 */
  MemresIpcMapping *present[N_KEYS];
  gboolean live[N_KEYS];
} Fixture;

static void
make_key (guint i, MemresBufferExport *e)
{
  memset (e, 0, sizeof *e);
  memcpy (e->export_data, &i, sizeof i);
  e->export_data[63] = 0x5a;
}

/* The address key @i is mapped at. */
static guint64
address_of (guint i)
{
  return 0x10000 + (guint64) i * 4096;
}

/* Hash @i of a bucket scheme: @n_buckets distinct values, all near the end of the table so
 * that runs wrap. */
static guint64
forced_hash (guint i, guint n_buckets)
{
  return G_GUINT64_CONSTANT (0xfffffffffffffff0) + (i % n_buckets);
}

static void
assert_model (Fixture *f, guint n_buckets)
{
  gsize n_live = 0, n_retired = 0;
  guint64 bytes = 0;

  for (guint i = 0; i < N_KEYS; i++)
    {
      MemresBufferExport e;
      MemresIpcMapping *m;

      make_key (i, &e);
      m = _memres_ipc_mappings_lookup (&f->table, e.export_data, forced_hash (i, n_buckets));
      g_assert_true (m == f->present[i]);
      if (m == NULL)
        continue;
      g_assert_cmpmem (m->export_data, sizeof m->export_data, e.export_data, sizeof e.export_data);
      g_assert_cmpuint (m->n_users, ==, f->live[i] ? 1 : 0);
      if (f->live[i])
        {
          g_assert_cmpuint (m->alloc.address, ==, address_of (i));
          g_assert_cmpuint (m->alloc.size, ==, 1000 + i);
          bytes += 1000 + i;
          n_live++;
        }
      else
        n_retired++;
    }
  g_assert_cmpuint (f->table.n_mappings, ==, n_live);
  g_assert_cmpuint (f->table.n_retired, ==, n_retired);
  g_assert_cmpuint (f->table.mapped_bytes, ==, bytes);
}

/* A rebuild (n_retired back to 0) dropped every retired record. */
static void
forget_dropped (Fixture *f)
{
  if (f->table.n_retired != 0)
    return;
  for (guint i = 0; i < N_KEYS; i++)
    if (!f->live[i])
      f->present[i] = NULL;
}

static void
add (Fixture *f, guint i, guint n_buckets)
{
  MemresBufferExport e;
  MemresAllocation alloc = { address_of (i), 1000 + i, NULL };
  MemresIpcMapping *m;

  g_assert_null (f->present[i]);
  make_key (i, &e);
  m = _memres_ipc_mappings_add (&f->table, forced_hash (i, n_buckets), &e, &alloc);
  g_assert_cmpuint (m->n_users, ==, 1);
  forget_dropped (f);
  f->present[i] = m;
  f->live[i] = TRUE;
}

static void
retire (Fixture *f, guint i)
{
  g_assert_true (f->live[i]);
  f->present[i]->n_users = 0;
  _memres_ipc_mappings_retire (&f->table, f->present[i]);
  f->live[i] = FALSE;
}

static void
revive (Fixture *f, guint i)
{
  MemresAllocation alloc = { address_of (i), 1000 + i, NULL };

  g_assert_true (f->present[i] != NULL && !f->live[i]);
  _memres_ipc_mappings_revive (&f->table, f->present[i], &alloc);
  g_assert_cmpuint (f->present[i]->n_users, ==, 1);
  f->live[i] = TRUE;
}

/* Random imports (add or revive) and last closes (retire) of N_KEYS keys. */
static void
run_model (guint n_buckets, guint n_ops)
{
  Fixture f = { 0 };

  _memres_ipc_mappings_init (&f.table);
  g_assert_null (_memres_ipc_mappings_lookup (&f.table, (const guint8[64]){ 0 }, 0));
  for (guint op = 0; op < n_ops; op++)
    {
      guint i = (guint) g_test_rand_int_range (0, N_KEYS);

      if (f.live[i])
        retire (&f, i);
      else if (f.present[i] != NULL)
        revive (&f, i);
      else
        add (&f, i, n_buckets);
      assert_model (&f, n_buckets);
    }
  for (guint i = 0; i < N_KEYS; i++)
    if (f.live[i])
      {
        retire (&f, i);
        assert_model (&f, n_buckets);
      }
  g_assert_cmpuint (f.table.n_mappings, ==, 0);
  _memres_ipc_mappings_clear (&f.table); /* frees the retired records: valgrind checks */
}

/* Every key in one bucket: one long run. */
static void
test_one_bucket (void)
{
  run_model (1, 3000);
}

/* A few buckets next to each other: runs merge, and removal shifts entries of other buckets. */
static void
test_few_buckets (void)
{
  run_model (7, 5000);
}

/* Distinct hashes, real and forced: the growth path. */
static void
test_distinct (void)
{
  run_model (N_KEYS, 5000);
}

/* Importing the buffers of a ring again and again revives their records in place: no slot
 * array is allocated, and the table keeps its size. */
static void
test_reuse (void)
{
  Fixture f = { 0 };
  MemresIpcMapping *first;
  MemresIpcSlot *slots;
  gsize mask;

  _memres_ipc_mappings_init (&f.table);
  for (guint i = 0; i < 100; i++)
    add (&f, i, N_KEYS);
  slots = f.table.slots;
  mask = f.table.mask;
  g_assert_cmpuint (mask + 1, >=, 2 * 100);
  first = f.present[0];
  retire (&f, 0);
  revive (&f, 0);
  g_assert_true (f.present[0] == first);
  for (guint round = 0; round < 3; round++)
    {
      for (guint i = 0; i < 100; i++)
        retire (&f, i);
      assert_model (&f, N_KEYS);
      for (guint i = 0; i < 100; i++)
        revive (&f, i);
      assert_model (&f, N_KEYS);
    }
  g_assert_true (f.table.slots == slots);
  g_assert_cmpuint (f.table.mask, ==, mask);
  for (guint i = 0; i < 100; i++)
    retire (&f, i);
  _memres_ipc_mappings_clear (&f.table);
}

/* Ever new keys with few live at once (a long-running importer of short-lived buffers):
 * retired records are dropped by rebuilds, so the table stays at the size the live ones need
 * and the records are recycled. */
static void
test_churn (void)
{
  MemresIpcMappings t;
  MemresIpcMapping *live[10] = { NULL };
  gsize most_records = 0;

  _memres_ipc_mappings_init (&t);
  for (guint k = 0; k < 100000; k++)
    {
      MemresBufferExport e;
      MemresAllocation alloc = { address_of (k), 4096, NULL };
      MemresIpcMapping **m = &live[k % G_N_ELEMENTS (live)];

      if (*m != NULL)
        {
          (*m)->n_users = 0;
          _memres_ipc_mappings_retire (&t, *m);
        }
      memset (&e, 0, sizeof e);
      memcpy (e.export_data, &k, sizeof k);
      *m = _memres_ipc_mappings_add (&t, _memres_ipc_mappings_hash (e.export_data), &e, &alloc);
      most_records = MAX (most_records, t.n_mappings + t.n_retired);
    }
  g_assert_cmpuint (t.n_mappings, ==, G_N_ELEMENTS (live));
  g_assert_cmpuint (t.mapped_bytes, ==, G_N_ELEMENTS (live) * 4096);
  /* 10 live need 4 * 11 <= 64 slots; the table is rebuilt when half of them are used */
  g_assert_cmpuint (t.mask + 1, ==, 64);
  g_assert_cmpuint (most_records, ==, 32);
  for (guint i = 0; i < G_N_ELEMENTS (live); i++)
    {
      live[i]->n_users = 0;
      _memres_ipc_mappings_retire (&t, live[i]);
    }
  _memres_ipc_mappings_clear (&t);
}

/* Records held by @t: in its slots (live and retired) and on its free list. */
static gsize
count_records (const MemresIpcMappings *t)
{
  gsize n = 0;

  for (gsize i = 0; t->slots != NULL && i <= t->mask; i++)
    n += t->slots[i].mapping != NULL;
  for (const MemresIpcMapping *m = t->free_list; m != NULL; m = m->next_free)
    n++;
  return n;
}

/* A peak of many live mappings, all closed, then a long run of ever new keys with one live at a
 * time: the slot array keeps the size of the peak (it never shrinks) and the records never
 * outnumber half the slots, however many keys come; the peak's records are reused. Then the
 * peak's keys again: none of them is found (their records were dropped and reused for others). */
static void
test_peak_then_churn (void)
{
  enum
  {
    PEAK = 1000
  };
  MemresIpcMappings t;
  MemresIpcMapping *peak[PEAK], *live = NULL;
  gsize n_slots;

  _memres_ipc_mappings_init (&t);
  for (guint k = 0; k < PEAK; k++)
    {
      MemresBufferExport e;
      MemresAllocation alloc = { address_of (k), 4096, NULL };

      make_key (k, &e);
      peak[k]
          = _memres_ipc_mappings_add (&t, _memres_ipc_mappings_hash (e.export_data), &e, &alloc);
    }
  n_slots = t.mask + 1;
  g_assert_cmpuint (n_slots, ==, 4096); /* 4 * 1001 <= 4096 */
  g_assert_cmpuint (t.mapped_high, ==, PEAK * 4096);
  for (guint k = 0; k < PEAK; k++)
    {
      peak[k]->n_users = 0;
      _memres_ipc_mappings_retire (&t, peak[k]);
    }
  g_assert_cmpuint (t.n_retired, ==, PEAK);
  g_assert_cmpuint (t.mapped_bytes, ==, 0);
  g_assert_cmpuint (count_records (&t), ==, PEAK);

  for (guint k = PEAK; k < PEAK + 50000; k++)
    {
      MemresBufferExport e;
      MemresAllocation alloc = { address_of (k), 4096, NULL };

      if (live != NULL)
        {
          live->n_users = 0;
          _memres_ipc_mappings_retire (&t, live);
        }
      make_key (k, &e);
      live = _memres_ipc_mappings_add (&t, _memres_ipc_mappings_hash (e.export_data), &e, &alloc);
      g_assert_cmpuint (t.mask + 1, ==, n_slots);
      g_assert_cmpuint (t.n_mappings + t.n_retired, <=, n_slots / 2);
      if (k % 997 == 0)
        g_assert_cmpuint (count_records (&t), <=, n_slots / 2);
    }
  g_assert_cmpuint (count_records (&t), <=, n_slots / 2);
  g_assert_cmpuint (t.mapped_bytes, ==, 4096);
  g_assert_cmpuint (t.mapped_high, ==, PEAK * 4096);
  for (guint k = 0; k < PEAK; k++)
    {
      MemresBufferExport e;

      make_key (k, &e);
      g_assert_null (_memres_ipc_mappings_lookup (&t, e.export_data,
                                                  _memres_ipc_mappings_hash (e.export_data)));
    }
  live->n_users = 0;
  _memres_ipc_mappings_retire (&t, live);
  _memres_ipc_mappings_clear (&t); /* valgrind: every record freed once */
}

/* The hash depends on every word of the key. */
static void
test_hash (void)
{
  guint8 key[MEMRES_EXPORT_DATA_SIZE] = { 0 };
  guint64 base = _memres_ipc_mappings_hash (key);

  g_assert_cmpuint (_memres_ipc_mappings_hash (key), ==, base);
  for (guint i = 0; i < MEMRES_EXPORT_DATA_SIZE; i++)
    {
      key[i] = 1;
      g_assert_cmpuint (_memres_ipc_mappings_hash (key), !=, base);
      key[i] = 0;
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ipc-mappings/one-bucket", test_one_bucket);
  g_test_add_func ("/ipc-mappings/few-buckets", test_few_buckets);
  g_test_add_func ("/ipc-mappings/distinct", test_distinct);
  g_test_add_func ("/ipc-mappings/reuse", test_reuse);
  g_test_add_func ("/ipc-mappings/churn", test_churn);
  g_test_add_func ("/ipc-mappings/peak-then-churn", test_peak_then_churn);
  g_test_add_func ("/ipc-mappings/hash", test_hash);
  return g_test_run ();
}
