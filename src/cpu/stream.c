/* stream.c — the output size from which kernels write with streaming
 * stores (stream.h): JAG_STREAM_MIN_BYTES, which tests lower to reach the
 * streamed paths with small tensors. */
#include "stream.h"

int64_t jag__stream_min_bytes = JAG_STREAM_MIN_BYTES;
