/* memres - CUDA memory resources
 * buffer-context.c: Buffer.__enter__ and Buffer.__exit__, the context-manager protocol, without
 * a bound method object made and freed for each. A `with` statement looks both names up on the
 * type and binds them to the buffer (CPython 3.11-3.13 do, through _PyObject_LookupSpecial); a
 * method descriptor would allocate a builtin method for each (a garbage-collected object),
 * which cost a `with allocate(n): pass` more than the allocate+close pair itself. Here the
 * descriptor binds to a small object from a free list that calls the buffer's close() (or
 * returns the buffer) through vectorcall. Unbound, Buffer.__exit__(buf, *exc) works as a method
 * would. */
#include "pymemres.h"

#include <structmember.h>

typedef enum
{
  CONTEXT_ENTER,
  CONTEXT_EXIT,
} ContextKind;

/* The descriptor in the type's dictionary: Buffer.__enter__, Buffer.__exit__. */
typedef struct
{
  PyObject_HEAD ContextKind kind;
  PyObject *name;
  PyObject *doc;
  vectorcallfunc vectorcall;
} ContextDescr;

/* The descriptor bound to a buffer, as `buf.__exit__` gives it. */
typedef struct
{
  PyObject_HEAD PyMemresBuffer *buffer;
  ContextKind kind;
  vectorcallfunc vectorcall;
} ContextBound;

static PyTypeObject ContextDescr_Type;
static PyTypeObject ContextBound_Type;

/* Bound objects kept for reuse (under the GIL; not with the free-threaded build): a `with`
 * holds one __exit__ across its block, nested blocks one each. */
#ifndef Py_GIL_DISABLED
#define FREE_LIST_MAX 16
static ContextBound *free_list[FREE_LIST_MAX];
static int n_free;
#endif

static PyObject *
context_run (ContextKind kind, PyMemresBuffer *buffer)
{
  /* entering a closed buffer is refused as every other use of it (ClosedError); leaving the
   * block closes it, and closing a closed buffer does nothing */
  if (kind == CONTEXT_ENTER)
    return memres_buffer_is_closed (buffer->buf) ? pymemres_raise_closed ()
                                                 : Py_NewRef ((PyObject *) buffer);
  return pymemres_buffer_close_on (buffer, NULL);
}

static PyObject *
bound_vectorcall (PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  ContextBound *self = (ContextBound *) callable;
  Py_ssize_t nargs = PyVectorcall_NARGS (nargsf);

  if (kwnames != NULL && PyTuple_GET_SIZE (kwnames) > 0)
    {
      PyErr_SetString (PyExc_TypeError, "takes no keyword arguments");
      return NULL;
    }
  if (self->kind == CONTEXT_ENTER ? nargs != 0 : nargs != 3)
    {
      PyErr_Format (PyExc_TypeError, "%s() takes %d arguments (%zd given)",
                    self->kind == CONTEXT_ENTER ? "__enter__" : "__exit__",
                    self->kind == CONTEXT_ENTER ? 0 : 3, nargs);
      return NULL;
    }
  return context_run (self->kind, self->buffer);
}

static void
bound_dealloc (ContextBound *self)
{
  Py_CLEAR (self->buffer);
#ifndef Py_GIL_DISABLED
  if (n_free < FREE_LIST_MAX)
    {
      free_list[n_free++] = self;
      return;
    }
#endif
  PyObject_Free (self);
}

static PyObject *
descr_get (ContextDescr *self, PyObject *obj, PyObject *type)
{
  ContextBound *bound;

  if (obj == NULL || obj == Py_None)
    return Py_NewRef ((PyObject *) self);
  if (!PyObject_TypeCheck (obj, &PyMemresBuffer_Type))
    {
      PyErr_Format (PyExc_TypeError, "%U needs a memres.Buffer, not %.100s", self->name,
                    Py_TYPE (obj)->tp_name);
      return NULL;
    }
#ifndef Py_GIL_DISABLED
  if (n_free > 0)
    {
      bound = free_list[--n_free];
      PyObject_Init ((PyObject *) bound, &ContextBound_Type);
    }
  else
#endif
    {
      bound = PyObject_New (ContextBound, &ContextBound_Type);
      if (bound == NULL)
        return NULL;
    }
  bound->buffer = (PyMemresBuffer *) Py_NewRef (obj);
  bound->kind = self->kind;
  bound->vectorcall = bound_vectorcall;
  return (PyObject *) bound;
}

