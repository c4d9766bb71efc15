/* test-nccl.c: memres-nccl.h against tests/fakenccl (MEMRES_NCCL_LIBRARY), or against no NCCL at
 * all (MEMRES_TEST_NCCL=absent). Registrations follow segments, not buffers (cache over host,
 * suite core); a segment is deregistered before the fake driver unmaps it (vmm, suite fake);
 * NCCL failures at creation, in events and at the end are reported with their domain and code
 * and leave nothing registered; windows; bad input; NCCL absent is NOT_SUPPORTED. On the fake
 * driver (suite fake), NCCL's registrations are the resource's segments at every step: an arena's
 * granules (deregistered before the trim unmaps them), a vmm buffer grown as PyTorch's expandable
 * segments grow (registered again, whole), and a tag's sleep and wake (each of its segments
 * deregistered before the sleep's first unmap, registered again after the wake's last map and
 * access, a sleeping buffer's close calling NCCL for nothing; a registrar made or freed while a
 * tag sleeps), a chunk of cache>dmr deregistered before dmr frees it, no window over a sleeping
 * buffer. A registration failing at each existing segment in turn (vmm, arena, cache>vmm) leaves
 * nothing registered or subscribed; the resource dropped before its registrar is finalized after
 * the registrar deregistered everything; a window stays as registered while the arena grows,
 * and a closed buffer's window is refused before NCCL is called. */
#include "testutil.h"

#include <memres/memres.h>

#include "segment-check.h"

#include <dlfcn.h>
#include <string.h>

#define COMM ((gpointer) (guintptr) 0x5eed)

typedef void (*HookFunc) (const char *call, void *base, size_t size, void *data);

static struct
{
  void (*fail) (const char *entry, long nth, int code);
  long (*calls) (const char *entry);
  long (*live) (int window, size_t *bytes, int *flags);
  void (*set_hook) (HookFunc hook, void *data);
  void (*forget_all) (void);
} fake;

static void
fake_open (void)
{
  /* the same handle memres opened (or will) */
  gpointer h = dlopen (g_getenv ("MEMRES_NCCL_LIBRARY"), RTLD_NOW | RTLD_LOCAL);

  g_assert_nonnull (h);
  *(gpointer *) &fake.fail = dlsym (h, "fakenccl_fail");
  *(gpointer *) &fake.calls = dlsym (h, "fakenccl_calls");
  *(gpointer *) &fake.live = dlsym (h, "fakenccl_live");
  *(gpointer *) &fake.set_hook = dlsym (h, "fakenccl_set_hook");
  *(gpointer *) &fake.forget_all = dlsym (h, "fakenccl_forget_all");
  g_assert_nonnull (fake.fail);
  g_assert_nonnull (fake.set_hook);
}

static MemresNcclRegistrar *
registrar_ok (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresNcclRegistrar *reg = memres_nccl_registrar_new (mr, COMM, &error);

  g_assert_no_error (error);
  g_assert_nonnull (reg);
  return reg;
}

static void
free_ok (MemresNcclRegistrar *reg)
{
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_nccl_registrar_free (reg, &error));
}

static MemresNcclCounts
counts_of (MemresNcclRegistrar *reg)
{
  MemresNcclCounts c;

  memres_nccl_registrar_get_counts (reg, &c);
  return c;
}

/* The distinct segments the buffers lie in, through memres_lookup(). */
static guint
segments_of (MemresBuffer **bufs, guint n, guint64 *bytes)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);

  *bytes = 0;
  for (guint i = 0; i < n; i++)
    {
      MemresLookupInfo info;

      g_assert_true (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
      if (!g_hash_table_contains (seen, &info.segment.base))
        {
          g_hash_table_add (seen, g_memdup2 (&info.segment.base, sizeof (guint64)));
          *bytes += info.segment.length;
        }
    }
  return g_hash_table_size (seen);
}

/* ---- registrations follow segments (host memory through cache) ------------------------------- */

static void
test_registrations_equal_segments (void)
{
  enum
  {
    N = 300
  };
  MemresResource *mr = mt_new_ok ("cache:chunk=64KiB>host");
  MemresBuffer *bufs[N];
  MemresNcclRegistrar *reg;
  MemresNcclCounts c;
  guint64 bytes = 0;
  size_t fake_bytes = 0;
  guint segs;

  for (guint i = 0; i < N / 2; i++) /* before the registrar: registered at its creation */
    bufs[i] = mt_alloc_ok (mr, 256 + 512 * (i % 4), NULL);
  reg = registrar_ok (mr);
  for (guint i = N / 2; i < N; i++) /* after: registered as their chunks are mapped */
    bufs[i] = mt_alloc_ok (mr, 256 + 512 * (i % 4), NULL);

  segs = segments_of (bufs, N, &bytes);
  c = counts_of (reg);
  g_assert_cmpuint (segs, <, N / 10); /* many buffers a chunk */
  g_assert_cmpuint (c.registered, ==, segs);
  g_assert_cmpuint (c.registered_bytes, ==, bytes);
  g_assert_cmpuint (c.registrations, ==, segs);
  g_assert_cmpuint (c.deregistrations, ==, 0);
  g_assert_cmpuint (c.failures, ==, 0);
  g_assert_cmpint (fake.live (0, &fake_bytes, NULL), ==, segs);
  g_assert_cmpuint (fake_bytes, ==, bytes);
  g_assert_true (memres_nccl_registrar_check (reg, NULL));

  /* the chunks go back at a trim: each deregistered first */
  for (guint i = 0; i < N; i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_true (memres_resource_trim (mr, 0, NULL));
  c = counts_of (reg);
  g_assert_cmpuint (c.registered, ==, 0);
  g_assert_cmpuint (c.registered_bytes, ==, 0);
  g_assert_cmpuint (c.deregistrations, ==, segs);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  free_ok (reg);
  memres_resource_unref (mr);
}

/* Freed with segments still mapped: each deregistered, the resource untouched. */
static void
test_free_deregisters (void)
{
  MemresResource *mr = mt_new_ok ("stats>cache:max_block=4KiB>host"); /* through stats */
  MemresBuffer *a = mt_alloc_ok (mr, 100 * 1024, NULL);
  MemresBuffer *b = mt_alloc_ok (mr, 300, NULL);
  MemresNcclRegistrar *reg = registrar_ok (mr);
  MemresNcclCounts c = counts_of (reg);

  g_assert_cmpuint (c.registered, ==, 2);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 2);
  free_ok (reg);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  memres_resource_unref (mr);
}

