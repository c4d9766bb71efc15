/* testutil-ipc-attack.h: the loopback half of the IPC attack tests (testutil-ipc-attack.c). */
#ifndef TESTUTIL_IPC_ATTACK_H
#define TESTUTIL_IPC_ATTACK_H

#include "testutil.h"

extern const guint8 attack_uuid[MEMRES_IPC_ID_SIZE];

#define N_SOURCES 40 /* enough mappings at once that the table grows past its first size */

typedef struct
{
  MemresResource *exporter;
  MemresIpcHandle *handle;
  MemresResource *importer;
  MemresBuffer *sources[N_SOURCES];
  MemresBufferDescriptor descs[N_SOURCES];
  gint violations, imports, unmaps;
} Fixture;

gsize source_size (guint i);

guint64 source_address (Fixture *f, guint i);

void fixture_set_up (Fixture *f, gconstpointer data);

void assert_balanced (Fixture *f);

void fixture_tear_down (Fixture *f, gconstpointer data);

MemresBuffer *import_ok (Fixture *f, MemresResource *mr, guint i);

void close_held (Fixture *f, MemresBuffer *buf, guint i);

guint64 n_buffers_of (MemresResource *mr);

const char *field_of (gsize byte);

/* Imports into @importer the descriptor @desc with bit @bit of byte @byte flipped: asserts it is
 * refused with MEMRES_ERROR_INVALID_DESCRIPTOR, the message naming the byte's field where it
 * has one (field_of()). */
void assert_flip_refused (MemresResource *importer, const guint8 *desc, gsize byte, int bit);

typedef struct Worker Worker;

/* One round of an importer thread: imports one buffer, closes it or hands it to a closer. */
typedef void (*RoundFunc) (Worker *w, GRand *rand);

struct Worker
{
  Fixture *f;
  GAsyncQueue *queue;
  guint seed;
  RoundFunc round; /* importers' */
};

void close_here_or_queue (Worker *w, MemresBuffer *buf, guint which, gboolean here);

void run_workers (Fixture *f, RoundFunc round);

/* Registers @func as the test /ipc-attack/loopback/@path on the loopback fixture. */
#define ATTACK_ADD_LOOPBACK(path, func)                                                            \
  g_test_add ("/ipc-attack/loopback/" path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)

#endif
