/* Layering guard: the snapshot codec (agent/snapshot_encode.c and
 * snapshot_decode.c) is built with this directory first on the include
 * path, so that it stays free of libuv and the fuzz harness links it alone. */
#error "the snapshot codec must not include uv.h: the loop belongs to snapshot_writer.c"
