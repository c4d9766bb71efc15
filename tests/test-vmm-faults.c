/* test-vmm-faults.c: the `vmm` kind's rollback of every failing driver call: allocate, close,
 * growth in place and by move, the move's commit, shrinking. Runs against the fake driver (suite
 * fake) and the real one (suite gpu). */
#include "testutil.h"

#include <string.h>
#include "testutil-vmm.h"

/* --- fault injection ----------------------------------------------------------------------- */

typedef struct
{
  MemresResource *mr;
  MemresBuffer *buf;
  gsize size;     /* bytes the buffer is allocated with (granules until run_sweep) */
  gsize new_size; /* bytes it is resized to (granules until run_sweep) */
  gboolean block; /* keep the range after the buffer reserved, so that growing moves */
  VmmBlocker blocker;
  guint64 address; /* of the buffer before the operation */
} SweepData;

static void
sweep_prepare (SweepData *d)
{
  d->buf = allocate (d->mr, d->size);
  write_pattern (d->buf, 0, d->size, 15);
  d->address = memres_buffer_get_address (d->buf);
  if (d->block)
    d->blocker = block_after (d->buf);
}

static void
sweep_discard (SweepData *d)
{
  unblock (&d->blocker);
  if (d->buf != NULL)
    close_buffer (g_steal_pointer (&d->buf));
}

static gboolean
op_allocate (gpointer data, GError **error)
{
  SweepData *d = data;

  d->buf = memres_resource_allocate (d->mr, d->size, NULL, error);
  return d->buf != NULL;
}

static void
undo_allocate (gpointer data)
{
  sweep_discard (data);
}

