/* Layering guard: proto/ and core/ are built with this directory first
 * on the include path, so including an I/O library there fails the build. */
#error "proto/ and core/ must not include uv.h: I/O belongs to agent/"
