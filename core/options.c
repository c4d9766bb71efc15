/* memres - CUDA memory resources
 * options.c: a kind's options, validated against its schema, and the getters plugins use. */
#include "memres-private.h"

#include <string.h>

/* All zero while unset (the getters' "unset" values); set when @text is. */
typedef struct
{
  char *text; /* the value as written */
  gboolean b;
  gint64 i;
  guint64 size;
  gint64 *list;
  gsize n_list;
} OptionValue;

struct _MemresOptions
{
  MemresKind *kind; /* not a reference: options live inside the kind's init call */
  guint n_values;
  OptionValue *values; /* one per schema entry, same order */
};

/* The schema entry named @name, with its position in @index. */
static const MemresOptionSpec *
find_option (MemresKind *kind, const char *name, guint *index)
{
  for (*index = 0; *index < kind->n_options; (*index)++)
    if (strcmp (kind->options[*index].name, name) == 0)
      return &kind->options[*index];
  return NULL;
}

/* "a, b, c": the kind's option names for error messages. */
static char *
list_option_names (MemresKind *kind)
{
  GString *str = g_string_new (NULL);
  guint i;

  for (i = 0; i < kind->n_options; i++)
    g_string_append_printf (str, "%s%s", i > 0 ? ", " : "", kind->options[i].name);
  return g_string_free (str, FALSE);
}

static gboolean
parse_value (const MemresOptionSpec *spec, const char *text, OptionValue *out, GError **error)
{
  g_autofree char *shown = NULL;

  switch (spec->type)
    {
    case MEMRES_OPTION_BOOL:
      return _memres_parse_bool (text, &out->b, error);
    case MEMRES_OPTION_INT:
      return _memres_parse_int (text, spec->min, spec->max, &out->i, error);
    case MEMRES_OPTION_SIZE:
      return _memres_parse_size (text, &out->size, error);
    case MEMRES_OPTION_ENUM:
      {
        guint i;
        g_autofree char *valid = NULL;

        /* an enum has choices (kind.c checks the schema) */
        for (i = 0; spec->choices[i] != NULL; i++)
          if (strcmp (spec->choices[i], text) == 0)
            {
              out->i = i;
              return TRUE;
            }
        valid = g_strjoinv (", ", (char **) spec->choices);
        shown = _memres_show_input (text);
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "invalid value \"%s\": expected one of %s", shown, valid);
        return FALSE;
      }
    case MEMRES_OPTION_INT_LIST:
      {
        g_auto (GStrv) parts = NULL;
        g_autofree gint64 *list = NULL;
        gsize n, i;

        if (text[0] == '\0') /* the empty list: @out stays zero */
          return TRUE;
        parts = _memres_split (text, '+', FALSE);
        n = g_strv_length (parts);
        list = g_new0 (gint64, n);
        for (i = 0; i < n; i++)
          if (!_memres_parse_int (parts[i], spec->min, spec->max, &list[i], error))
            {
              shown = _memres_show_input (text);
              g_prefix_error (error, "in list \"%s\": ", shown);
              return FALSE;
            }
        out->list = g_steal_pointer (&list);
        out->n_list = n;
        return TRUE;
      }
    default:
      /* MEMRES_OPTION_STRING, any text: a spec writes `,`, `>` and `\\` escaped
       * (_memres_escape_value()); kind.c refuses a schema of any other type */
      return TRUE;
    }
}

static void
option_value_clear (OptionValue *value)
{
  g_clear_pointer (&value->text, g_free);
  g_clear_pointer (&value->list, g_free);
  memset (value, 0, sizeof *value);
}

/* Checks that @text is a valid value for @spec (used to validate a schema's defaults). */
gboolean
_memres_parse_option_value (const MemresOptionSpec *spec, const char *text, GError **error)
{
  OptionValue value = { 0 };
  gboolean ok = parse_value (spec, text, &value, error);

  option_value_clear (&value);
  return ok;
}

void
_memres_options_free (MemresOptions *options)
{
  guint i;

  if (options == NULL)
    return;
  for (i = 0; i < options->n_values; i++)
    option_value_clear (&options->values[i]);
  g_free (options->values);
  g_free (options);
}

/* Validates @keys/@values (from _memres_spec_parse()) against @kind's schema and fills every
 * other key from its default. */
