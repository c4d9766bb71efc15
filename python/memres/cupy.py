"""memres as CuPy's allocator (see memres.cupy.use)."""
