"""The contract between generated code and the runtime: entry points, statuses, layout."""

PARAM_ALIGN = 16          # bytes; numpy's allocator guarantees it, kernels assume it
STATUS_OK = 0             # what an entry function returns
STATUS_NO_MEMORY = 1
STATUS_BAD_ARGUMENT = 2   # misaligned or overlapping arrays (the array entry only)
ARRAY_ENTRY_SUFFIX = ".arrays"   # <name>.arrays takes numpy array objects instead of pointers
PACKED_ENTRY_SUFFIX = ".packed"  # <name>.packed takes one array of its arguments' data pointers
ARRAY_DATA_OFFSET = 16    # offsetof(PyArrayObject_fields, data): after ob_refcnt and ob_type
PARALLEL_FOR = "tilefuse_parallel_for"