/* ---- failures -------------------------------------------------------------------------------- */

static void
test_fail_at_creation (void)
{
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *bufs[3];
  g_autoptr (GError) error = NULL;
  MemresNcclRegistrar *reg;

  for (guint i = 0; i < 3; i++)
    bufs[i] = mt_alloc_ok (mr, 64 * 1024, NULL); /* three segments */
  fake.fail ("ncclCommRegister", 2, 5);          /* the second: ncclInvalidUsage */
  reg = memres_nccl_registrar_new (mr, COMM, &error);
  g_assert_null (reg);
  g_assert_error (error, MEMRES_NCCL_ERROR, 5);
  g_assert_nonnull (strstr (error->message, "ncclCommRegister"));
  g_assert_nonnull (strstr (error->message, "invalid usage"));
  g_assert_nonnull (strstr (error->message, "fakenccl: failed on demand"));
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0); /* the others deregistered */
  /* nothing left subscribed: closing maps nothing into NCCL */
  for (guint i = 0; i < 3; i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  memres_resource_unref (mr);
}

static void
test_fail_in_events (void)
{
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresNcclRegistrar *reg = registrar_ok (mr);
  g_autoptr (GError) error = NULL;
  MemresBuffer *a, *b;
  MemresNcclCounts c;

  fake.fail ("ncclCommRegister", 1, 2);  /* ncclSystemError */
  a = mt_alloc_ok (mr, 64 * 1024, NULL); /* the allocation stands */
  b = mt_alloc_ok (mr, 64 * 1024, NULL);
  c = counts_of (reg);
  g_assert_cmpuint (c.registered, ==, 1);
  g_assert_cmpuint (c.failures, ==, 1);
  g_assert_false (memres_nccl_registrar_check (reg, &error));
  g_assert_error (error, MEMRES_NCCL_ERROR, 2);
  g_clear_error (&error);

  mt_close_ok (a, NULL); /* never registered: no deregistration */
  g_assert_cmpuint (counts_of (reg).deregistrations, ==, 0);
  fake.fail ("ncclCommDeregister", 1, 3); /* ncclInternalError at b's unmap */
  mt_close_ok (b, NULL);
  c = counts_of (reg);
  g_assert_cmpuint (c.registered, ==, 0); /* forgotten: the memory is gone */
  g_assert_cmpuint (c.failures, ==, 2);
  g_assert_false (memres_nccl_registrar_check (reg, &error));
  g_assert_error (error, MEMRES_NCCL_ERROR, 2); /* the first one */
  free_ok (reg);
  fake.forget_all (); /* the one NCCL refused to deregister */
  memres_resource_unref (mr);
}

static void
test_fail_at_free (void)
{
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *a = mt_alloc_ok (mr, 64 * 1024, NULL);
  MemresBuffer *b = mt_alloc_ok (mr, 64 * 1024, NULL);
  MemresNcclRegistrar *reg = registrar_ok (mr);
  g_autoptr (GError) error = NULL;

  fake.fail ("ncclCommDeregister", 1, 4);
  g_assert_false (memres_nccl_registrar_free (reg, &error));
  g_assert_error (error, MEMRES_NCCL_ERROR, 4);
  g_assert_nonnull (strstr (error->message, "ncclCommDeregister"));
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 1); /* the one NCCL refused; the other went */
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  fake.forget_all ();
  memres_resource_unref (mr);
}

/* Freed while an event's ncclCommRegister runs on another thread (held inside NCCL by the fake's
 * hook): the free waits for it or the event finds the registrar closed; either way nothing is
 * left registered once both are done, the allocation stands, and the segment's later unmap calls
 * NCCL for nothing. */
typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean inside, release, freeing;
  MemresResource *mr;
  MemresNcclRegistrar *reg;
} Held;

static void
hold_hook (const char *call, void *base, size_t size, void *data)
{
  Held *h = data;

  if (strcmp (call, "ncclCommRegister") != 0)
    return;
  g_mutex_lock (&h->lock);
  h->inside = TRUE;
  g_cond_broadcast (&h->cond);
  while (!h->release)
    g_cond_wait (&h->cond, &h->lock);
  g_mutex_unlock (&h->lock);
}

static gpointer
held_allocate (gpointer data)
{
  return mt_alloc_ok (((Held *) data)->mr, 64 * 1024, NULL);
}

static gpointer
held_free (gpointer data)
{
  Held *h = data;

  g_mutex_lock (&h->lock);
  h->freeing = TRUE;
  g_cond_broadcast (&h->cond);
  g_mutex_unlock (&h->lock);
  free_ok (h->reg);
  return NULL;
}

static void
test_free_during_event (void)
{
  Held h = { 0 };
  GThread *allocator, *freer;
  MemresBuffer *buf;
  long deregisters;

  g_mutex_init (&h.lock);
  g_cond_init (&h.cond);
  h.mr = mt_new_ok ("cache:max_block=4KiB>host");
  h.reg = registrar_ok (h.mr);
  fake.set_hook (hold_hook, &h);
  allocator = g_thread_new ("allocator", held_allocate, &h);
  g_mutex_lock (&h.lock);
  while (!h.inside)
    g_cond_wait (&h.cond, &h.lock);
  g_mutex_unlock (&h.lock);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 1); /* registered, the call not returned */
  freer = g_thread_new ("freer", held_free, &h);
  g_mutex_lock (&h.lock);
  while (!h.freeing)
    g_cond_wait (&h.cond, &h.lock);
  g_mutex_unlock (&h.lock);
  g_usleep (20000); /* the free most likely waits on the registrar's lock now */
  g_mutex_lock (&h.lock);
  h.release = TRUE;
  g_cond_broadcast (&h.cond);
  g_mutex_unlock (&h.lock);
  buf = g_thread_join (allocator);
  g_thread_join (freer);
  fake.set_hook (NULL, NULL);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  deregisters = fake.calls ("ncclCommDeregister");
  mt_close_ok (buf, NULL);
  g_assert_true (memres_resource_trim (h.mr, 0, NULL));
  g_assert_cmpint (fake.calls ("ncclCommDeregister"), ==, deregisters);
  memres_resource_unref (h.mr);
  g_cond_clear (&h.cond);
  g_mutex_clear (&h.lock);
}