MemresOptions *
_memres_options_new (MemresKind *kind, GPtrArray *keys, GPtrArray *values, GError **error)
{
  MemresOptions *options;
  guint i;

  g_return_val_if_fail (kind != NULL, NULL);

  options = g_new0 (MemresOptions, 1);
  options->kind = kind;
  options->n_values = kind->n_options;
  options->values = g_new0 (OptionValue, MAX (kind->n_options, 1));

  /* a value's text is set once it is given (a key given again) or defaulted */
  for (i = 0; keys != NULL && i < keys->len; i++)
    {
      const char *key = g_ptr_array_index (keys, i);
      const char *text = g_ptr_array_index (values, i);
      guint index;
      const MemresOptionSpec *spec = find_option (kind, key, &index);

      if (spec == NULL)
        {
          g_autofree char *valid = list_option_names (kind);
          g_autofree char *shown = _memres_show_input (key);

          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "kind \"%s\" has no option \"%s\": %s%s", kind->name, shown,
                       kind->n_options == 0 ? "it takes no options" : "valid options are ", valid);
          goto fail;
        }
      if (options->values[index].text != NULL)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "option \"%s\" of kind \"%s\" is given more than once", key, kind->name);
          goto fail;
        }
      if (!parse_value (spec, text, &options->values[index], error))
        {
          g_prefix_error (error, "option \"%s\" of kind \"%s\": ", key, kind->name);
          goto fail;
        }
      options->values[index].text = g_strdup (text);
    }

  for (i = 0; i < kind->n_options; i++)
    {
      const MemresOptionSpec *spec = &kind->options[i];
      OptionValue *value = &options->values[i];

      if (value->text != NULL || spec->default_value == NULL)
        continue;
      /* The schema's defaults were validated when the kind was registered. */
      if (!parse_value (spec, spec->default_value, value, error))
        {
          g_prefix_error (error, "default of option \"%s\" of kind \"%s\": ", spec->name,
                          kind->name);
          goto fail;
        }
      value->text = g_strdup (spec->default_value);
    }
  return options;

fail:
  _memres_options_free (options);
  return NULL;
}

/* "key=value,..." for every option that is set (given or defaulted), in schema order, values
 * escaped as a spec writes them. */
char *
_memres_options_to_string (const MemresOptions *options)
{
  GString *str = g_string_new (NULL);
  guint i;

  for (i = 0; i < options->n_values; i++)
    {
      g_autofree char *text = NULL;

      if (options->values[i].text == NULL)
        continue;
      text = _memres_escape_value (options->values[i].text);
      g_string_append_printf (str, "%s%s=%s", str->len > 0 ? "," : "",
                              options->kind->options[i].name, text);
    }
  return g_string_free (str, FALSE);
}