static gboolean
op_resize (gpointer data, GError **error)
{
  SweepData *d = data;
  gsize old_size = memres_buffer_get_size (d->buf);

  if (!memres_buffer_resize (d->buf, d->new_size, NULL, error))
    {
      /* the buffer is exactly as it was, data and access included */
      g_assert_cmpuint (memres_buffer_get_address (d->buf), ==, d->address);
      g_assert_cmpuint (memres_buffer_get_size (d->buf), ==, old_size);
      g_assert_cmpint (get_access (d->buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
      check_pattern (d->buf, 0, MIN (d->size, d->new_size), 15);
      write_pattern (d->buf, 0, old_size, 15);
      check_pattern (d->buf, 0, old_size, 15);
      return FALSE;
    }
  return TRUE;
}

static void
undo_resize (gpointer data)
{
  SweepData *d = data;

  sweep_discard (d);
  sweep_prepare (d);
}

static void
check_still_works (MemresResource *mr)
{
  MemresBuffer *buf = allocate (mr, 3 * gran ());

  write_pattern (buf, 0, 3 * gran (), 16);
  resize (buf, 7 * gran ());
  check_pattern (buf, 0, 3 * gran (), 16);
  close_buffer (buf);
}

static void
run_sweep (const char *what, MtOp op, MtUndo undo, SweepData *d, gboolean prepare,
           const char *const *ignore, int min_calls)
{
  FakeCudaCounts base;
  int n;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  d->size *= gran ();
  d->new_size *= gran ();
  mt_fake_counts_begin (&base);
  d->mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, gran ());
  if (prepare)
    sweep_prepare (d);
  n = mt_fault_sweep (what, op, undo, d, 0, ignore);
  g_assert_cmpint (n, >=, min_calls);
  sweep_discard (d);
  check_still_works (d->mr);
  g_clear_pointer (&d->mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* An allocation or growth that runs out of memory says the size asked for, then the step and the
 * bytes its own driver call asked for, then that call: the reservation (cuMemAddressReserve), a
 * chunk's creation (cuMemCreate) and mapping (cuMemMap), the access (cuMemSetAccess). Nothing
 * is left behind. */
static void
test_out_of_memory_names_call (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  gsize g;

  if (!require_device ())
    return;
  if (!mt_require_fake ("injects CUDA_ERROR_OUT_OF_MEMORY"))
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  /* g + 1 bytes: 2g rounded, in two chunks of g */
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  {
    const struct
    {
      const char *call;
      int nth;
      const char *step;
      gsize bytes;
    } cases[] = {
      { "cuMemAddressReserve", 1, "reserving %" G_GSIZE_FORMAT " bytes of address space", 2 * g },
      { "cuMemCreate", 2, "creating %" G_GSIZE_FORMAT " bytes of physical memory", g },
      { "cuMemMap", 1, "mapping %" G_GSIZE_FORMAT " bytes", g },
      { "cuMemSetAccess", 1, "granting access to %" G_GSIZE_FORMAT " bytes", 2 * g },
    };

    for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
      {
        g_autoptr (GError) error = NULL;
        g_autofree char *step = g_strdup_printf (cases[i].step, cases[i].bytes);
        g_autofree char *want
            = g_strdup_printf ("cannot allocate %" G_GSIZE_FORMAT " bytes: %s: %s: "
                               "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                               g + 1, step, cases[i].call);

        mt_fake_fail_call (cases[i].call, cases[i].nth, CUDA_ERROR_OUT_OF_MEMORY);
        buf = memres_resource_allocate (mr, g + 1, NULL, &error);
        mt_fake_reset_faults ();
        g_assert_null (buf);
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
        mt_assert_oom_cause (error, want);
      }
  }
  /* a growth in place: from g to 3g, its second new chunk fails */
  buf = allocate (mr, g);
  {
    g_autoptr (GError) error = NULL;
    g_autofree char *want = g_strdup_printf (
        "cannot grow a buffer of %" G_GSIZE_FORMAT " bytes to %" G_GSIZE_FORMAT
        " bytes: creating %" G_GSIZE_FORMAT " bytes of physical memory: cuMemCreate: "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        g, 3 * g, g);

    mt_fake_fail_call ("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY);
    g_assert_false (memres_buffer_resize (buf, 3 * g, NULL, &error));
    mt_fake_reset_faults ();
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    mt_assert_oom_cause (error, want);
    g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  }
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_faults_allocate (void)
{
  SweepData d = { .size = 3 };

  /* reserve, 3 × (create, map), set access */
  run_sweep ("vmm allocate", op_allocate, undo_allocate, &d, FALSE, NULL, 8);
}

static void
test_faults_grow_in_place (void)
{
  /* A failed probe reservation moves the buffer instead (test_grow_probe_fails). */
  const char *const ignore[] = { "cuMemAddressReserve#1", NULL };
  SweepData d = { .size = 2, .new_size = 5 };

  /* 3 × (create, map), set access */
  run_sweep ("vmm grow in place", op_resize, undo_resize, &d, TRUE, ignore, 7);
}

static void
test_faults_grow_by_move (void)
{
  /* Freeing the probe reservation the driver placed elsewhere cannot be undone; the free of the
   * old range after the move is swept on its own in test_faults_move_commit. */
  const char *const ignore[] = { "cuMemAddressFree", "cuMemAddressReserve#1", NULL };
  SweepData d = { .size = 2, .new_size = 4, .block = TRUE };

  /* (probe), reserve, 2 × map, 2 × (create, map), set access, sync, unmap */
  run_sweep ("vmm grow by move", op_resize, undo_resize, &d, TRUE, ignore, 11);
}

static void
test_faults_shrink (void)
{
  SweepData d = { .size = 5, .new_size = 2 };

  /* sync, 3 × release, unmap */
  run_sweep ("vmm shrink", op_resize, undo_resize, &d, TRUE, NULL, 5);
}

/* A move whose last step fails (freeing the old reservations, here two of them) puts the
 * buffer back where it was, mapped and accessible. */
static void
test_faults_move_commit (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, g);
  resize (buf, 2 * g); /* a second reservation, in place */
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 2 * g, 17);
  blocker = block_after (buf);

  for (int nth = 2; nth <= 3; nth++)
    {
      FakeCudaCounts before;

      mt_fake_get_counts (&before);
      /* the 1st free is the probe's, the 2nd and 3rd those of the old reservations */
      mt_fake_fail_call ("cuMemAddressFree", nth, CUDA_ERROR_NOT_PERMITTED);
      g_assert_false (memres_buffer_resize (buf, 3 * g, NULL, &error));
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED);
      g_clear_error (&error);
      mt_fake_reset_faults ();
      mt_assert_fake_counts_equal (&before);
      g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * g);
      g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
      check_pattern (buf, 0, 2 * g, 17);
    }

  resize (buf, 3 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 2 * g, 17);
  close_buffer (buf);
  unblock (&blocker);
  mt_assert_fake_counts_equal (&base);
}

/* A shrink whose tail spans two reservations unmaps the last one first; when unmapping the
 * other then fails, the memory of the last one is gone already. The buffer keeps its size and
 * address: new memory replaces the lost (its bytes were being dropped), the rest keeps its data,
 * and no driver object is left over. */
static void
test_faults_shrink_split (void)
{
  FakeCudaCounts base, before;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  guint64 address;
  long creates;
  gsize g;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, g);
  address = memres_buffer_get_address (buf);
  resize (buf, 3 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  write_pattern (buf, 0, 3 * g, 21);

  mt_fake_get_counts (&before);
  creates = mt_fake_call_count ("cuMemCreate");
  mt_fake_fail_call ("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_resize (buf, 0, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  mt_assert_fake_counts_equal (&before);
  /* the two chunks of the second reservation were replaced */
  g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates + 2);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * g);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 3 * g);
  check_pattern (buf, 0, g, 21);
  g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  write_pattern (buf, 0, 3 * g, 22);
  check_pattern (buf, 0, 3 * g, 22);

  resize (buf, 0);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A close that cannot wait for its stream changes nothing: the buffer stays open and closes
 * later. Once the teardown began it is not undone: each failing driver call of it is reported,
 * everything else is still released, only what the driver refused is left, and the buffer is
 * closed. The buffer has two reservations (it grew in place) and three chunks. */
static void
test_faults_close (void)
{
  static const struct
  {
    const char *entry;
    int nth;
    gboolean stays_open;
    int reservations, mappings, physical_handles; /* left behind */
  } cases[] = {
    { "cuCtxGetCurrent", 1, TRUE, 0, 0, 0 }, /* no stream sync: nothing released */
    { "cuStreamSynchronize", 1, TRUE, 0, 0, 0 },
    { "cuMemUnmap", 1, FALSE, 1, 1, 0 }, /* the first reservation and its chunk's mapping */
    { "cuMemAddressFree", 1, FALSE, 1, 0, 0 },
    { "cuMemUnmap", 2, FALSE, 1, 2, 0 }, /* the second reservation and its two chunks' mappings */
    { "cuMemAddressFree", 2, FALSE, 1, 0, 0 },
    { "cuMemRelease", 1, FALSE, 0, 0, 1 },
    { "cuMemRelease", 3, FALSE, 0, 0, 1 },
  };
  FakeCudaCounts expected;
  g_autoptr (MemresResource) mr = NULL;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  mt_fake_counts_begin (&expected);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, gran ());

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = allocate (mr, gran ());
      guint64 address = memres_buffer_get_address (buf);

      resize (buf, 3 * gran ());
      g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
      g_test_message ("close with %s #%d failing", cases[i].entry, cases[i].nth);
      mt_fake_fail_call (cases[i].entry, cases[i].nth, CUDA_ERROR_UNKNOWN);
      g_assert_false (memres_buffer_close (buf, NULL, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
      g_assert_nonnull (strstr (error->message, cases[i].entry));
      g_assert_true (memres_buffer_is_closed (buf) == !cases[i].stays_open);
      if (cases[i].stays_open)
        {
          g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
          g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * gran ());
          g_assert_cmpuint (stats (mr).reserved_current, >, 0);
          g_clear_error (&error);
          g_assert_true (memres_buffer_close (buf, NULL, &error));
          g_assert_no_error (error);
        }
      memres_buffer_unref (buf);
      expected.reservations += cases[i].reservations;
      expected.mappings += cases[i].mappings;
      expected.physical_handles += cases[i].physical_handles;
      mt_assert_fake_counts_equal (&expected);
      g_assert_cmpuint (stats (mr).reserved_current, ==, 0);
    }
}