/* ---- windows --------------------------------------------------------------------------------- */

static void
test_window (void)
{
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *buf = mt_alloc_ok (mr, 1 << 20, NULL);
  g_autoptr (GError) error = NULL;
  MemresNcclWindow *win;
  size_t bytes = 0;
  int flags = -1;

  win = memres_nccl_window_register (buf, COMM, MEMRES_NCCL_WINDOW_SYMMETRIC, &error);
  g_assert_no_error (error);
  g_assert_nonnull (memres_nccl_window_get_handle (win));
  g_assert_cmpint (fake.live (1, &bytes, &flags), ==, 1);
  g_assert_cmpuint (bytes, ==, 1 << 20);
  g_assert_cmpint (flags, ==, 1);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0); /* a window is no plain registration */
  /* deregistered before the close: the window's reference keeps the structure, not the memory */
  MT_CHECK (memres_nccl_window_deregister (win, &error));
  g_assert_cmpint (fake.live (1, NULL, NULL), ==, 0);
  mt_close_ok (buf, NULL);

  /* NCCL refuses: its code, nothing kept (the buffer's reference dropped: it is freed) */
  buf = mt_alloc_ok (mr, 4096 * 4, NULL);
  fake.fail ("ncclCommWindowRegister", 1, 1);
  g_assert_null (memres_nccl_window_register (buf, COMM, 0, &error));
  g_assert_error (error, MEMRES_NCCL_ERROR, 1);
  g_assert_nonnull (strstr (error->message, "ncclCommWindowRegister"));
  g_clear_error (&error);
  win = memres_nccl_window_register (buf, COMM, 0, &error);
  g_assert_no_error (error);
  fake.fail ("ncclCommWindowDeregister", 1, 6);
  g_assert_false (memres_nccl_window_deregister (win, &error));
  g_assert_error (error, MEMRES_NCCL_ERROR, 6);
  fake.forget_all ();
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void
test_bad_input (void)
{
  MemresResource *host = mt_new_ok ("host");
  MemresResource *cache = mt_new_ok ("cache>host");
  MemresBuffer *buf = mt_alloc_ok (host, 64, NULL);
  g_autoptr (GError) error = NULL;

  g_assert_null (memres_nccl_registrar_new (cache, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_nccl_registrar_new (host, COMM, &error)); /* no segments */
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_null (memres_nccl_window_register (buf, NULL, 0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_nccl_window_register (buf, COMM, 0x10, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  {
    MemresBuffer *empty = mt_alloc_ok (cache, 0, NULL);
    long calls = fake.calls ("ncclCommWindowRegister");

    g_assert_null (memres_nccl_window_register (empty, COMM, 0, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "0 bytes"));
    g_clear_error (&error);
    g_assert_cmpint (fake.calls ("ncclCommWindowRegister"), ==, calls);
    mt_close_ok (empty, NULL);
  }
  g_assert_cmpint (fake.live (0, NULL, NULL) + fake.live (1, NULL, NULL), ==, 0);
  mt_close_ok (buf, NULL);
  memres_resource_unref (cache);
  memres_resource_unref (host);
}

/* ---- the driver: deregistered before the unmap (vmm on the fake) ----------------------------- */

typedef struct
{
  long unmaps_at_deregister;
  long deregisters;
  gboolean found_at_deregister;
} Order;

static void
order_hook (const char *call, void *base, size_t size, void *data)
{
  Order *o = data;
  MemresLookupInfo info;

  if (strcmp (call, "ncclCommDeregister") != 0)
    return;
  o->deregisters++;
  o->unmaps_at_deregister = mt_fake_call_count ("cuMemUnmap");
  o->found_at_deregister = memres_lookup (base, &info) && info.segment.base == (guintptr) base
                           && info.segment.length == size;
}

static void
test_vmm_order (void)
{
  MemresResource *mr;
  MemresBuffer *buf;
  MemresNcclRegistrar *reg;
  Order o = { 0 };
  long unmaps;

  if (!mt_require_fake ("counts the fake driver's unmaps"))
    return;
  mr = mt_new_ok ("vmm");
  buf = mt_alloc_ok (mr, 4 << 20, NULL);
  reg = registrar_ok (mr);
  g_assert_cmpuint (counts_of (reg).registered, ==, 1);
  g_assert_cmpuint (counts_of (reg).registered_bytes, >=, 4 << 20);
  fake.set_hook (order_hook, &o);
  unmaps = mt_fake_call_count ("cuMemUnmap");
  mt_close_ok (buf, NULL);
  fake.set_hook (NULL, NULL);
  g_assert_cmpint (o.deregisters, ==, 1);
  g_assert_cmpint (o.unmaps_at_deregister, ==, unmaps); /* before the driver's unmap */
  g_assert_true (o.found_at_deregister);
  g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), >, unmaps); /* which came after */
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  free_ok (reg);
  memres_resource_unref (mr);
}

/* ---- the registrations are the segments, at every step (the fake driver) --------------------- */

/* What the hook sees of each NCCL call: the driver's unmaps, maps and grants so far. */
typedef struct
{
  MemresResource *mr; /* the layer registered */
  long registers, deregisters;
  long max_unmaps_at_deregister; /* the most cuMemUnmap calls made when one deregistered */
  long min_maps_at_register;     /* the fewest cuMemMap calls made when one registered */
  long min_access_at_register;   /* and cuMemSetAccess */
  gboolean all_found;            /* every range deregistered still found by memres_lookup() */
} Steps;

static void
steps_hook (const char *call, void *base, size_t size, void *data)
{
  Steps *s = data;
  MemresLookupInfo info;

  if (strcmp (call, "ncclCommDeregister") == 0)
    {
      s->deregisters++;
      s->max_unmaps_at_deregister
          = MAX (s->max_unmaps_at_deregister, mt_fake_call_count ("cuMemUnmap"));
      /* still mapped, so still in the index: the segment itself, grown in place at its new
       * length; or, through `cache>arena`, a granule of the arena inside the cache's segment
       * (the index answers the shortest segment holding an address: docs/segments.md) */
      if (!memres_lookup (base, &info) || info.segment.base > (guintptr) base
          || info.segment.base + info.segment.length <= (guintptr) base
          || (info.resource == s->mr
              && (info.segment.base != (guintptr) base || info.segment.length < size)))
        s->all_found = FALSE;
    }
  else if (strcmp (call, "ncclCommRegister") == 0)
    {
      long maps = mt_fake_call_count ("cuMemMap"), access = mt_fake_call_count ("cuMemSetAccess");

      s->registers++;
      s->min_maps_at_register = s->registers == 1 ? maps : MIN (s->min_maps_at_register, maps);
      s->min_access_at_register
          = s->registers == 1 ? access : MIN (s->min_access_at_register, access);
    }
}

static void
steps_begin (Steps *s, MemresResource *mr)
{
  *s = (Steps){ .mr = mr, .all_found = TRUE };
  fake.set_hook (steps_hook, s);
}

static void
steps_end (void)
{
  fake.set_hook (NULL, NULL);
}

/* NCCL's live registrations are @mr's segments now, in number and bytes. */
static void
assert_registered_segments (MemresNcclRegistrar *reg, MemresResource *mr)
{
  guint64 bytes = 0;
  size_t fake_bytes = 0;
  guint n = count_segments_tagged (mr, TRUE, NULL, &bytes);
  MemresNcclCounts c = counts_of (reg);

  g_assert_cmpuint (c.registered, ==, n);
  g_assert_cmpuint (c.registered_bytes, ==, bytes);
  g_assert_cmpint (fake.live (0, &fake_bytes, NULL), ==, n);
  g_assert_cmpuint (fake_bytes, ==, bytes);
  g_assert_cmpuint (c.failures, ==, 0);
}

static MemresBuffer *
alloc_tagged_ok (MemresResource *mr, const char *tag, gsize size)
{
  MemresBuffer *buf;

  g_assert_true (memres_tag_push (tag, NULL));
  buf = mt_alloc_ok (mr, size, NULL);
  g_assert_true (memres_tag_pop (tag, NULL));
  return buf;
}

/* An arena's mapped granules are registered (one registration per granule, however many
 * buffers lie in it), the ones mapped later too; a trim deregisters each idle granule before
 * the driver unmaps any. */
static void
test_arena (void)
{
  MemresResource *mr;
  MemresBuffer *bufs[40];
  MemresNcclRegistrar *reg;
  MemresNcclCounts c;
  Steps s;
  long unmaps;
  guint64 large = 0;
  gsize g;
  guint n;

  if (!mt_require_fake ("counts the fake driver's unmaps"))
    return;
  g = mt_device_granularity ();
  mr = mt_new_ok ("arena");
  for (guint i = 0; i < 20; i++) /* small ones share granules */
    bufs[i] = mt_alloc_ok (mr, 4096 * (i + 1), NULL);
  reg = registrar_ok (mr);
  n = count_segments (mr);
  g_assert_cmpuint (n, >=, 1);
  g_assert_cmpuint (n, <, 20);
  assert_registered_segments (reg, mr);
  for (guint i = 20; i < 40; i++) /* large ones: several granules each */
    {
      bufs[i] = mt_alloc_ok (mr, 3 * g + 4096 * i, NULL);
      large += 3 * g + 4096 * i;
    }
  assert_registered_segments (reg, mr);
  c = counts_of (reg);
  g_assert_cmpuint (c.registered_bytes, ==, c.registered * g); /* a granule is a segment */
  g_assert_cmpuint (c.registered_bytes - n * g, >=, large);
  g_assert_cmpuint (c.registered_bytes - n * g, <, large + 2 * g);
  g_assert_cmpuint (c.registrations, ==, c.registered);
  g_assert_cmpuint (c.deregistrations, ==, 0);

  for (guint i = 0; i < 40; i++)
    mt_close_ok (bufs[i], NULL);
  unmaps = mt_fake_call_count ("cuMemUnmap");
  steps_begin (&s, mr);
  g_assert_true (memres_resource_trim (mr, 0, NULL));
  steps_end ();
  g_assert_cmpint (s.deregisters, ==, c.registered);
  g_assert_true (s.all_found);
  g_assert_cmpint (s.max_unmaps_at_deregister, ==, unmaps); /* none unmapped before */
  g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), >, unmaps);
  assert_registered_segments (reg, mr);
  g_assert_cmpuint (counts_of (reg).registered, ==, 0);
  g_assert_cmpuint (counts_of (reg).deregistrations, ==, c.registered);
  free_ok (reg);
  memres_resource_unref (mr);
}