static const OptionValue *
lookup (const MemresOptions *options, const char *name, MemresOptionType type)
{
  const MemresOptionSpec *spec;
  guint index;

  g_return_val_if_fail (options != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  spec = find_option (options->kind, name, &index);
  if (spec == NULL)
    {
      g_critical ("Kind \"%s\" has no option \"%s\"", options->kind->name, name);
      return NULL;
    }
  /* an enum reads as an int too (memres_options_get_int()) */
  if (type != (MemresOptionType) -1 && spec->type != type
      && !(type == MEMRES_OPTION_INT && spec->type == MEMRES_OPTION_ENUM))
    {
      g_critical ("Option \"%s\" of kind \"%s\" is of type %s, not %s", name, options->kind->name,
                  memres_option_type_to_string (spec->type), memres_option_type_to_string (type));
      return NULL;
    }
  return &options->values[index];
}

/**
 * memres_options_is_set:
 * @options: the options passed to the init slot
 * @name: an option of the kind's schema
 *
 * Whether the option has a value: given in the spec, or defaulted by a non-%NULL
 * default_value. Valid during the init slot only.
 *
 * Returns: %TRUE when set
 *
 * Since: 1.0
 */
gboolean
memres_options_is_set (const MemresOptions *options, const char *name)
{
  const OptionValue *v = lookup (options, name, (MemresOptionType) -1);

  return v != NULL && v->text != NULL;
}

/**
 * memres_options_get_bool:
 * @options: the options passed to the init slot
 * @name: an option of type %MEMRES_OPTION_BOOL
 *
 * The value of a boolean option, for a kind's init slot. A @name that is not in the kind's schema,
 * or of another type, is a programming error: a critical warning, and %FALSE. Sets no error (the
 * core validated every value before init ran); call it from the init slot only.
 *
 * Returns: the value; %FALSE when unset
 *
 * Since: 1.0
 */
gboolean
memres_options_get_bool (const MemresOptions *options, const char *name)
{
  const OptionValue *v = lookup (options, name, MEMRES_OPTION_BOOL);

  return v != NULL && v->b;
}

/**
 * memres_options_get_int:
 * @options: the options passed to the init slot
 * @name: an option of type %MEMRES_OPTION_INT or %MEMRES_OPTION_ENUM
 *
 * For an enum, the index of the chosen value in the option's choices.
 *
 * Returns: the value; 0 when unset
 *
 * Since: 1.0
 */
gint64
memres_options_get_int (const MemresOptions *options, const char *name)
{
  const OptionValue *v;

  g_return_val_if_fail (options != NULL, 0);
  v = lookup (options, name, MEMRES_OPTION_INT);
  return v != NULL ? v->i : 0;
}

/**
 * memres_options_get_size:
 * @options: the options passed to the init slot
 * @name: an option of type %MEMRES_OPTION_SIZE
 *
 * The value of a size option in bytes, for a kind's init slot (the spec's `64MiB` reads as
 * 67108864). A @name that is not in the kind's schema, or of another type, is a programming error:
 * a critical warning, and 0. Sets no error (the core validated every value before init ran); call
 * it from the init slot only.
 *
 * Returns: the size in bytes (`max` is `G_MAXUINT64`); 0 when unset
 *
 * Since: 1.0
 */
guint64
memres_options_get_size (const MemresOptions *options, const char *name)
{
  const OptionValue *v = lookup (options, name, MEMRES_OPTION_SIZE);

  return v != NULL ? v->size : 0;
}

/**
 * memres_options_get_string:
 * @options: the options passed to the init slot
 * @name: any option of the schema
 *
 * The value as written in the spec (or the default), for options of any type; an enum's chosen
 * value, an int list joined with `+`.
 *
 * Returns: (transfer none) (nullable): the text, valid during the init slot; %NULL when unset
 *
 * Since: 1.0
 */
const char *
memres_options_get_string (const MemresOptions *options, const char *name)
{
  const OptionValue *v = lookup (options, name, (MemresOptionType) -1);

  return v != NULL ? v->text : NULL;
}

/**
 * memres_options_get_int_list:
 * @options: the options passed to the init slot
 * @name: an option of type %MEMRES_OPTION_INT_LIST
 * @n_values: (out): return location for the number of values
 *
 * The values of an integer list option (`peers=1+2` reads as 1, 2), for a kind's init slot. A
 * @name that is not in the kind's schema, or of another type, is a programming error: a critical
 * warning, and %NULL. Sets no error (the core validated every value before init ran); call it from
 * the init slot only.
 *
 * Returns: (transfer none) (array length=n_values) (nullable): the values, valid during the
 *   init slot; %NULL with @n_values 0 when unset or empty
 *
 * Since: 1.0
 */
const gint64 *
memres_options_get_int_list (const MemresOptions *options, const char *name, gsize *n_values)
{
  const OptionValue *v = lookup (options, name, MEMRES_OPTION_INT_LIST);

  g_return_val_if_fail (n_values != NULL, NULL);
  *n_values = v != NULL ? v->n_list : 0;
  return v != NULL ? v->list : NULL;
}

/**
 * memres_option_type_to_string:
 * @type: a #MemresOptionType
 *
 * The name of an option type, as `memres kinds` prints it and as error messages name it.
 * Thread-safe; sets no error.
 *
 * Returns: (transfer none): "bool", "int", "size", "enum", "string", "int-list" or "unknown"
 *
 * Since: 1.0
 */
const char *
memres_option_type_to_string (MemresOptionType type)
{
  static const char *const names[] = {
    [MEMRES_OPTION_BOOL] = "bool",     [MEMRES_OPTION_INT] = "int",
    [MEMRES_OPTION_SIZE] = "size",     [MEMRES_OPTION_ENUM] = "enum",
    [MEMRES_OPTION_STRING] = "string", [MEMRES_OPTION_INT_LIST] = "int-list",
  };

  return (guint) type < G_N_ELEMENTS (names) ? names[type] : "unknown";
}
