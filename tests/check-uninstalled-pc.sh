#!/bin/sh
# check-uninstalled-pc.sh CC UNINSTALLED_DIR LIBDIR: what `meson devenv` users get from the build
# tree's memres-2-uninstalled.pc (PKG_CONFIG_PATH=UNINSTALLED_DIR), as a TAP stream (Meson test
# `uninstalled-pc`, suite build): a program including <memres/memres.h> compiles and links with
# its Cflags and Libs and runs against LIBDIR's libmemres, and plugindir is not empty.
set -u

cc=$1
PKG_CONFIG_PATH=$2${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
libdir=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

echo "1..2"
cat > "$tmp/app.c" <<'C'
#include <memres/memres.h>
int
main (void)
{
  GError *error = NULL;
  MemresResource *mr = memres_resource_new ("host", &error);
  MemresBuffer *buf = mr != NULL ? memres_resource_allocate (mr, 4096, NULL, &error) : NULL;
  int ok = buf != NULL && memres_buffer_get_size (buf) == 4096;

  g_clear_pointer (&buf, memres_buffer_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_error (&error);
  return ok ? 0 : 1;
}
C
# shellcheck disable=SC2046 # the flags are words
if "$cc" "$tmp/app.c" -o "$tmp/app" $(pkg-config --cflags --libs memres-2) 2> "$tmp/err" \
   && LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/app"; then
  echo "ok 1 a program compiles, links and runs with pkg-config memres-2 from the build tree"
else
  sed 's/^/# /' "$tmp/err"
  echo "not ok 1 a program compiles, links and runs with pkg-config memres-2 from the build tree"
fi
dir=$(pkg-config --variable=plugindir memres-2)
if [ -n "$dir" ]; then
  echo "ok 2 plugindir is $dir"
else
  echo "not ok 2 plugindir is empty"
fi