/* A vmm buffer grown and shrunk (PyTorch's expandable segments grow their segment so): NCCL
 * cannot grow a registration, so the segment is deregistered and registered again, whole; a
 * move or a shrink is deregistered before its old range is unmapped. */
static void
test_vmm_grow (void)
{
  MemresResource *mr;
  MemresBuffer *buf;
  MemresNcclRegistrar *reg;
  MemresNcclCounts c;
  MemresLookupInfo info;
  g_autoptr (GError) error = NULL;
  Steps s;
  long unmaps;
  gsize g;

  if (!mt_require_fake ("counts the fake driver's unmaps"))
    return;
  g = mt_device_granularity ();
  mr = mt_new_ok ("vmm");
  buf = mt_alloc_ok (mr, 2 * g, NULL);
  reg = registrar_ok (mr);
  mt_write_pattern (buf, 0, 2 * g, 7, NULL);

  unmaps = mt_fake_call_count ("cuMemUnmap");
  steps_begin (&s, mr);
  MT_CHECK (memres_buffer_resize (buf, 5 * g, NULL, &error));
  steps_end ();
  assert_registered_segments (reg, mr);
  c = counts_of (reg);
  g_assert_cmpuint (c.registered, ==, 1);
  g_assert_cmpuint (c.registered_bytes, ==, 5 * g);
  g_assert_cmpuint (c.registrations, ==, 2);
  g_assert_cmpuint (c.deregistrations, ==, 1);
  g_assert_cmpint (s.deregisters, ==, 1);
  g_assert_cmpint (s.registers, ==, 1);
  g_assert_true (s.all_found);
  g_assert_cmpint (s.max_unmaps_at_deregister, ==, unmaps);
  mt_check_pattern (buf, 0, 2 * g, 7, NULL);

  unmaps = mt_fake_call_count ("cuMemUnmap");
  steps_begin (&s, mr);
  MT_CHECK (memres_buffer_resize (buf, g, NULL, &error));
  steps_end ();
  assert_registered_segments (reg, mr);
  c = counts_of (reg);
  /* the chunks past the new size unmapped (the first chunk, of 2 granules, stays whole) */
  g_assert_true (memres_lookup (memres_buffer_get_pointer (buf), &info));
  g_assert_cmpuint (info.segment.length, <, 5 * g);
  g_assert_cmpuint (info.segment.length, >=, g);
  g_assert_cmpuint (c.registered, ==, 1);
  g_assert_cmpuint (c.registered_bytes, ==, info.segment.length);
  g_assert_cmpuint (c.deregistrations, ==, 2);
  g_assert_true (s.all_found);
  g_assert_cmpint (s.max_unmaps_at_deregister, ==, unmaps); /* before the shrink's unmap */
  mt_check_pattern (buf, 0, g, 7, NULL);

  mt_close_ok (buf, NULL);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  free_ok (reg);
  memres_resource_unref (mr);
}