/* Buffer.__exit__(buf, *exc) and Buffer.__enter__(buf), unbound */
static PyObject *
descr_vectorcall (PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  ContextDescr *self = (ContextDescr *) callable;
  Py_ssize_t nargs = PyVectorcall_NARGS (nargsf);
  PyObject *bound, *result;

  if (nargs < 1)
    {
      PyErr_Format (PyExc_TypeError, "unbound %U needs a memres.Buffer argument", self->name);
      return NULL;
    }
  bound = descr_get (self, args[0], NULL);
  if (bound == NULL)
    return NULL;
  result = bound_vectorcall (bound, args + 1, nargs - 1, kwnames);
  Py_DECREF (bound);
  return result;
}

static PyObject *
descr_repr (ContextDescr *self)
{
  return PyUnicode_FromFormat ("<method '%U' of 'memres.Buffer' objects>", self->name);
}

static PyObject *
bound_repr (ContextBound *self)
{
  return PyUnicode_FromFormat ("<built-in method %s of memres.Buffer object at %p>",
                               self->kind == CONTEXT_ENTER ? "__enter__" : "__exit__",
                               (void *) self->buffer);
}

static void
descr_dealloc (ContextDescr *self)
{
  Py_XDECREF (self->name);
  Py_XDECREF (self->doc);
  PyObject_Free (self);
}

static PyMemberDef descr_members[] = {
  { "__name__", T_OBJECT, offsetof (ContextDescr, name), READONLY, NULL },
  { "__doc__", T_OBJECT, offsetof (ContextDescr, doc), READONLY, NULL },
  { NULL },
};

static PyTypeObject ContextDescr_Type = {
  PyVarObject_HEAD_INIT (NULL, 0).tp_name = "memres._memres.BufferContextMethod",
  .tp_basicsize = sizeof (ContextDescr),
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
  .tp_doc = "Buffer.__enter__ and Buffer.__exit__ (the context-manager protocol).",
  .tp_dealloc = (destructor) descr_dealloc,
  .tp_repr = (reprfunc) descr_repr,
  .tp_call = PyVectorcall_Call,
  .tp_vectorcall_offset = offsetof (ContextDescr, vectorcall),
  .tp_descr_get = (descrgetfunc) descr_get,
  .tp_members = descr_members,
};

static PyTypeObject ContextBound_Type = {
  PyVarObject_HEAD_INIT (NULL, 0).tp_name = "memres._memres.BoundBufferContextMethod",
  .tp_basicsize = sizeof (ContextBound),
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
  .tp_doc = "Buffer.__enter__ or Buffer.__exit__ bound to a buffer.",
  .tp_dealloc = (destructor) bound_dealloc,
  .tp_repr = (reprfunc) bound_repr,
  .tp_call = PyVectorcall_Call,
  .tp_vectorcall_offset = offsetof (ContextBound, vectorcall),
};

static int
add_descr (ContextKind kind, const char *name, const char *doc)
{
  ContextDescr *descr = PyObject_New (ContextDescr, &ContextDescr_Type);
  int ret;

  if (descr == NULL)
    return -1;
  descr->kind = kind;
  descr->name = PyUnicode_InternFromString (name);
  descr->doc = PyUnicode_FromString (doc);
  descr->vectorcall = descr_vectorcall;
  if (descr->name == NULL || descr->doc == NULL)
    {
      Py_DECREF (descr);
      return -1;
    }
  ret = PyDict_SetItem (PyMemresBuffer_Type.tp_dict, descr->name, (PyObject *) descr);
  Py_DECREF (descr);
  return ret;
}

int
pymemres_buffer_context_init (void)
{
  if (PyType_Ready (&ContextDescr_Type) < 0 || PyType_Ready (&ContextBound_Type) < 0
      || add_descr (CONTEXT_ENTER, "__enter__",
                    "__enter__() -> Buffer\n\nReturns the buffer; raises ClosedError for "
                    "a closed buffer.")
             < 0
      || add_descr (CONTEXT_EXIT, "__exit__",
                    "__exit__(exc_type, exc_value, traceback)\n\n"
                    "Closes the buffer (close()) and lets an exception of the block go on.\n"
                    "A close that fails raises its own error, the block's exception kept as\n"
                    "its __context__ (as io's files and contextlib.ExitStack do).")
             < 0)
    return -1;
  PyType_Modified (&PyMemresBuffer_Type);
  return 0;
}