/* --- the core's empty buffer (core/buffer-resize.c) ---------------------------------------- */

/* An empty buffer (0 bytes, address 0) of a tag, grown through `stats>vmm`: the upstream of the
 * counted layer fails. */
typedef struct
{
  MemresResource *mr;
  MemresBuffer *buf;
  const char *tag;
  gsize new_size;      /* bytes it grows to (gran() asks the driver: not inside the sweep) */
  guint64 count_total; /* what `stats` counted for the tag before the growth */
} EmptyData;

static void
empty_prepare (EmptyData *d)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresTagScope) scope = memres_tag_scope_begin (d->tag, &error);

  g_assert_no_error (error);
  d->buf = allocate (d->mr, 0);
  d->count_total = tag_counts (d->mr, d->tag).count_total;
}

/* A failed growth leaves the buffer exactly as it was: open, empty, nothing counted (the
 * resource's usage, the layer below's, the tag's); an out-of-memory error carries the stack's
 * report (core/oom-report.c). */
static void
assert_still_empty (EmptyData *d, const GError *error)
{
  MemresTagCounts t = tag_counts (d->mr, d->tag);
  MemresStats s = stats (d->mr);

  g_assert_false (memres_buffer_is_closed (d->buf));
  g_assert_cmpuint (memres_buffer_get_address (d->buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (d->buf), ==, 0);
  g_assert_cmpuint (s.n_buffers, ==, 1);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (stats (memres_resource_get_upstream (d->mr)).used_current, ==, 0);
  g_assert_cmpuint (t.bytes_current, ==, 0);
  g_assert_cmpuint (t.count_current, ==, 0);
  g_assert_cmpuint (t.count_total, ==, d->count_total);
  if (g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    g_assert_nonnull (strstr (error->message, ". Out of memory, "));
}

static gboolean
op_grow_empty (gpointer data, GError **error)
{
  EmptyData *d = data;

  if (memres_buffer_resize (d->buf, d->new_size, NULL, error))
    return TRUE;
  assert_still_empty (d, *error);
  return FALSE;
}

static void
undo_grow_empty (gpointer data)
{
  EmptyData *d = data;

  close_buffer (g_steal_pointer (&d->buf));
  empty_prepare (d);
}

/* Each driver call of the growth of an empty buffer fails in turn, with
 * CUDA_ERROR_OUT_OF_MEMORY (MEMRES_ERROR_OUT_OF_MEMORY) and with CUDA_ERROR_UNKNOWN (a
 * MEMRES_CUDA_ERROR of that code): the resize fails with it, the buffer is left empty and
 * nothing is counted or left on the device (assert_still_empty(), mt_fault_sweep()); then the
 * buffer grows, its bytes usable, counted under its tag. */
static void
test_faults_grow_from_empty (void)
{
  static const CUresult codes[] = { CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN };
  EmptyData d = { .tag = "vmm-faults-empty" };
  g_autoptr (GError) error = NULL;
  FakeCudaCounts base;
  MemresTagCounts t;
  gsize g;

  g_test_summary ("Each driver call of an empty buffer's growth through stats>vmm failing in turn "
                  "(out of memory, and another CUresult): the resize fails with that error, the "
                  "buffer stays empty and open, nothing is counted or left on the device; then it "
                  "grows.");
  if (!require_device ())
    return;
  if (!mt_require_fake ("injects faults"))
    return;
  g = gran ();
  d.new_size = 2 * g;
  mt_fake_counts_begin (&base);
  d.mr = mt_new_printf_ok ("stats>vmm:chunk=%" G_GSIZE_FORMAT, g);
  empty_prepare (&d);
  for (gsize i = 0; i < G_N_ELEMENTS (codes); i++)
    /* reserve, 2 × (create, map), set access */
    g_assert_cmpint (mt_fault_sweep ("growing an empty buffer", op_grow_empty, undo_grow_empty, &d,
                                     codes[i], NULL),
                     >=, 6);
  /* the first call, the reservation, out of memory: the message says the growth as an
   * allocation's */
  mt_fake_fail_call ("cuMemAddressReserve", 1, CUDA_ERROR_OUT_OF_MEMORY);
  g_assert_false (memres_buffer_resize (d.buf, g + 1, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  {
    g_autofree char *want = g_strdup_printf (
        "cannot allocate %" G_GSIZE_FORMAT " bytes: reserving %" G_GSIZE_FORMAT
        " bytes of address space: cuMemAddressReserve: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        g + 1, 2 * g);

    mt_assert_oom_cause (error, want);
  }
  assert_still_empty (&d, error);
  g_clear_error (&error);
  resize (d.buf, g + 1);
  write_pattern (d.buf, 0, 2 * g, 22);
  check_pattern (d.buf, 0, 2 * g, 22);
  t = tag_counts (d.mr, d.tag);
  g_assert_cmpuint (t.bytes_current, ==, 2 * g);
  g_assert_cmpuint (t.count_current, ==, 1);
  g_assert_cmpuint (t.count_total, ==, d.count_total + 1);
  close_buffer (g_steal_pointer (&d.buf));
  check_still_works (d.mr);
  g_clear_pointer (&d.mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  vmm_test_init (&argc, &argv);
  g_test_add_func ("/vmm/faults/allocate", test_faults_allocate);
  g_test_add_func ("/vmm/faults/out-of-memory-names-call", test_out_of_memory_names_call);
  g_test_add_func ("/vmm/faults/close", test_faults_close);
  g_test_add_func ("/vmm/faults/grow-in-place", test_faults_grow_in_place);
  g_test_add_func ("/vmm/faults/grow-by-move", test_faults_grow_by_move);
  g_test_add_func ("/vmm/faults/move-commit", test_faults_move_commit);
  g_test_add_func ("/vmm/faults/shrink", test_faults_shrink);
  g_test_add_func ("/vmm/faults/shrink-split", test_faults_shrink_split);
  g_test_add_func ("/vmm/faults/grow-from-empty", test_faults_grow_from_empty);
  return g_test_run ();
}