/* A tag's sleep and wake under a registrar (docs/sleep.md, segment events): each segment the
 * sleep unmaps is deregistered before the sleep's first unmap (on vmm and arena exactly the
 * tag's segments; through a cache at least those), the other tag's stay registered; a buffer
 * closed while it sleeps costs NCCL nothing; the wake registers the segments again once they are
 * mapped and accessible; at every step NCCL holds exactly the resource's segments. */
static void
test_sleep_wake (gconstpointer data)
{
  const char *spec = data;
  gboolean cached = g_str_has_prefix (spec, "cache");
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *kv[6], *w[3];
  MemresNcclRegistrar *reg;
  MemresNcclCounts before, c;
  guint64 kv_bytes = 0, all_bytes = 0, asleep_bytes = 0;
  guint kv_segs, w_segs, all_segs, asleep_segs, closed_segs;
  long unmaps, maps, access;
  Steps s;
  gsize g;

  if (!mt_require_fake ("counts the fake driver's unmaps and maps"))
    return;
  g = mt_device_granularity ();
  mr = mt_new_ok (spec);
  for (guint i = 0; i < 3; i++)
    w[i] = alloc_tagged_ok (mr, "nccl-w", (i + 1) * g);
  for (guint i = 0; i < 6; i++)
    kv[i] = alloc_tagged_ok (mr, "nccl-kv", (i % 3 + 2) * g);
  reg = registrar_ok (mr);
  kv_segs = count_segments_tagged (mr, FALSE, "nccl-kv", &kv_bytes);
  w_segs = count_segments_tagged (mr, FALSE, "nccl-w", NULL);
  all_segs = count_segments_tagged (mr, TRUE, NULL, &all_bytes);
  g_test_message ("%s: %u segments, kv's %u (%" G_GUINT64_FORMAT " bytes), w's %u", spec, all_segs,
                  kv_segs, kv_bytes, w_segs);
  if (!cached)
    {
      g_assert_cmpuint (kv_segs, >=, 6);
      g_assert_cmpuint (w_segs, >=, 3);
    }
  assert_registered_segments (reg, mr);
  before = counts_of (reg);

  unmaps = mt_fake_call_count ("cuMemUnmap");
  steps_begin (&s, mr);
  MT_CHECK (memres_resource_sleep (mr, "nccl-kv", NULL, NULL, &error));
  steps_end ();
  asleep_segs = count_segments_tagged (mr, TRUE, NULL, &asleep_bytes);
  g_assert_cmpuint (asleep_segs, <, all_segs);
  g_assert_cmpint (s.deregisters, ==, all_segs - asleep_segs);
  if (cached)
    g_assert_cmpint (s.deregisters, >=, kv_segs);
  else
    g_assert_cmpint (s.deregisters, ==, kv_segs);
  g_assert_cmpint (s.registers, ==, 0);
  g_assert_true (s.all_found);
  g_assert_cmpint (s.max_unmaps_at_deregister, ==, unmaps); /* every one before the first unmap */
  g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), >, unmaps);
  assert_registered_segments (reg, mr);
  c = counts_of (reg);
  g_assert_cmpuint (c.registered_bytes, ==, before.registered_bytes - (all_bytes - asleep_bytes));
  g_assert_cmpuint (count_segments_tagged (mr, FALSE, "nccl-kv", NULL), ==, 0);
  g_assert_cmpuint (count_segments_tagged (mr, FALSE, "nccl-w", NULL), ==, w_segs);

  /* closed while asleep: its segments went at the sleep, NCCL is not called again */
  steps_begin (&s, mr);
  mt_close_ok (kv[0], NULL);
  steps_end ();
  g_assert_cmpint (s.deregisters + s.registers, ==, 0);
  closed_segs = count_segments (mr);
  assert_registered_segments (reg, mr);

  steps_begin (&s, mr);
  MT_CHECK (memres_resource_wake (mr, "nccl-kv", NULL, &error));
  steps_end ();
  maps = mt_fake_call_count ("cuMemMap");
  access = mt_fake_call_count ("cuMemSetAccess");
  g_assert_cmpint (s.deregisters, ==, 0);
  g_assert_cmpint (s.registers, ==, count_segments (mr) - closed_segs);
  g_assert_cmpint (s.registers, >=, cached ? 1 : 5);
  g_assert_cmpint (s.min_maps_at_register, ==, maps);     /* after the wake's last map */
  g_assert_cmpint (s.min_access_at_register, ==, access); /* and its last grant */
  assert_registered_segments (reg, mr);
  c = counts_of (reg);
  g_assert_cmpuint (c.registrations, ==, before.registrations + s.registers);
  g_assert_cmpuint (c.deregistrations, ==, before.deregistrations + all_segs - asleep_segs);
  g_assert_true (memres_nccl_registrar_check (reg, NULL));

  for (guint i = 1; i < 6; i++)
    mt_close_ok (kv[i], NULL);
  for (guint i = 0; i < 3; i++)
    mt_close_ok (w[i], NULL);
  if (!g_str_equal (spec, "vmm")) /* vmm keeps nothing to trim */
    g_assert_true (memres_resource_trim (mr, 0, NULL));
  g_assert_cmpuint (count_segments (mr), ==, 0);
  assert_registered_segments (reg, mr);
  free_ok (reg);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  memres_resource_unref (mr);
}

/* A window over a sleeping buffer is refused before NCCL is called (no memory under it); the same
 * buffer's window registers once it is awake again. */
static void
test_window_asleep (void)
{
  MemresResource *mr;
  MemresBuffer *buf;
  MemresNcclWindow *win;
  g_autoptr (GError) error = NULL;
  long calls;

  if (!mt_require_fake ("sleeps vmm memory"))
    return;
  mr = mt_new_ok ("vmm");
  buf = alloc_tagged_ok (mr, "nccl-win", mt_device_granularity ());
  MT_CHECK (memres_resource_sleep (mr, "nccl-win", NULL, NULL, &error));
  calls = fake.calls ("ncclCommWindowRegister");
  g_assert_null (memres_nccl_window_register (buf, COMM, MEMRES_NCCL_WINDOW_SYMMETRIC, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_assert_nonnull (strstr (error->message, "nccl-win"));
  g_clear_error (&error);
  g_assert_cmpint (fake.calls ("ncclCommWindowRegister"), ==, calls);
  g_assert_cmpint (fake.live (1, NULL, NULL), ==, 0);

  MT_CHECK (memres_resource_wake (mr, "nccl-win", NULL, &error));
  win = memres_nccl_window_register (buf, COMM, MEMRES_NCCL_WINDOW_SYMMETRIC, &error);
  g_assert_no_error (error);
  g_assert_cmpint (fake.live (1, NULL, NULL), ==, 1);
  MT_CHECK (memres_nccl_window_deregister (win, &error));
  g_assert_cmpint (fake.live (1, NULL, NULL), ==, 0);
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
}

/* Registering the existing segments fails at each one in turn (a sweep over the k-th
 * ncclCommRegister): the creation fails with NCCL's code, the ones registered before it are
 * deregistered, nothing stays subscribed (a later segment calls NCCL for nothing) and the
 * resource's segments are as they were. */
static void
test_fail_halfway (gconstpointer data)
{
  const char *spec = data;
  MemresResource *mr;
  MemresBuffer *bufs[6], *later;
  long calls;
  guint n;
  gsize g;

  if (!mt_require_fake ("maps device memory"))
    return;
  g = mt_device_granularity ();
  mr = mt_new_ok (spec);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = mt_alloc_ok (mr, 2 * g, NULL);
  n = count_segments (mr);
  g_assert_cmpuint (n, >=, G_N_ELEMENTS (bufs));
  for (guint k = 1; k <= n; k++)
    {
      g_autoptr (GError) error = NULL;
      long registers = fake.calls ("ncclCommRegister");
      long deregisters = fake.calls ("ncclCommDeregister");

      fake.fail ("ncclCommRegister", k, 2); /* ncclSystemError */
      g_assert_null (memres_nccl_registrar_new (mr, COMM, &error));
      g_assert_error (error, MEMRES_NCCL_ERROR, 2);
      g_assert_nonnull (strstr (error->message, "ncclCommRegister"));
      g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
      /* each segment tried once (the replay goes on past the failure), each success undone */
      g_assert_cmpint (fake.calls ("ncclCommRegister") - registers, ==, n);
      g_assert_cmpint (fake.calls ("ncclCommDeregister") - deregisters, ==, n - 1);
      g_assert_cmpuint (count_segments (mr), ==, n);
    }
  calls = fake.calls ("ncclCommRegister");
  later = mt_alloc_ok (mr, 4 * g, NULL); /* maps more: no subscriber left */
  g_assert_cmpint (fake.calls ("ncclCommRegister"), ==, calls);
  mt_close_ok (later, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  memres_resource_unref (mr);
}

/* The resource's user reference dropped before the registrar is freed (the registrar holds one):
 * the registrar's free deregisters every segment while it is still mapped, and the resource's
 * finalize, which comes after (at its last buffer's close), unmaps them with no NCCL call. */
static void
test_unref_before_free (gconstpointer data)
{
  const char *spec = data;
  MemresResource *mr;
  MemresBuffer *bufs[12];
  MemresNcclRegistrar *reg;
  MemresNcclCounts c;
  Steps s;
  long unmaps, frees, deregisters;
  gsize g;

  if (!mt_require_fake ("counts the fake driver's unmaps"))
    return;
  g = mt_device_granularity ();
  mr = mt_new_ok (spec);
  reg = registrar_ok (mr);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      g_autoptr (GError) error = NULL;
      gsize size = i % 2 ? 4096 * (i + 1) : g * (i / 2 + 1);

      bufs[i] = memres_resource_allocate (mr, size, NULL, &error); /* vmm rounds to granules */
      g_assert_no_error (error);
      g_assert_cmpuint (memres_buffer_get_size (bufs[i]), >=, size);
    }
  assert_registered_segments (reg, mr);
  memres_resource_unref (mr); /* the buffers and the registrar hold it now */
  for (guint i = 1; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  c = counts_of (reg);
  g_assert_cmpuint (c.registered, >=, 1); /* bufs[0]'s segment, and those the kind keeps */
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, c.registered);

  unmaps = mt_fake_call_count ("cuMemUnmap");
  frees = mt_fake_call_count ("cuMemFreeAsync") + mt_fake_call_count ("cuMemFree");
  steps_begin (&s, NULL);
  free_ok (reg);
  steps_end ();
  g_assert_cmpint (s.deregisters, ==, c.registered);
  g_assert_cmpint (s.max_unmaps_at_deregister, ==, unmaps); /* all before any unmap */
  g_assert_true (s.all_found); /* each still mapped, still in the index */
  g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), ==, unmaps);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync") + mt_fake_call_count ("cuMemFree"), ==,
                   frees);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);

  /* the last buffer's close finalizes the resource: its memory goes, NCCL is not called */
  deregisters = fake.calls ("ncclCommDeregister");
  mt_close_ok (bufs[0], NULL);
  g_assert_cmpint (mt_fake_call_count ("cuMemUnmap") + mt_fake_call_count ("cuMemFreeAsync")
                       + mt_fake_call_count ("cuMemFree"),
                   >, unmaps + frees);
  g_assert_cmpint (fake.calls ("ncclCommDeregister"), ==, deregisters);
}

/* A window covers its buffer as registered: when this rank's arena maps more granules (one rank
 * grows, docs/distributed.md), its plain registrations follow and its window does not change;
 * the window over new memory is a new (collective) call. A closed buffer is refused before NCCL
 * is called. */
static void
test_window_arena_grows (void)
{
  MemresResource *mr;
  MemresBuffer *buf, *more[6], *closed;
  MemresNcclWindow *win, *win2;
  MemresNcclRegistrar *reg;
  g_autoptr (GError) error = NULL;
  size_t bytes = 0;
  guint before;
  gsize g;
  long calls;

  if (!mt_require_fake ("maps arena granules"))
    return;
  g = mt_device_granularity ();
  mr = mt_new_ok ("arena");
  reg = registrar_ok (mr);
  buf = mt_alloc_ok (mr, 2 * g, NULL);
  win = memres_nccl_window_register (buf, COMM, MEMRES_NCCL_WINDOW_SYMMETRIC, &error);
  g_assert_no_error (error);
  before = counts_of (reg).registered;
  for (guint i = 0; i < G_N_ELEMENTS (more); i++)
    more[i] = mt_alloc_ok (mr, 3 * g, NULL);
  assert_registered_segments (reg, mr);
  g_assert_cmpuint (counts_of (reg).registered, >=, before + 3 * G_N_ELEMENTS (more));
  g_assert_cmpint (fake.live (1, &bytes, NULL), ==, 1); /* the window as it was */
  g_assert_cmpuint (bytes, ==, 2 * g);
  win2 = memres_nccl_window_register (more[5], COMM, MEMRES_NCCL_WINDOW_SYMMETRIC, &error);
  g_assert_no_error (error);
  g_assert_cmpint (fake.live (1, &bytes, NULL), ==, 2);
  g_assert_cmpuint (bytes, ==, 5 * g);
  MT_CHECK (memres_nccl_window_deregister (win2, &error));
  MT_CHECK (memres_nccl_window_deregister (win, &error));
  g_assert_cmpint (fake.live (1, NULL, NULL), ==, 0);

  closed = mt_alloc_ok (mr, g, NULL);
  MT_CHECK (memres_buffer_close (closed, NULL, &error));
  calls = fake.calls ("ncclCommWindowRegister");
  g_assert_null (memres_nccl_window_register (closed, COMM, 0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_cmpint (fake.calls ("ncclCommWindowRegister"), ==, calls);
  memres_buffer_unref (closed);

  for (guint i = 0; i < G_N_ELEMENTS (more); i++)
    mt_close_ok (more[i], NULL);
  mt_close_ok (buf, NULL);
  free_ok (reg);
  memres_resource_unref (mr);
}

/* cache>dmr, the shim's default: each chunk the cache gives back to dmr at a trim is
 * deregistered before dmr frees it (the k-th deregistration finds k chunks freed). */
typedef struct
{
  long frees_at_start;
  long deregisters;
  gboolean in_order;
} FreeOrder;

static void
free_order_hook (const char *call, void *base, size_t size, void *data)
{
  FreeOrder *o = data;

  if (strcmp (call, "ncclCommDeregister") != 0)
    return;
  if (mt_fake_call_count ("cuMemFreeAsync") - o->frees_at_start != o->deregisters)
    o->in_order = FALSE;
  o->deregisters++;
}

static void
test_cache_dmr_order (void)
{
  MemresResource *mr;
  MemresBuffer *bufs[8];
  MemresNcclRegistrar *reg;
  FreeOrder o = { 0, 0, TRUE };
  guint n;

  if (!mt_require_fake ("counts the fake driver's frees"))
    return;
  mr = mt_new_ok ("cache:chunk=2MiB>dmr:pool=new");
  for (guint i = 0; i < 8; i++)
    bufs[i] = mt_alloc_ok (mr, (i + 1) * 256 * 1024, NULL);
  reg = registrar_ok (mr);
  n = count_segments (mr);
  g_assert_cmpuint (n, >=, 2);
  assert_registered_segments (reg, mr);
  for (guint i = 0; i < 8; i++)
    mt_close_ok (bufs[i], NULL);
  o.frees_at_start = mt_fake_call_count ("cuMemFreeAsync");
  fake.set_hook (free_order_hook, &o);
  g_assert_true (memres_resource_trim (mr, 0, NULL));
  fake.set_hook (NULL, NULL);
  g_assert_cmpint (o.deregisters, ==, n);
  g_assert_true (o.in_order);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync") - o.frees_at_start, ==, n);
  assert_registered_segments (reg, mr);
  free_ok (reg);
  memres_resource_unref (mr);
}

/* A registrar made while a tag sleeps registers only the segments mapped now (the sleeping ones
 * are not replayed), then the wake's; freed while the tag sleeps again, it deregisters only what
 * is mapped, and the next wake calls NCCL for nothing. */
static void
test_registrar_while_asleep (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *kv[3], *w[2];
  MemresNcclRegistrar *reg;
  guint all, awake;
  long calls;

  if (!mt_require_fake ("sleeps device memory"))
    return;
  mr = mt_new_ok (spec);
  for (guint i = 0; i < 2; i++)
    w[i] = alloc_tagged_ok (mr, "nccl-rw-w", (i + 1) * mt_device_granularity ());
  for (guint i = 0; i < 3; i++)
    kv[i] = alloc_tagged_ok (mr, "nccl-rw-kv", (i + 2) * mt_device_granularity ());
  all = count_segments (mr);
  MT_CHECK (memres_resource_sleep (mr, "nccl-rw-kv", NULL, NULL, &error));
  awake = count_segments (mr);
  g_assert_cmpuint (awake, <, all);

  reg = registrar_ok (mr);
  assert_registered_segments (reg, mr);
  g_assert_cmpuint (counts_of (reg).registrations, ==, awake);
  MT_CHECK (memres_resource_wake (mr, "nccl-rw-kv", NULL, &error));
  assert_registered_segments (reg, mr);
  g_assert_cmpuint (counts_of (reg).registered, ==, all);

  MT_CHECK (memres_resource_sleep (mr, "nccl-rw-kv", NULL, NULL, &error));
  g_assert_cmpuint (counts_of (reg).registered, ==, awake);
  free_ok (reg);
  g_assert_cmpint (fake.live (0, NULL, NULL), ==, 0);
  calls = fake.calls ("ncclCommRegister") + fake.calls ("ncclCommDeregister");
  MT_CHECK (memres_resource_wake (mr, "nccl-rw-kv", NULL, &error));
  g_assert_cmpint (fake.calls ("ncclCommRegister") + fake.calls ("ncclCommDeregister"), ==, calls);
  for (guint i = 0; i < 3; i++)
    mt_close_ok (kv[i], NULL);
  for (guint i = 0; i < 2; i++)
    mt_close_ok (w[i], NULL);
  memres_resource_unref (mr);
}

/* ---- NCCL absent ----------------------------------------------------------------------------- */

static void
test_absent (void)
{
  MemresResource *mr = mt_new_ok ("cache>host");
  MemresBuffer *buf = mt_alloc_ok (mr, 64, NULL);
  g_autoptr (GError) error = NULL;

  g_assert_false (memres_nccl_is_available (&error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "NCCL is not available"));
  g_assert_nonnull (strstr (error->message, "MEMRES_NCCL_LIBRARY"));
  g_clear_error (&error);
  g_assert_null (memres_nccl_registrar_new (mr, COMM, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_null (memres_nccl_window_register (buf, COMM, 0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  if (g_strcmp0 (g_getenv ("MEMRES_TEST_NCCL"), "absent") == 0)
    {
      g_test_add_func ("/nccl/absent", test_absent);
      return g_test_run ();
    }
  fake_open ();
  g_assert_true (memres_nccl_is_available (NULL));
  g_test_add_func ("/nccl/registrations-equal-segments", test_registrations_equal_segments);
  g_test_add_func ("/nccl/free-deregisters", test_free_deregisters);
  g_test_add_func ("/nccl/fail-at-creation", test_fail_at_creation);
  g_test_add_func ("/nccl/fail-in-events", test_fail_in_events);
  g_test_add_func ("/nccl/fail-at-free", test_fail_at_free);
  g_test_add_func ("/nccl/free-during-event", test_free_during_event);
  g_test_add_func ("/nccl/window", test_window);
  g_test_add_func ("/nccl/bad-input", test_bad_input);
  g_test_add_func ("/nccl/vmm-order", test_vmm_order);
  g_test_add_func ("/nccl/arena", test_arena);
  g_test_add_func ("/nccl/vmm-grow", test_vmm_grow);
  g_test_add_func ("/nccl/window-asleep", test_window_asleep);
  g_test_add_func ("/nccl/cache-dmr-order", test_cache_dmr_order);
  g_test_add_data_func ("/nccl/registrar-while-asleep/vmm", "vmm", test_registrar_while_asleep);
  g_test_add_data_func ("/nccl/registrar-while-asleep/arena", "arena", test_registrar_while_asleep);
  g_test_add_data_func ("/nccl/sleep-wake/vmm", "vmm", test_sleep_wake);
  g_test_add_data_func ("/nccl/sleep-wake/arena", "arena", test_sleep_wake);
  g_test_add_data_func ("/nccl/sleep-wake/cache-arena", "cache>arena", test_sleep_wake);
  g_test_add_data_func ("/nccl/sleep-wake/cache-vmm", "cache>vmm", test_sleep_wake);
  g_test_add_data_func ("/nccl/unref-before-free/vmm", "vmm", test_unref_before_free);
  g_test_add_data_func ("/nccl/unref-before-free/arena", "arena", test_unref_before_free);
  g_test_add_data_func ("/nccl/unref-before-free/cache-vmm", "cache>vmm", test_unref_before_free);
  g_test_add_data_func ("/nccl/unref-before-free/cache-arena", "cache>arena",
                        test_unref_before_free);
  g_test_add_data_func ("/nccl/unref-before-free/cache-dmr", "cache>dmr:pool=new",
                        test_unref_before_free);
  g_test_add_func ("/nccl/window-arena-grows", test_window_arena_grows);
  g_test_add_data_func ("/nccl/fail-halfway/vmm", "vmm", test_fail_halfway);
  g_test_add_data_func ("/nccl/fail-halfway/arena", "arena", test_fail_halfway);
  g_test_add_data_func ("/nccl/fail-halfway/cache-vmm", "cache>vmm", test_fail_halfway);
  return g_test_run ();
}
